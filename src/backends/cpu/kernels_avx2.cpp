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
  // e^x, as Cephes' expf (see kernels_avx512.cpp); 2^n is built in the exponent bits, so x
  // is clamped to [-87.3, 88.4] (e^-87.3 is the smallest normal float; callers zero lanes
  // they do not want).
  static R exp(R x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f)),
                      _mm256_set1_ps(-87.33654475f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^n for n in [-126, 127]: (n + 127) << 23 as float bits; n = 128 (x near 88.4) is split.
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1);
    const __m256 s1 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  }
};

// 4 x rows by 3 weight rows: 12 accumulators + 3 weights + 1 x in the 16 ymm registers.
constexpr int kTileRows = 4, kTileCols = 3, kRowCols = 8;

}  // namespace

#include "backends/cpu/isa_kernels.inc"

}  // namespace lathe::cpu::avx2
