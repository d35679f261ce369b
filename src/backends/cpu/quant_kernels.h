// Matmul kernels for block-quantized weights (core/quant.h), compiled once per instruction set
// as isa_kernels.h explains (plain types only here, no shared inline code).
//
// What they compute (quant_matmul.cpp's reference defines it): the activations are quantized
// too, once per row, in blocks of 32 as Q8_0 rounds them (dx = max|x| / 127, qx =
// round(x / dx)), so that each block's dot product is an exact integer,
//   y[i, j] = sum over blocks b of (dw_jb * dx_ib) * sum_t (cw_jbt - zero_point) * qx_ibt,
// the way llama.cpp's CPU kernels compute Q8_0 and Q4_0 matrices. The fast kernels sum the
// same exact block integers; AVX-512 VNNI's also add the f32 terms in the reference's order
// (its bits), AVX2's in lanes of 4 values (another order, the same for every row count).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lathe::cpu {

// Activations quantized for one matmul: row r's codes at q + r * k; per lane of 4 values
// (k / 4 a row) its block's scale (d) and -zero_point * the lane's sum of codes (init, so
// that a lane's integer dot product with the weights' offset codes starts from it and ends
// exact); per block of 32 (k / 32 a row) the sum of its 8 lanes' inits (block_init).
struct QuantActs {
  int8_t* q;
  float* d;
  int32_t* init;
  int32_t* block_init;
  int64_t k;
};

// Rows [r0, r1) of the f32 activations x[m, k] quantized into `a` (blocks of 32: dx = max|x| /
// 127; codes round(x * (1 / dx)) to nearest even, clamped to +-127; a block whose 1 / dx is 0
// or overflows gets zero codes), with lanes' starts for this zero point. Every level gives
// the reference's bits.
void quantize_acts_reference(const QuantActs& a, int zero_point, const float* x, int64_t r0,
                             int64_t r1);

// The same, vectorised, and rows [n0, n1) of y[m, ldy] = x . w^T for quantized weights `w`
// (rows of ldw bytes; q4: Q4_0, else Q8_0), without bias.
#define LATHE_DECLARE_QUANT_KERNELS                                                               \
  void quantize_acts(const QuantActs& a, int zero_point, const float* x, int64_t r0, int64_t r1); \
  void qgemm_rows(bool q4, const QuantActs& x, const uint8_t* w, size_t ldw, float* y, int64_t m, \
                  int64_t n0, int64_t n1, int64_t ldy);

namespace avx2 {
LATHE_DECLARE_QUANT_KERNELS
}
namespace avx512vnni {
LATHE_DECLARE_QUANT_KERNELS
}
#undef LATHE_DECLARE_QUANT_KERNELS

}  // namespace lathe::cpu
