// Matmul kernels for weights in blocks of 32 values that share a scale, dequantized exactly in
// registers: MXFP4 (DType::MXFP4, core/mxfp4.h) and FP8 E4M3 (DType::FP8, core/fp8.h).
// Compiled once per instruction set as isa_kernels.h explains (plain types only here, no
// shared inline code); one body, block_kernels.inc, with each type's decode.
//
// What they compute (block_matmul.cpp's references define it): f32 activations times the
// weights dequantized exactly, y[i, j] = sum_p x[i, p] w[j, p], as the f32 kernels compute an
// f32 matrix: no activation quantization (unlike Q8_0 and Q4_0, quant_kernels.h), so a model
// with MXFP4 or FP8 matrices gives transformers' numbers on the dequantized weights up to the
// order of f32 sums. Each block's 32 codes are decoded in registers:
//   MXFP4: through a 16-entry table scaled by the block's power of two (AVX-512: vpermps over
//     16 floats; AVX2: vpshufb over 16 small integers, widened, then one exact multiplication);
//   FP8: each E4M3 code's bits moved into an f16's (sign to bit 15, exponent and mantissa
//     under it), which is the code's value times 2^-8 for every finite code, subnormals
//     included; vcvtph2ps widens them, and one multiplication by the scale times 2^8 gives
//     f32(code) * scale exactly (core/fp8.h's fp8_block_exact says when).
// Then x[p] w[p] is summed with fused multiply-adds in lanes of 16 or 8, each output one
// accumulator summed at the end.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lathe::cpu {

// Per type (namespace mxfp4 or fp8 of each level): rows [n0, n1) of y[m, ldy] = x[m, k] . w^T
// for weights `w` of the type (rows of ldw bytes, k a multiple of 32), without bias; and
// `rows` weight rows dequantized exactly into f32 rows of k values at `out` (the prefill's
// panels, block_matmul.cpp).
#define LATHE_DECLARE_BLOCK_KERNELS                                                             \
  void gemm_rows(const float* x, const uint8_t* w, size_t ldw, float* y, int64_t m, int64_t n0, \
                 int64_t n1, int64_t ldy, int64_t k);                                           \
  void dequantize_rows(const uint8_t* w, size_t ldw, int64_t rows, int64_t k, float* out);

namespace avx2::mxfp4 {
LATHE_DECLARE_BLOCK_KERNELS
}
namespace avx2::fp8 {
LATHE_DECLARE_BLOCK_KERNELS
}
namespace avx512::mxfp4 {
LATHE_DECLARE_BLOCK_KERNELS
}
namespace avx512::fp8 {
LATHE_DECLARE_BLOCK_KERNELS
}
#undef LATHE_DECLARE_BLOCK_KERNELS

}  // namespace lathe::cpu
