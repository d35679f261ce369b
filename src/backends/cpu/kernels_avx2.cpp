// The AVX2 + FMA kernels: compiled with those -m flags (CMakeLists.txt), run only when
// cpu::active_isa() is Avx2 (a machine with AVX-512 runs kernels_avx512.cpp).
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/isa_kernels.h"

namespace lathe::cpu::avx2 {
namespace {

struct V {
  using R = __m256;
  static constexpr int kLanes = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float s) { return _mm256_set1_ps(s); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R load_part(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static R widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static R load(const uint16_t* p) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static R load_part(const uint16_t* p, int n) {
    alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    return widen(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
  }
  static R fma(R a, R b, R acc) { return _mm256_fmadd_ps(a, b, acc); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static float sum(R v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static void store_part(float* p, R v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  // Lanes lo..hi of v, zeros elsewhere.
  static R keep_lanes(R v, int lo, int hi) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), lane),
                                           _mm256_cmpgt_epi32(_mm256_set1_epi32(hi + 1), lane));
    return _mm256_and_ps(v, _mm256_castsi256_ps(in));
  }
  // Lane i of the result: the sum of the lanes of v[i], by one fixed tree for every i.
  static R sum_lanes(const R* v) {
    __m256 quad[2];
    for (int g = 0; g < 2; ++g) {
      const __m256* w = v + 4 * g;
      const __m256 a =
          _mm256_add_ps(_mm256_unpacklo_ps(w[0], w[1]), _mm256_unpackhi_ps(w[0], w[1]));
      const __m256 b =
          _mm256_add_ps(_mm256_unpacklo_ps(w[2], w[3]), _mm256_unpackhi_ps(w[2], w[3]));
      quad[g] = _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xee));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(quad[0], quad[1], 0x20),
                         _mm256_permute2f128_ps(quad[0], quad[1], 0x31));
  }
  // For isa_kernels.inc's exp_approx. 2^n is built in the exponent bits, so the smallest x
  // keeps 2^n normal (e^-87.34 is the smallest normal float).
  static constexpr float kExpMin = -87.33654475f;
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static float max_lane(R v) {
    const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
  }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R fnma(R a, R b, R c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
  // y 2^n for n in [-126, 128], as two factors so that n = 128 does not overflow the exponent.
  static R times_pow2(R y, R n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1);
    auto pow2 = [](__m256i e) {
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
    };
    return _mm256_mul_ps(_mm256_mul_ps(y, pow2(half)), pow2(_mm256_sub_epi32(ni, half)));
  }
};

// 4 x rows by 3 weight rows: 12 accumulators + 3 weights + 1 x in the 16 ymm registers.
// Attention: a query of up to this many vectors is held in registers (isa_kernels.inc).
constexpr int kHeldChunks = 4;
constexpr int kTileRows = 4, kTileCols = 3, kRowCols = 8;

}  // namespace

#include "backends/cpu/isa_kernels.inc"
// After isa_kernels.inc, whose V and exp_approx it uses.
#include "backends/cpu/elementwise_kernels.inc"
#include "backends/cpu/recurrent_kernels.inc"

}  // namespace lathe::cpu::avx2
