// The block-type matmuls (block_kernels.h) with AVX-512 (F, BW, VL) + FMA + F16C: compiled with
// those -m flags (CMakeLists.txt), run when cpu::active_isa() is Avx512 or above. One body
// (block_kernels.inc) per type, each with its own block decode:
//  - MXFP4: each block's table of the 16 codes' values is scaled once by the block's power of
//    two (exact), and vpermps looks up 16 widened nibbles at a time in it;
//  - FP8: a block's 32 E4M3 codes become 32 f16s worth 2^-8 of their values, vcvtph2ps widens
//    each 16 of them, and one multiplication by the block's scale times 2^8 gives each weight
//    exactly.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/avx512_common.h"
#include "backends/cpu/block_kernels.h"

namespace lathe::cpu::avx512 {
namespace {

struct V {
  using R = __m512;
  static constexpr int kLanes = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R fma(R a, R b, R acc) { return _mm512_fmadd_ps(a, b, acc); }
  static float sum(R v) { return avx512_common::hsum512(v); }
};

// 4 x rows by 6 weight rows as the f32 tiles (kernels_avx512.cpp); 8 rows for one x row.
constexpr int kTileRows = 4, kTileCols = 6, kRowCols = 8;

}  // namespace

namespace mxfp4 {
namespace {

constexpr size_t kBlockBytes = 17;

// 2^(e - 128) (core/mxfp4.h's mxfp4_half_scale, here as its own copy: isa_kernels.h).
inline float half_scale(uint8_t e) {
  const uint32_t bits = e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : 0x00200000u << e;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline void decode(const uint8_t* block, __m512* out) {
  const __m512 twice = _mm512_setr_ps(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 8.0f, 12.0f, -0.0f, -1.0f,
                                      -2.0f, -3.0f, -4.0f, -6.0f, -8.0f, -12.0f);
  const __m512 table = _mm512_mul_ps(twice, _mm512_set1_ps(half_scale(block[0])));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 1));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, nibble), hi = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
  out[0] = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), table);
  out[1] = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), table);
}

}  // namespace

#include "backends/cpu/block_kernels.inc"

}  // namespace mxfp4

namespace fp8 {
namespace {

constexpr size_t kBlockBytes = 36;

// 16 codes, sign-extended to 16 bits (vpmovsxbw), as f16 bits: shifted left by 7, the sign
// lands in bit 15 (and 14, cleared), the exponent and mantissa under it: E4M3's 4-bit
// exponent of bias 7 in f16's 5-bit one of bias 15, so each f16 is the code's value times 2^-8.
inline __m512 codes_as_f32(__m256i c) {
  return _mm512_cvtph_ps(_mm256_and_si256(_mm256_slli_epi16(c, 7), _mm256_set1_epi16(-16385)));
}

inline void decode(const uint8_t* block, __m512* out) {
  float scale;
  std::memcpy(&scale, block, 4);
  const __m512 s = _mm512_set1_ps(scale * 256.0f);
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 4));
  out[0] = _mm512_mul_ps(codes_as_f32(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(c))), s);
  out[1] = _mm512_mul_ps(codes_as_f32(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(c, 1))), s);
}

}  // namespace

#include "backends/cpu/block_kernels.inc"

}  // namespace fp8
}  // namespace lathe::cpu::avx512
