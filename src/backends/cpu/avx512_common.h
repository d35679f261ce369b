// Helpers shared by the files compiled for AVX-512 (kernels_avx512.cpp and
// kernels_avx512bf16.cpp) and included by nothing else: both only run on AVX-512 CPUs, so
// whichever copy of these inline functions the linker keeps is safe (isa_kernels.h).
#pragma once

#include <immintrin.h>

namespace lathe::cpu::avx512_common {

// The sum of 16 lanes in a fixed order (GCC 12's _mm512_reduce_add_ps warns under -Wall).
inline float hsum512(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

}  // namespace lathe::cpu::avx512_common
