#include "core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace lathe {
namespace {

// One block of 32 values to its scale and signed codes, rounded as GGUF's reference quantizers
// round them (ggml's quantize_row_q8_0_ref / _q4_0_ref): Q8_0 half away from zero (roundf of
// x / d), Q4_0 half up (the integer part of x / d + 8.5, at most 15), each in f32 with the
// reciprocal of the unrounded scale, so that the codes equal llama.cpp's.
uint16_t quantize_block(DType type, const float* x, int8_t* q) {
  if (type == DType::Q8_0) {
    float amax = 0;
    for (int64_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < kQuantBlock; ++i)
      q[i] = static_cast<int8_t>(std::clamp(std::round(x[i] * id), -127.0f, 127.0f));
    return f32_to_f16(d);
  }
  // Q4_0: the value of largest magnitude, with its sign, maps to -8 exactly.
  float m = 0;
  for (int64_t i = 0; i < kQuantBlock; ++i)
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  const float d = m / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int64_t i = 0; i < kQuantBlock; ++i) {
    const float shifted = x[i] * id + 8.5f;  // in [0.5, 16.5]
    q[i] = static_cast<int8_t>(std::min(15, static_cast<int>(shifted)) - 8);
  }
  return f32_to_f16(d);
}

void check_groups(int64_t n, const char* what) {
  if (n < 0 || n % kQuantGroup != 0)
    fail("internal: ", what, " of ", n, " values is not whole groups of ", kQuantGroup);
}

}  // namespace

std::optional<DType> quant_type_from_name(std::string_view name) {
  if (name == "q8_0") return DType::Q8_0;
  if (name == "q4_0") return DType::Q4_0;
  return std::nullopt;
}

void quantize_rows(DType type, const float* src, void* dst, int64_t rows, int64_t k) {
  if (!is_quantized(type)) fail("internal: quantize_rows to ", dtype_name(type));
  check_groups(k, "a quantized row");
  const int zp = quant_zero_point(type);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g < rows * (k / kQuantGroup); ++g) {
    const float* x = src + g * kQuantGroup;
    int8_t q[kQuantGroup];
    const uint16_t d[2] = {quantize_block(type, x, q), quantize_block(type, x + 32, q + 32)};
    std::memcpy(out, d, 4);
    uint8_t* codes = out + 4;
    if (type == DType::Q8_0) {
      for (int64_t i = 0; i < kQuantGroup; ++i) codes[i] = static_cast<uint8_t>(q[i] + zp);
    } else {
      for (int64_t i = 0; i < 32; ++i)
        codes[i] = static_cast<uint8_t>((q[i] + zp) | (q[i + 32] + zp) << 4);
    }
    out += quant_group_bytes(type);
  }
}

void dequantize(DType type, const void* src, float* dst, int64_t n) {
  if (!is_quantized(type)) fail("internal: dequantize from ", dtype_name(type));
  check_groups(n, "a dequantized run");
  const int zp = quant_zero_point(type);
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t g = 0; g < n / kQuantGroup; ++g) {
    uint16_t d16[2];
    std::memcpy(d16, in, 4);
    const float d[2] = {f16_to_f32(d16[0]), f16_to_f32(d16[1])};
    const uint8_t* codes = in + 4;
    float* y = dst + g * kQuantGroup;
    for (int64_t i = 0; i < kQuantGroup; ++i) {
      const int c = type == DType::Q8_0 ? codes[i] : i < 32 ? codes[i] & 0x0f : codes[i - 32] >> 4;
      y[i] = d[i / 32] * static_cast<float>(c - zp);
    }
    in += quant_group_bytes(type);
  }
}

}  // namespace lathe
