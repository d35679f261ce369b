#include "models/mxfp4.h"

#include <cmath>

#include "core/error.h"

namespace lathe {
namespace {

// FP4 E2M1 codes 0..15 (transformers' FP4_VALUES): sign bit 3, then 2 exponent bits and one
// mantissa bit.
constexpr float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

void check_sizes(std::span<const uint8_t> blocks, std::span<const uint8_t> scales,
                 const Shape& shape, const char* what) {
  const int64_t n = shape_numel(shape);
  if (shape.empty() || shape.back() % kMxfp4Block != 0 ||
      blocks.size() != static_cast<size_t>(n / 2) ||
      scales.size() != static_cast<size_t>(n / kMxfp4Block))
    fail("internal: ", what, ": ", blocks.size(), " block bytes and ", scales.size(),
         " scales for ", shape_str(shape));
}

}  // namespace

Tensor pack_mxfp4(std::span<const uint8_t> blocks, std::span<const uint8_t> scales,
                  const Shape& shape) {
  check_sizes(blocks, scales, shape, "pack_mxfp4");
  Tensor out = Tensor::zeros(DType::MXFP4, shape);
  mxfp4_pack(blocks.data(), scales.data(), out.mut<void>(), static_cast<int64_t>(scales.size()));
  return out;
}

Tensor dequantize_mxfp4(std::span<const uint8_t> blocks, std::span<const uint8_t> scales,
                        const Shape& shape, DType dtype) {
  check_sizes(blocks, scales, shape, "dequantize_mxfp4");
  if (dtype != DType::F32 && dtype != DType::BF16)
    fail("internal: dequantize_mxfp4 into ", dtype_name(dtype));
  Tensor out = Tensor::zeros(dtype, shape);
  float* f32 = dtype == DType::F32 ? out.mut<float>() : nullptr;
  uint16_t* bf16 = dtype == DType::BF16 ? out.mut<uint16_t>() : nullptr;
  float f32_table[16];
  uint16_t bf16_table[16];
  for (size_t b = 0; b < scales.size(); ++b) {
    // Each code's value at this block's scale, an exact ldexp: torch.ldexp gives the scale 0
    // values as subnormals and the scale 255 (2^128) ones as inf, except the zeros, which stay
    // (signed) zeros, not 0 * inf.
    for (int c = 0; c < 16; ++c) {
      f32_table[c] = std::ldexp(kFp4Values[c], int{scales[b]} - 127);
      bf16_table[c] = f32_to_bf16(f32_table[c]);
    }
    const uint8_t* codes = blocks.data() + b * (kMxfp4Block / 2);
    const size_t at = b * kMxfp4Block;
    for (size_t i = 0; i < kMxfp4Block / 2; ++i) {
      const int lo = codes[i] & 0x0f, hi = codes[i] >> 4;
      if (f32) {
        f32[at + 2 * i] = f32_table[lo];
        f32[at + 2 * i + 1] = f32_table[hi];
      } else {
        bf16[at + 2 * i] = bf16_table[lo];
        bf16[at + 2 * i + 1] = bf16_table[hi];
      }
    }
  }
  return out;
}

}  // namespace lathe
