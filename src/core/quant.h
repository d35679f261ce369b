// Block-quantized matrices (Q8_0 and Q4_0): lathe's own storage of a weight matrix quantized
// once at load (`--quantize`), each row in blocks of 32 values that share one f16 scale d.
//
//   Q8_0: value = d * q, q in [-127, 127]; d = max|w| / 127 over the block (8.5 bits a value).
//   Q4_0: value = d * q, q in [-8, 7]; d = m / -8 where m is the block's value of largest
//         magnitude, so m itself is exact (4.5 bits a value).
// These are the quantization rules of the GGUF types of the same names, so a model quantized
// here and by llama.cpp hold the same numbers; the byte layout is lathe's own, made for the
// matmul kernels (backends/cpu/quant_matmul.cpp):
//   a row is k / 64 groups of two blocks; a group is the two blocks' f16 scales (4 bytes),
//   then their codes: Q8_0 64 bytes, q + 128 (offset binary, so unsigned); Q4_0 32 bytes,
//   q + 8, byte j holding value j in its low nibble and value j + 32 in its high nibble.
// So k must be a multiple of 64 (every hidden size of the published models is); rows are
// self-contained, and a row of k values takes row_bytes(type, k) = k / 32 * block_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"

namespace lathe {

// Values of one group (two blocks), and the bytes of a group's codes and of a whole group.
constexpr int64_t kQuantGroup = 64;
constexpr int64_t kQuantBlock = 32;
constexpr size_t quant_code_bytes(DType t) {
  return t == DType::Q4_0 ? 32 : 64;
}
constexpr size_t quant_group_bytes(DType t) {
  return 4 + quant_code_bytes(t);
}
// The codes' zero point: a stored code c means c - zero_point.
constexpr int quant_zero_point(DType t) {
  return t == DType::Q4_0 ? 8 : 128;
}
inline bool is_quantized(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0;
}
// "q8_0" / "q4_0" (as --quantize spells them) to the type; nullopt for anything else.
std::optional<DType> quant_type_from_name(std::string_view name);

// Quantizes `rows` rows of k f32 values (k a multiple of 64) into `dst` (rows * row_bytes).
void quantize_rows(DType type, const float* src, void* dst, int64_t rows, int64_t k);
// Dequantizes n values (a multiple of 64, whole groups) from `src` into f32.
void dequantize(DType type, const void* src, float* dst, int64_t n);

}  // namespace lathe
