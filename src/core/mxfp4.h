// MXFP4 matrices (DType::MXFP4): the OCP microscaling format with FP4 E2M1 elements, as
// GptOss checkpoints publish their experts (models/mxfp4.h reads the checkpoint's tensors),
// kept in lathe's own byte layout for its kernels (backends/cpu/block_kernels.h):
//   a row of k values (k a multiple of 32) is k / 32 blocks of 17 bytes: the block's E8M0
//   scale byte e (the power of two 2^(e - 127)), then its 16 code bytes, byte i holding value
//   2i in its low nibble and value 2i + 1 in its high nibble (the checkpoint's order).
// A code c is an E2M1 number: bit 3 the sign, then 2 exponent bits and one mantissa bit:
// 0, 0.5, 1, 1.5, 2, 3, 4, 6. The value of code c in a block of scale byte e is
// ldexp(E2M1(c), e - 127), exactly as transformers' convert_moe_packed_tensors makes it in f32
// (subnormals for the smallest scales, inf at 2^128 but for the zeros, which stay zeros).
// lathe computes it as (2 E2M1(c)) * 2^(e - 128): an integer up to 12 times a power of two
// that f32 holds for every e (2^-128 a subnormal, 2^127 the largest), so the one
// multiplication is exact, or overflows to inf where ldexp does.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace lathe {

inline constexpr int64_t kMxfp4Block = 32;      // values per scale
inline constexpr size_t kMxfp4BlockBytes = 17;  // scale byte + 16 code bytes
inline constexpr size_t kMxfp4CodeBytes = 16;

// Twice the E2M1 value of each code 0..15 (exact small integers; -0 for code 8).
inline constexpr float kMxfp4Twice[16] = {0.0f,  1.0f,  2.0f,  3.0f,  4.0f,  6.0f,  8.0f,  12.0f,
                                          -0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -6.0f, -8.0f, -12.0f};

// 2^(e - 128) as an f32, exactly: a normal number for e >= 2, subnormal below.
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : 0x00200000u << e;
  return std::bit_cast<float>(bits);
}

// The value of code c (0..15) in a block of scale byte e.
inline float mxfp4_value(int c, uint8_t e) {
  return kMxfp4Twice[c] * mxfp4_half_scale(e);
}

// The E2M1 code nearest to v (a value already divided by its block's scale), ties to the even
// code, magnitudes above 6 saturating to 6; the sign bit is v's (-0 is code 8).
uint8_t e2m1_code(float v);

// Dequantizes n values (a multiple of 32: whole blocks) of lathe's layout into f32.
void mxfp4_dequantize(const void* src, float* dst, int64_t n);

// Quantizes n values (a multiple of 32) into lathe's layout by the OCP MX rule: each block's
// scale is 2^(floor(log2(max |v|)) - 2) (E2M1's largest exponent is 2; byte 0 for a block of
// zeros, clamped to 0..254), each value e2m1_code(v / scale). tools/reference/make_tiny.py
// quantizes tiny MXFP4 fixtures by the same rule.
void mxfp4_quantize(const float* src, void* dst, int64_t n);

// Repacks `count` blocks stored as a checkpoint stores them (`codes`: 16 bytes a block,
// `scales`: one byte a block, both in block order) into lathe's layout at `dst`.
void mxfp4_pack(const uint8_t* codes, const uint8_t* scales, void* dst, int64_t count);

}  // namespace lathe
