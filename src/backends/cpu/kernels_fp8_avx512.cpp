// The FP8 matmul (block_kernels.h) with AVX-512 (F, BW, VL) + FMA + F16C: compiled with those
// -m flags (CMakeLists.txt), run when cpu::active_isa() is Avx512 or above. A block's 32 E4M3
// codes become 32 f16s worth 2^-8 of their values, vcvtph2ps widens each 16 of them, and one
// multiplication by the block's scale times 2^8 gives each weight exactly.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/avx512_common.h"
#include "backends/cpu/block_kernels.h"

namespace lathe::cpu::avx512::fp8 {
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

// 4 x rows by 6 weight rows as the f32 tiles (kernels_avx512.cpp); 8 rows for one x row.
constexpr int kTileRows = 4, kTileCols = 6, kRowCols = 8;

}  // namespace

#include "backends/cpu/block_kernels.inc"

}  // namespace lathe::cpu::avx512::fp8
