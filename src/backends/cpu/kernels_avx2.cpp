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
};

// 4 x rows by 3 weight rows: 12 accumulators + 3 weights + 1 x in the 16 ymm registers.
constexpr int kTileRows = 4, kTileCols = 3, kRowCols = 8;

}  // namespace

#include "backends/cpu/isa_kernels.inc"

}  // namespace lathe::cpu::avx2
