// Matrix multiplication against MXFP4 weights (DType::MXFP4, core/mxfp4.h; mxfp4_kernels.h
// says what is computed): the reference kernel, which is the f32 reference's loop on the
// exactly dequantized weights, and the choice of fast kernel by the kernel level.
#include <algorithm>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/mxfp4_kernels.h"
#include "backends/cpu/weight_rows.h"
#include "core/mxfp4.h"

namespace lathe::cpu {
namespace {

// Rows [n0, n1) of y = x . w^T, summing x[p] w[p] in order as matmul_reference does for an
// f32 matrix: the same bits as the f32 reference on the dequantized matrix.
void mxfp4_gemm_reference(const float* x, const uint8_t* w, size_t ldw, float* y, int64_t m,
                          int64_t n0, int64_t n1, int64_t ldy, int64_t k) {
  float row[kMxfp4Block];
  for (int64_t j = n0; j < n1; ++j) {
    const uint8_t* wr = w + static_cast<size_t>(j) * ldw;
    for (int64_t i = 0; i < m; ++i) {
      const float* xr = x + i * k;
      float s = 0.0f;
      for (int64_t b = 0; b < k / kMxfp4Block; ++b) {
        mxfp4_dequantize(wr + static_cast<size_t>(b) * kMxfp4BlockBytes, row, kMxfp4Block);
        for (int64_t t = 0; t < kMxfp4Block; ++t) s += xr[b * kMxfp4Block + t] * row[t];
      }
      y[i * ldy + j] = s;
    }
  }
}

}  // namespace

void mxfp4_matmul_reference(const float* x, const void* w, const float* bias, float* y, int64_t m,
                            int64_t n, int64_t k) {
  mxfp4_gemm_reference(x, static_cast<const uint8_t*>(w), row_bytes(DType::MXFP4, k), y, m, 0, n, n,
                       k);
  add_bias(bias, y, m, 0, n, n);
}

void mxfp4_matmul_fast(const float* x, const void* w, const float* bias, float* y, int64_t m,
                       int64_t n, int64_t k, ThreadPool& pool, int tasks_per_thread) {
  const auto* wq = static_cast<const uint8_t*>(w);
  const size_t ldw = row_bytes(DType::MXFP4, k);
  const Isa isa = active_isa();
  over_weight_rows(m, n, bias, y, pool, tasks_per_thread, [&](int64_t n0, int64_t n1) {
    switch (isa) {
      case Isa::Avx512Bf16:
      case Isa::Avx512:
        avx512::mxfp4_gemm_rows(x, wq, ldw, y, m, n0, n1, n, k);
        break;
      case Isa::Avx2:
        avx2::mxfp4_gemm_rows(x, wq, ldw, y, m, n0, n1, n, k);
        break;
      case Isa::Portable:
        mxfp4_gemm_reference(x, wq, ldw, y, m, n0, n1, n, k);
        break;
    }
  });
}

}  // namespace lathe::cpu
