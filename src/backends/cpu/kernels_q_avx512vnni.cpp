// The block-quantized matmul (quant_kernels.h) with AVX-512 VNNI: compiled with AVX-512 F, BW,
// VL and VNNI (CMakeLists.txt), run only where cpu::quant_kernel() finds them. vpdpbusd
// multiplies unsigned weight codes by signed activation codes, 4 to a 32-bit lane, and adds
// them onto the lane; a block's 8 lanes start from its activations' -zero_point * codes
// (QuantActs), so their sum is the block's exact integer dot product.
//
// Every output is computed in the reference's order (quant_matmul.cpp): per block, (dw * dx)
// times the integer, added to the running sum block after block, so these kernels give the
// reference's bits, whatever the number of rows or threads:
//   - fewer than 16 rows (decode, small batches): tiles of 8 weight rows read as stored;
//     each group's 16 lanes per row are summed to its two blocks' integers, 8 rows at once;
//   - more rows (prefill): each task packs 16 weight rows into a panel, one row per 32-bit
//     lane (codes as bytes, scales as f32), and every activation row passes over it: one
//     vpdpbusd then serves 16 rows, and the lanes need no summing.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/quant_kernels.h"

namespace lathe::cpu::avx512vnni {
namespace {

#include "backends/cpu/prefetch_next.inc"
#include "backends/cpu/quant_acts.inc"

template <bool Q4>
constexpr size_t kGroupBytes = Q4 ? 36 : 68;

// A group's 64 codes as unsigned bytes in value order: lanes 0-7 its first block, 8-15 its
// second.
template <bool Q4>
inline __m512i group_codes(const uint8_t* grp) {
  if constexpr (Q4) {
    // The 32 bytes in both halves; the low nibbles (values 0-31) kept in the first, the high
    // (32-63) shifted down in the second.
    const __m512i b =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp + 4)));
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(b, shift), _mm512_set1_epi8(0x0f));
  } else {
    return _mm512_loadu_si512(grp + 4);
  }
}

// ---- Few activation rows: tiles of 8 weight rows as stored ----

constexpr int kRowCols = 8;

// Row r of x by NR <= 8 weight rows from w, over all of k, into y[0, NR).
template <bool Q4, int NR>
void row_tile(const QuantActs& x, int64_t r, const uint8_t* w, size_t ldw, float* y) {
  constexpr size_t kGroup = kGroupBytes<Q4>;
  const int64_t k = x.k;
  // The 8 rows' scale pairs, f16 words [A0 B0 A1 B1 ...], reordered to [A0-7 B0-7] (A, B: the
  // group's two blocks).
  const __m256i scale_order =
      _mm256_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  // The sums of 4 rows' lanes by 128-bit quarter (below) to [A rows 0-7, B rows 0-7].
  const __m512i first_quarters =
      _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i second_quarters =
      _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  const __mmask8 rows = static_cast<__mmask8>((1u << NR) - 1);
  const size_t ahead = prefetch_ahead(NR * ldw);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t g = 0; g < k / 64; ++g) {
    prefetch_next_tile<NR * kGroup>(w, ahead, g);
    const __m512i xv = _mm512_loadu_si512(x.q + r * k + g * 64);
    const __m512i xi = _mm512_loadu_si512(x.init + r * (k / 4) + g * 16);
    __m512i s[8];
    uint32_t pair[8] = {};
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const uint8_t* grp = w + static_cast<size_t>(j) * ldw + g * kGroup;
      s[j] = _mm512_setzero_si512();
      if (j >= NR) continue;
      s[j] = _mm512_dpbusd_epi32(xi, group_codes<Q4>(grp), xv);
      std::memcpy(&pair[j], grp, 4);
    }
    // Each row's 8 lanes per block summed: pairs of rows' lanes (4 -> 2 per 128 bits), then
    // 4 rows' (-> 1 per 128 bits: v0 holds rows 0-3, quarters 0-1 block A, 2-3 block B), then
    // each block's two quarters.
    __m512i u[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q)
      u[q] = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2 * q], s[2 * q + 1]),
                              _mm512_unpackhi_epi32(s[2 * q], s[2 * q + 1]));
    const __m512i v0 =
        _mm512_add_epi32(_mm512_unpacklo_epi64(u[0], u[1]), _mm512_unpackhi_epi64(u[0], u[1]));
    const __m512i v1 =
        _mm512_add_epi32(_mm512_unpacklo_epi64(u[2], u[3]), _mm512_unpackhi_epi64(u[2], u[3]));
    const __m512i sums = _mm512_add_epi32(_mm512_permutex2var_epi32(v0, first_quarters, v1),
                                          _mm512_permutex2var_epi32(v0, second_quarters, v1));
    const __m256i pairs = _mm256_setr_epi32(static_cast<int>(pair[0]), static_cast<int>(pair[1]),
                                            static_cast<int>(pair[2]), static_cast<int>(pair[3]),
                                            static_cast<int>(pair[4]), static_cast<int>(pair[5]),
                                            static_cast<int>(pair[6]), static_cast<int>(pair[7]));
    const __m512 dw = _mm512_cvtph_ps(_mm256_permutexvar_epi16(scale_order, pairs));
    // The activations' scales are stored per lane: 8 of block A's, then 8 of B's.
    const __m512 dx = _mm512_loadu_ps(x.d + r * (k / 4) + g * 16);
    // (dw * dx) * integer, as the reference; block A's terms added before block B's.
    const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, dx));
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(t));
    acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(t, 1));
  }
  _mm256_mask_storeu_ps(y, rows, acc);
}

// row_tile<Q4, nr> for any nr <= NR (the last rows of the output).
template <bool Q4, int NR>
void row_edge(int nr, const QuantActs& x, int64_t r, const uint8_t* w, size_t ldw, float* y) {
  if constexpr (NR > 1)
    if (nr < NR) return row_edge<Q4, NR - 1>(nr, x, r, w, ldw, y);
  row_tile<Q4, NR>(x, r, w, ldw, y);
}

// The m rows of x by weight rows [n0, n1), a tile of 8 weight rows at a time.
template <bool Q4>
void row_tiles(const QuantActs& x, int64_t m, const uint8_t* w, size_t ldw, float* y, int64_t n0,
               int64_t n1, int64_t ldy) {
  for (int64_t j = n0; j < n1; j += kRowCols) {
    const int nr = static_cast<int>(n1 - j < kRowCols ? n1 - j : kRowCols);
    for (int64_t i = 0; i < m; ++i)
      row_edge<Q4, kRowCols>(nr, x, i, w + static_cast<size_t>(j) * ldw, ldw, y + i * ldy + j);
  }
}

// ---- More activation rows: packed panels of 16 weight rows ----

constexpr int kPanelRows = 16;        // one per 32-bit lane
constexpr int kPanelActRows = 8;      // activation rows a panel tile takes at once
constexpr int64_t kPackMinRows = 16;  // fewer rows take the row tiles (docs/performance-log.md)

// A panel: per block of 32 values, 8 vectors (one per lane of 4 values) of 16 rows' 4 codes,
// then per block the 16 rows' scales as f32. Lanes past nr keep whatever an earlier panel
// left (finite values; their outputs are never stored).
struct Panel {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

template <bool Q4>
void pack_panel(const uint8_t* w, size_t ldw, int nr, int64_t k, Panel& p) {
  const int64_t blocks = k / 32;
  if (p.codes.size() < static_cast<size_t>(blocks * 8 * 64)) {
    p.codes.resize(static_cast<size_t>(blocks * 8 * 64));
    p.scales.resize(static_cast<size_t>(blocks * kPanelRows));
  }
  // Dword l of a group's codes (block l / 8, lane l % 8) goes to vector (2 g + l / 8) * 8 + l % 8
  // of the panel, i.e. l * 64 bytes past the group's first vector.
  const __m512i to_lane =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(64));
  for (int j = 0; j < nr; ++j) {
    const uint8_t* row = w + static_cast<size_t>(j) * ldw;
    for (int64_t g = 0; g < k / 64; ++g) {
      const uint8_t* grp = row + static_cast<size_t>(g) * kGroupBytes<Q4>;
      _mm512_i32scatter_epi32(p.codes.data() + g * 2 * 8 * 64 + j * 4, to_lane,
                              group_codes<Q4>(grp), 1);
      uint32_t pair;
      std::memcpy(&pair, grp, 4);
      float two[4];
      _mm_storeu_ps(two, _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(pair))));
      p.scales[static_cast<size_t>((2 * g) * kPanelRows + j)] = two[0];
      p.scales[static_cast<size_t>((2 * g + 1) * kPanelRows + j)] = two[1];
    }
  }
}

// MR activation rows from i0 by the panel's 16 weight rows, over all of k; nr of them into y.
template <int MR>
void panel_tile(const QuantActs& x, int64_t i0, const Panel& p, float* y, int64_t ldy, int nr) {
  const int64_t k = x.k, blocks = k / 32;
  __m512 acc[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i wv[8];
    const uint8_t* codes = p.codes.data() + b * 8 * 64;
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) wv[l] = _mm512_loadu_si512(codes + l * 64);
    const __m512 dw = _mm512_loadu_ps(p.scales.data() + b * kPanelRows);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const int64_t r = i0 + i;
      const int8_t* xq = x.q + r * k + b * 32;
      __m512i s = _mm512_set1_epi32(x.block_init[r * blocks + b]);
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        int32_t four;
        std::memcpy(&four, xq + 4 * l, 4);
        s = _mm512_dpbusd_epi32(s, wv[l], _mm512_set1_epi32(four));
      }
      // (dw * dx) * integer, added as the reference adds it.
      const __m512 t = _mm512_mul_ps(dw, _mm512_set1_ps(x.d[r * (k / 4) + b * 8]));
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_cvtepi32_ps(s), t));
    }
  }
  const __mmask16 cols = static_cast<__mmask16>((1u << nr) - 1);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + (i0 + i) * ldy, cols, acc[i]);
}

template <int MR>
void panel_edge(int mr, const QuantActs& x, int64_t i0, const Panel& p, float* y, int64_t ldy,
                int nr) {
  if constexpr (MR > 1)
    if (mr < MR) return panel_edge<MR - 1>(mr, x, i0, p, y, ldy, nr);
  panel_tile<MR>(x, i0, p, y, ldy, nr);
}

template <bool Q4>
void panel_gemm(const QuantActs& x, const uint8_t* w, size_t ldw, float* y, int64_t m, int64_t n0,
                int64_t n1, int64_t ldy) {
  // Each thread's panel, grown to the largest k it has met (prefill steps only: decode steps
  // take the row tiles and allocate nothing).
  thread_local Panel panel;
  for (int64_t j = n0; j < n1; j += kPanelRows) {
    const int nr = static_cast<int>(n1 - j < kPanelRows ? n1 - j : kPanelRows);
    pack_panel<Q4>(w + static_cast<size_t>(j) * ldw, ldw, nr, x.k, panel);
    for (int64_t i = 0; i < m; i += kPanelActRows)
      panel_edge<kPanelActRows>(static_cast<int>(m - i < kPanelActRows ? m - i : kPanelActRows), x,
                                i, panel, y + j, ldy, nr);
  }
}

template <bool Q4>
void gemm(const QuantActs& x, const uint8_t* w, size_t ldw, float* y, int64_t m, int64_t n0,
          int64_t n1, int64_t ldy) {
  if (m < kPackMinRows)
    row_tiles<Q4>(x, m, w, ldw, y, n0, n1, ldy);
  else
    panel_gemm<Q4>(x, w, ldw, y, m, n0, n1, ldy);
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
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
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
      store_block(a, r, b, codes, dx, zero_point);
    }
  }
}

}  // namespace lathe::cpu::avx512vnni
