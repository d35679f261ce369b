// FP8 E4M3 ("e4m3fn": 1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities, one
// NaN code per sign, largest finite 448), the element type of block-scaled FP8 checkpoints
// (quantization_config quant_method "fp8": DeepSeek V3, the Qwen3 -FP8 releases; models/fp8.h),
// and DType::FP8, the layout lathe keeps such matrices in for its kernels
// (backends/cpu/block_kernels.h):
//   a row of k values (k a multiple of 32) is k / 32 blocks of 36 bytes: the block's scale, an
//   f32 (little-endian), then its 32 E4M3 codes in order.
// The value of code c in a block of scale s is f32(e4m3(c)) * s, one f32 multiplication, as
// transformers' Fp8Dequantize computes it. A checkpoint's scale blocks (128 x 128 in DeepSeek
// V3's) are wider than 32 values: each of their 32-value pieces of each row repeats the scale.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace lathe {

// The value of an E4M3 code, exactly (every code is an f32): subnormals m 2^-9, normals
// (1 + m / 8) 2^(e - 7), NaN for 0x7f and 0xff.
inline float e4m3_to_f32(uint8_t code) {
  const int e = (code >> 3) & 0xf, m = code & 7;
  const float sign = code & 0x80 ? -1.0f : 1.0f;
  if (e == 15 && m == 7) return std::nanf("");
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(static_cast<float>(8 + m), e - 10);
}

// The E4M3 code nearest to x, ties to even, as torch 2.15's float8_e4m3fn conversion rounds
// (checked on a million values): it saturates, so magnitudes from 448 on and infinities give
// +-448 (0x7e); NaN gives NaN (0x7f, signed).
inline uint8_t f32_to_e4m3(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  bits &= 0x7fffffffu;
  if (bits > 0x7f800000u) return sign | 0x7f;   // NaN
  if (bits >= 0x43e00000u) return sign | 0x7e;  // >= 448, or infinite
  if (bits < 0x3c800000u) {                     // below 2^-6: a subnormal step of 2^-9
    float magnitude;
    std::memcpy(&magnitude, &bits, 4);
    // Exact scaling, then the current (nearest-even) rounding mode; 8 steps is the smallest
    // normal, whose code is 8 too.
    return sign | static_cast<uint8_t>(std::nearbyint(magnitude * 512.0f));
  }
  // Round the f32 mantissa to 3 bits, ties to even; a carry moves into the exponent.
  const uint32_t rounded = bits + 0x7ffffu + ((bits >> 20) & 1);
  const uint32_t exponent = (rounded >> 23) - 127 + 7, mantissa = (rounded >> 20) & 7;
  return sign | static_cast<uint8_t>(exponent << 3 | mantissa);
}

inline constexpr int64_t kFp8Block = 32;      // values per scale
inline constexpr size_t kFp8BlockBytes = 36;  // f32 scale + 32 code bytes

// Whether the kernels give a block of scale s exactly f32(code) * s: they take each code as an
// f16 that is its value times 2^-8 and multiply by s * 2^8, which is exact unless s * 2^8
// overflows (s >= 2^120) or s is not finite; and a NaN code (0x7f, 0xff) would read as 480.
bool fp8_block_exact(float scale, const uint8_t* codes, int64_t n);

// Dequantizes n values (a multiple of 32: whole blocks) of lathe's layout into f32.
void fp8_dequantize(const void* src, float* dst, int64_t n);

// Quantizes n values (a multiple of 32) into lathe's layout, as block-scaled checkpoints are
// made: each block's scale is max |v| / 448 (0 for a block of zeros, whose codes are 0), each
// code f32_to_e4m3(v / scale).
void fp8_quantize(const float* src, void* dst, int64_t n);

}  // namespace lathe
