// The block-quantized matmul (quant_kernels.h) with AVX-512 VNNI: compiled with AVX-512 F, BW,
// VL and VNNI (CMakeLists.txt), run only where cpu::quant_kernel() finds them. One vpdpbusd
// multiplies a group's 64 unsigned weight codes by 64 signed activation codes and sums each
// lane's 4 products onto the lane's start (-zero_point * its activation codes), so every lane
// holds an exact integer; lanes 0-7 belong to the group's first block, 8-15 to its second.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/quant_kernels.h"

namespace lathe::cpu::avx512vnni {
namespace {

#include "backends/cpu/prefetch_next.inc"

// A group's two f16 scales, the first in lanes 0-7, the second in lanes 8-15.
inline __m512 group_scales(const uint8_t* grp) {
  uint32_t pair;
  std::memcpy(&pair, grp, 4);
  const __m128 two = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(pair)));
  const __m512i index = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(index, _mm512_castps128_ps512(two));
}

// A group's 64 codes as unsigned bytes in value order.
template <bool Q4>
inline __m512i group_codes(const uint8_t* grp) {
  if constexpr (Q4) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp + 4));
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    const __m256i lo = _mm256_and_si256(b, nibble);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), nibble);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  } else {
    return _mm512_loadu_si512(grp + 4);
  }
}

// MR activation rows from i0 by NR weight rows, over all of k.
template <bool Q4, int MR, int NR>
void tile(const QuantActs& x, int64_t i0, const uint8_t* w, size_t ldw, float* y, int64_t ldy) {
  constexpr size_t kGroupBytes = Q4 ? 36 : 68;
  const int64_t k = x.k;
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t g = 0; g < k / 64; ++g) {
    __m512i wv[NR];
    __m512 ws[NR];
    if constexpr (MR == 1) prefetch_next_tile<NR * kGroupBytes>(w, NR * ldw, g);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const uint8_t* grp = w + static_cast<size_t>(j) * ldw + static_cast<size_t>(g) * kGroupBytes;
      ws[j] = group_scales(grp);
      wv[j] = group_codes<Q4>(grp);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const int64_t r = i0 + i;
      const __m512i xv = _mm512_loadu_si512(x.q + r * k + g * 64);
      const __m512 xd = _mm512_loadu_ps(x.d + r * (k / 4) + g * 16);
      const __m512i xi = _mm512_loadu_si512(x.init + r * (k / 4) + g * 16);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        const __m512i s = _mm512_dpbusd_epi32(xi, wv[j], xv);
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws[j], xd), acc[i][j]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = _mm512_reduce_add_ps(acc[i][j]);
}

// 4 x 4 tiles: 16 accumulators, 4 weight groups and their scales, 3 activation vectors of 32
// registers; 8 weight rows for one activation row (decode).
constexpr int kTileRows = 4, kTileCols = 4, kRowCols = 8;

}  // namespace

#include "backends/cpu/quant_tiles.inc"

void quantize_acts(const QuantActs& a, int zero_point, const float* x, int64_t r0, int64_t r1) {
  const int64_t k = a.k;
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i start = _mm256_set1_epi32(-zero_point);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const float* xb = x + r * k + b * 32;
      const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
      // max|x| is exact in any order; the scale and its inverse as the reference computes them.
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const float dx = amax / 127.0f;
      float id = 1.0f / dx;
      if (!(id <= 3.402823466e38f)) id = 0.0f;  // dx 0 or too small to invert: zero codes
      const __m512 vid = _mm512_set1_ps(id);
      constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      const __m512 q0 = _mm512_min_ps(
          _mm512_max_ps(_mm512_roundscale_ps(_mm512_mul_ps(v0, vid), kNearest), lo), hi);
      const __m512 q1 = _mm512_min_ps(
          _mm512_max_ps(_mm512_roundscale_ps(_mm512_mul_ps(v1, vid), kNearest), lo), hi);
      const __m128i c0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q0));
      const __m128i c1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q1));
      const __m256i codes = _mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.q + r * k + b * 32), codes);
      // Each lane of 4 codes: their sum (bytes 1 * code in pairs, then pairs of pairs).
      const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, codes), ones16);
      const int64_t lane = r * (k / 4) + b * 8;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.init + lane),
                          _mm256_mullo_epi32(sums, start));
      _mm256_storeu_ps(a.d + lane, _mm256_set1_ps(dx));
    }
  }
}

}  // namespace lathe::cpu::avx512vnni
