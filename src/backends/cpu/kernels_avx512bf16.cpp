// The AVX512-BF16 kernels (vdpbf16ps): compiled with -mavx512bf16 besides the AVX-512 flags
// (CMakeLists.txt), run only when cpu::active_isa() is Avx512Bf16. The f32 kernels of that
// level are kernels_avx512.cpp's.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/avx512_common.h"
#include "backends/cpu/isa_kernels.h"

namespace lathe::cpu::avx512bf16 {
namespace {

using avx512_common::hsum512;

// Both operands bf16, 32 elements (16 pairs) a step: acc[i] += x[2i] w[2i] + x[2i+1] w[2i+1].
struct DotPolicy {
  using X = uint16_t;
  using W = uint16_t;
  using WR = __m512bh;
  using Acc = __m512;
  static constexpr int kStep = 32;
  static __mmask32 mask(int n) { return n >= 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1; }
  static Acc zero() { return _mm512_setzero_ps(); }
  static __m512bh load(const uint16_t* p) {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
  }
  static __m512bh load(const uint16_t* p, int n) {
    return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask(n), p));
  }
  static __m512bh load_x(const uint16_t* p) { return load(p); }
  static __m512bh load_x(const uint16_t* p, int n) { return load(p, n); }
  static __m512bh load_w(const uint16_t* p) { return load(p); }
  static __m512bh load_w(const uint16_t* p, int n) { return load(p, n); }
  static Acc madd(__m512bh x, __m512bh w, Acc acc) { return _mm512_dpbf16_ps(acc, x, w); }
  static float sum(Acc acc) { return hsum512(acc); }
};

// 4 x rows by 4 weight rows, as kernels_avx512.cpp.
constexpr int kTileRows = 4, kTileCols = 4, kRowCols = 8;

}  // namespace

#define LATHE_GEMM_ONLY
#include "backends/cpu/isa_kernels.inc"
#undef LATHE_GEMM_ONLY

void gemm_bf16_dot(const uint16_t* x, const uint16_t* w, float* y, int64_t m, int64_t n0,
                   int64_t n1, int64_t ldy, int64_t k, int64_t row_block) {
  gemm<DotPolicy>(x, w, y, m, n0, n1, ldy, k, row_block);
}

void to_bf16(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i h =
        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
}

}  // namespace lathe::cpu::avx512bf16
