// Matmul kernels for MXFP4 weights (DType::MXFP4, core/mxfp4.h), compiled once per instruction
// set as isa_kernels.h explains (plain types only here, no shared inline code).
//
// What they compute (mxfp4_matmul.cpp's reference defines it): f32 activations times the
// weights dequantized exactly, y[i, j] = sum_p x[i, p] w[j, p], as the f32 kernels compute an
// f32 matrix: no activation quantization (unlike Q8_0 and Q4_0, quant_kernels.h), so a model
// with MXFP4 experts gives transformers' numbers on the dequantized weights up to the order of
// f32 sums. The fast kernels decode each block's 32 codes in registers through a 16-entry
// table scaled by the block's power of two (AVX-512: vpermps over 16 floats; AVX2: vpshufb
// over 16 small integers, widened, then one exact multiplication), and sum x[p] w[p] with
// fused multiply-adds in lanes of 16 or 8, each output one accumulator summed at the end.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lathe::cpu {

// Rows [n0, n1) of y[m, ldy] = x[m, k] . w^T for MXFP4 weights `w` (rows of ldw bytes,
// k a multiple of 32), without bias.
#define LATHE_DECLARE_MXFP4_KERNELS                                                       \
  void mxfp4_gemm_rows(const float* x, const uint8_t* w, size_t ldw, float* y, int64_t m, \
                       int64_t n0, int64_t n1, int64_t ldy, int64_t k);

namespace avx2 {
LATHE_DECLARE_MXFP4_KERNELS
}
namespace avx512 {
LATHE_DECLARE_MXFP4_KERNELS
}
#undef LATHE_DECLARE_MXFP4_KERNELS

}  // namespace lathe::cpu
