// Element types of tensors and their conversions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace lathe {

// Storage types. Compute accumulates in f32 whatever the storage. Q8_0 and Q4_0 are
// block-quantized matrices made at load (core/quant.h has their layout); MXFP4 holds
// checkpoints' MXFP4 matrices (GptOss's experts) repacked (core/mxfp4.h), FP8 block-scaled
// FP8 E4M3 checkpoints' matrices repacked (core/fp8.h).
enum class DType : uint8_t { F32, BF16, F16, I32, Q8_0, Q4_0, MXFP4, FP8 };

// What storage a dtype takes: elements come in blocks of `block_size` (1 for the plain types;
// block-quantized types pack a block's values and scale into `block_bytes`).
struct DTypeTraits {
  int64_t block_size = 1;
  size_t block_bytes = 0;
};
DTypeTraits dtype_traits(DType t);
// Bytes of a row of n elements (n a multiple of the block size).
size_t row_bytes(DType t, int64_t n);
// Bytes per element of a dtype whose blocks are single elements.
size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "F32", "BF16", ... as safetensors spells them
std::optional<DType> dtype_from_name(std::string_view name);

// bfloat16: the top 16 bits of an IEEE f32. Rounds to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// IEEE half precision.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts `n` elements of type `from` at `src` to f32 at `dst` (for the quantized types, n
// whole groups of core/quant.h; for MXFP4 and FP8 whole blocks, dequantized exactly).
void convert_to_f32(DType from, const void* src, float* dst, size_t n);
// Converts `n` f32 values to `to` (F32, BF16, F16, or quantized: Q8_0, Q4_0, MXFP4, FP8).
void convert_from_f32(DType to, const float* src, void* dst, size_t n);

}  // namespace lathe
