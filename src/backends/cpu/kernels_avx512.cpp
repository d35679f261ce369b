// The AVX-512 (F, BW, VL) + FMA kernels: compiled with those -m flags (CMakeLists.txt), run
// only when cpu::active_isa() is Avx512 or above.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/avx512_common.h"
#include "backends/cpu/isa_kernels.h"

namespace lathe::cpu::avx512 {
namespace {

using avx512_common::hsum512;

struct V {
  using R = __m512;
  static constexpr int kLanes = 16;
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1); }
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float s) { return _mm512_set1_ps(s); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load_part(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  // 16 bf16 as f32: word i to the high word of lane i, the low words zero, in one permute
  // (a zero-extension and a shift are two instructions, the shift on the port of the fused
  // multiply-adds).
  static R widen(__m256i h) {
    const __m512i to_high = _mm512_slli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 16);
    return _mm512_castsi512_ps(
        _mm512_maskz_permutexvar_epi16(0xaaaaaaaa, to_high, _mm512_castsi256_si512(h)));
  }
  static R load(const uint16_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static R load_part(const uint16_t* p, int n) {
    return widen(_mm256_maskz_loadu_epi16(mask(n), p));
  }
  // n <= 32 bf16 (the rest zero) as f32: their even elements and their odd ones
  // (isa_kernels.inc's PairPolicy), or half h of them (0: even, 1: odd).
  struct Pair {
    R even, odd;
  };
  static __m512i load_words(const uint16_t* p, int n) {
    return n >= 2 * kLanes ? _mm512_loadu_si512(p)
                           : _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1u << n) - 1), p);
  }
  static R half(__m512i v, int h) {
    return _mm512_castsi512_ps(h == 0 ? _mm512_slli_epi32(v, 16)
                                      : _mm512_and_si512(v, _mm512_set1_epi32(~0xffff)));
  }
  static Pair load_pair(const uint16_t* p, int n) {
    const __m512i v = load_words(p, n);
    return {half(v, 0), half(v, 1)};
  }
  static R load_half(const uint16_t* p, int h, int n) { return half(load_words(p, n), h); }
  // n <= 32 floats (the rest zero) dealt into their even elements and their odd ones.
  static Pair deal(const float* p, int n) {
    const R a = n >= kLanes ? load(p) : load_part(p, n);
    const R b = n >= 2 * kLanes ? load(p + kLanes)
                : n > kLanes    ? load_part(p + kLanes, n - kLanes)
                                : zero();
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    return {_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b)};
  }
  static R fma(R a, R b, R acc) { return _mm512_fmadd_ps(a, b, acc); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static float sum(R v) { return hsum512(v); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void store_part(float* p, R v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  // Lanes lo..hi of v, zeros elsewhere.
  static R keep_lanes(R v, int lo, int hi) {
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(mask(hi + 1) & ~mask(lo)), v);
  }
  // Lane i of the result: the sum of the lanes of v[i], by one fixed tree for every i.
  static R sum_lanes(const R* v) {
    __m512 quad[4];
    for (int g = 0; g < 4; ++g) {
      const __m512* w = v + 4 * g;
      const __m512 a =
          _mm512_add_ps(_mm512_unpacklo_ps(w[0], w[1]), _mm512_unpackhi_ps(w[0], w[1]));
      const __m512 b =
          _mm512_add_ps(_mm512_unpacklo_ps(w[2], w[3]), _mm512_unpackhi_ps(w[2], w[3]));
      // per 128-bit lane: [w0, w1, w2, w3], each the sum of that lane's 4 elements
      quad[g] = _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xee));
    }
    const __m512 e01 = _mm512_add_ps(_mm512_shuffle_f32x4(quad[0], quad[1], 0x44),
                                     _mm512_shuffle_f32x4(quad[0], quad[1], 0xee));
    const __m512 e23 = _mm512_add_ps(_mm512_shuffle_f32x4(quad[2], quad[3], 0x44),
                                     _mm512_shuffle_f32x4(quad[2], quad[3], 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(e01, e23, 0x88),
                         _mm512_shuffle_f32x4(e01, e23, 0xdd));
  }
  // For isa_kernels.inc's exp_approx.
  static constexpr float kExpMin = -88.3762626647949f;  // below it e^x is 0 after scalef
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static float max_lane(R v) { return _mm512_reduce_max_ps(v); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R round(R a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static R fnma(R a, R b, R c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
  static R times_pow2(R y, R n) { return _mm512_scalef_ps(y, n); }
};

// 4 x rows by 6 weight rows: 24 accumulators, 10 loads per 24 fused multiply-adds (measured
// best of 4x4, 6x4, 4x6, 8x3, 3x8 on prefill shapes: +15% over 4x4); 8 rows for one x row.
// Attention: a query of up to this many vectors is held in registers (isa_kernels.inc).
constexpr int kHeldChunks = 8;
constexpr int kTileRows = 4, kTileCols = 6, kRowCols = 8;

}  // namespace

#define LATHE_PAIR_BF16  // V::Pair: bf16 weights two vectors a step
#include "backends/cpu/isa_kernels.inc"
// After isa_kernels.inc, whose V and exp_approx it uses.
#include "backends/cpu/elementwise_kernels.inc"
#include "backends/cpu/recurrent_kernels.inc"

}  // namespace lathe::cpu::avx512
