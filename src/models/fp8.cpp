#include "models/fp8.h"

#include <cstring>

#include "core/fp8.h"

namespace lathe {

Tensor dequantize_fp8(std::span<const uint8_t> codes, const Shape& shape,
                      std::span<const float> scales, int64_t scale_rows, int64_t scale_cols,
                      DType dtype) {
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  const int64_t block_rows = rows / scale_rows, block_cols = cols / scale_cols;
  const int64_t matrices = shape_numel(shape) / (rows * cols);
  float value[256];  // every code's value, once
  for (int code = 0; code < 256; ++code) value[code] = e4m3_to_f32(static_cast<uint8_t>(code));
  Tensor f = Tensor::zeros(DType::F32, shape);
  float* out = f.mut<float>();
  for (int64_t m = 0; m < matrices; ++m) {
    const float* grid = scales.data() + m * scale_rows * scale_cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* scale_row = grid + (r / block_rows) * scale_cols;
      const uint8_t* in = codes.data() + (m * rows + r) * cols;
      float* o = out + (m * rows + r) * cols;
      for (int64_t c = 0; c < cols; ++c) o[c] = value[in[c]] * scale_row[c / block_cols];
    }
  }
  return dtype == DType::F32 ? f : f.to(dtype);
}

Tensor pack_fp8(std::span<const uint8_t> codes, const Shape& shape, std::span<const float> scales,
                int64_t scale_rows, int64_t scale_cols) {
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  const int64_t block_rows = rows / scale_rows, block_cols = cols / scale_cols;
  if (block_cols % kFp8Block != 0) return {};
  const int64_t matrices = shape_numel(shape) / (rows * cols);
  Tensor out = Tensor::zeros(DType::FP8, shape);
  auto* p = static_cast<uint8_t*>(out.mut<void>());
  for (int64_t m = 0; m < matrices; ++m) {
    const float* grid = scales.data() + m * scale_rows * scale_cols;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* in = codes.data() + (m * rows + r) * cols;
      for (int64_t c = 0; c < cols; c += kFp8Block, p += kFp8BlockBytes) {
        const float scale = grid[(r / block_rows) * scale_cols + c / block_cols];
        if (!fp8_block_exact(scale, in + c, kFp8Block)) return {};
        std::memcpy(p, &scale, sizeof scale);
        std::memcpy(p + 4, in + c, kFp8Block);
      }
    }
  }
  return out;
}

}  // namespace lathe
