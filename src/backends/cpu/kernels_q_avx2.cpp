// The block-quantized matmul (quant_kernels.h) with AVX2 (and F16C for the scales), for CPUs
// without AVX-512 VNNI. vpmaddubsw multiplies unsigned by signed bytes into pairs of 16-bit
// sums and vpmaddwd adds the pairs, so each 32-bit lane holds 4 products, exactly: Q4_0's
// codes (0..15) are unsigned as stored, and the lane starts from -8 * its activation codes;
// Q8_0's codes are taken back to signed and multiplied as |w| by x with w's sign, which keeps
// every pair within 16 bits (127 * 127 * 2). Each output sums its lanes in one order whatever
// the rows or threads, but not the reference's (kernels_q_avx512vnni.cpp's do).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/quant_kernels.h"

namespace lathe::cpu::avx2 {
namespace {

#include "backends/cpu/prefetch_next.inc"
#include "backends/cpu/quant_acts.inc"

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// Block h (0 or 1) of a group: its scale in every lane and its 32 codes as stored (Q8_0:
// offset binary; Q4_0: the nibbles as unsigned bytes).
template <bool Q4>
inline __m256i block_codes(const uint8_t* grp, int h) {
  if constexpr (Q4) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp + 4));
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    return h == 0 ? _mm256_and_si256(b, nibble) : _mm256_and_si256(_mm256_srli_epi16(b, 4), nibble);
  } else {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp + 4 + 32 * h));
  }
}
inline __m256 block_scale(const uint8_t* grp, int h) {
  uint16_t d;
  std::memcpy(&d, grp + 2 * h, 2);
  return _mm256_set1_ps(_cvtsh_ss(d));
}

template <bool Q4, int MR, int NR>
void tile(const QuantActs& x, int64_t i0, const uint8_t* w, size_t ldw, float* y, int64_t ldy) {
  constexpr size_t kGroupBytes = Q4 ? 36 : 68;
  const int64_t k = x.k;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const size_t ahead = prefetch_ahead(NR * ldw);
  for (int64_t g = 0; g < k / 64; ++g) {
    if constexpr (MR == 1) prefetch_next_tile<NR * kGroupBytes>(w, ahead, g);
    for (int h = 0; h < 2; ++h) {
      __m256i wv[NR], wa[NR];
      __m256 ws[NR];
      for (int j = 0; j < NR; ++j) {
        const uint8_t* grp =
            w + static_cast<size_t>(j) * ldw + static_cast<size_t>(g) * kGroupBytes;
        ws[j] = block_scale(grp, h);
        wv[j] = block_codes<Q4>(grp, h);
        if constexpr (!Q4) {
          wv[j] = _mm256_xor_si256(wv[j], _mm256_set1_epi8(static_cast<char>(0x80)));  // signed
          wa[j] = _mm256_abs_epi8(wv[j]);
        }
      }
      for (int i = 0; i < MR; ++i) {
        const int64_t r = i0 + i, off = g * 64 + 32 * h, lane = g * 16 + 8 * h;
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + r * k + off));
        const __m256 xd = _mm256_loadu_ps(x.d + r * (k / 4) + lane);
        for (int j = 0; j < NR; ++j) {
          __m256i s;
          if constexpr (Q4) {
            const __m256i xi =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.init + r * (k / 4) + lane));
            s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wv[j], xv), ones), xi);
          } else {
            s = _mm256_madd_epi16(_mm256_maddubs_epi16(wa[j], _mm256_sign_epi8(xv, wv[j])), ones);
          }
          acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(ws[j], xd), acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = hsum(acc[i][j]);
}

// 2 x 2 tiles of activation by weight rows (16 registers), 4 weight rows for one activation row.
constexpr int kTileRows = 2, kTileCols = 2, kRowCols = 4;

// tile<Q4, mr, nr> for any mr <= MR, nr <= NR (the edges of the output).
template <bool Q4, int MR, int NR>
void edge_tile(int mr, int nr, const QuantActs& x, int64_t i0, const uint8_t* w, size_t ldw,
               float* y, int64_t ldy) {
  if constexpr (MR > 1)
    if (mr < MR) return edge_tile<Q4, MR - 1, NR>(mr, nr, x, i0, w, ldw, y, ldy);
  if constexpr (NR > 1)
    if (nr < NR) return edge_tile<Q4, MR, NR - 1>(mr, nr, x, i0, w, ldw, y, ldy);
  tile<Q4, MR, NR>(x, i0, w, ldw, y, ldy);
}

// Rows [n0, n1) of y: tiles over blocks of activation rows (a block of weight rows stays in
// cache while the block passes), one-row tiles of kRowCols weight rows for decode. Each output
// is one tile's sum whatever the split, so results do not depend on the thread count.
template <bool Q4>
void gemm(const QuantActs& x, const uint8_t* w, size_t ldw, float* y, int64_t m, int64_t n0,
          int64_t n1, int64_t ldy) {
  constexpr int64_t kRowBlock = 64;
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t i1 = i0 + kRowBlock < m ? i0 + kRowBlock : m;
    if (i1 - i0 == 1) {
      for (int64_t j = n0; j < n1; j += kRowCols)
        edge_tile<Q4, 1, kRowCols>(1, static_cast<int>(n1 - j < kRowCols ? n1 - j : kRowCols), x,
                                   i0, w + static_cast<size_t>(j) * ldw, ldw, y + i0 * ldy + j,
                                   ldy);
      continue;
    }
    for (int64_t j = n0; j < n1; j += kTileCols) {
      const int nr = static_cast<int>(n1 - j < kTileCols ? n1 - j : kTileCols);
      for (int64_t i = i0; i < i1; i += kTileRows)
        edge_tile<Q4, kTileRows, kTileCols>(
            static_cast<int>(i1 - i < kTileRows ? i1 - i : kTileRows), nr, x, i,
            w + static_cast<size_t>(j) * ldw, ldw, y + i * ldy + j, ldy);
    }
  }
}

}  // namespace

void qgemm_rows(bool q4, const QuantActs& x, const uint8_t* w, size_t ldw, float* y, int64_t m,
                int64_t n0, int64_t n1, int64_t ldy) {
  if (q4)
    gemm<true>(x, w, ldw, y, m, n0, n1, ldy);
  else
    gemm<false>(x, w, ldw, y, m, n0, n1, ldy);
}

void quantize_acts(const QuantActs& a, int zero_point, const float* x, int64_t r0, int64_t r1) {
  const int64_t k = a.k;
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // packs_epi32 then packs_epi16 leave each 128-bit half's dwords interleaved by source.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const float* xb = x + r * k + b * 32;
      __m256 v[4];
      __m256 m = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
      }
      // max|x| is exact in any order; the scale and its inverse as the reference computes them.
      __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      h = _mm_max_ps(h, _mm_movehl_ps(h, h));
      h = _mm_max_ss(h, _mm_movehdup_ps(h));
      const float dx = _mm_cvtss_f32(h) / 127.0f;
      float id = 1.0f / dx;
      if (!(id <= 3.402823466e38f)) id = 0.0f;  // dx 0 or too small to invert: zero codes
      const __m256 vid = _mm256_set1_ps(id);
      __m256i c[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 q = _mm256_round_ps(_mm256_mul_ps(v[i], vid),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        c[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(q, lo), hi));
      }
      const __m256i codes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3])),
          order);
      store_block(a, r, b, codes, dx, zero_point);
    }
  }
}

}  // namespace lathe::cpu::avx2
