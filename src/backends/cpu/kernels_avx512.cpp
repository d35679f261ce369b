// The AVX-512 (F, BW, VL) + FMA kernels: compiled with those -m flags (CMakeLists.txt), run
// only when cpu::active_isa() is Avx512 or above.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/isa_kernels.h"

namespace lathe::cpu::avx512 {
namespace {

// The sum of 16 lanes in a fixed order (GCC 12's _mm512_reduce_add_ps warns under -Wall).
inline float hsum512(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

struct V {
  using R = __m512;
  static constexpr int kLanes = 16;
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1); }
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float s) { return _mm512_set1_ps(s); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load_part(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static R widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static R load(const uint16_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static R load_part(const uint16_t* p, int n) {
    return widen(_mm256_maskz_loadu_epi16(mask(n), p));
  }
  static R fma(R a, R b, R acc) { return _mm512_fmadd_ps(a, b, acc); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static float sum(R v) { return hsum512(v); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void store_part(float* p, R v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
};

// 4 x rows by 4 weight rows: 16 accumulators, 4 + 1 loads per 16 fused multiply-adds.
constexpr int kTileRows = 4, kTileCols = 4, kRowCols = 8;

}  // namespace

#include "backends/cpu/isa_kernels.inc"

}  // namespace lathe::cpu::avx512
