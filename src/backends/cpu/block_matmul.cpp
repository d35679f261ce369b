// Matrix multiplication against weights in blocks of 32 values dequantized exactly: MXFP4
// (DType::MXFP4, core/mxfp4.h) and FP8 (DType::FP8, core/fp8.h); block_kernels.h says what is
// computed. The reference kernels, which are the f32 reference's loop on the exactly
// dequantized weights, and the choice of fast kernel by the kernel level.
#include <algorithm>
#include <vector>

#include "backends/cpu/block_kernels.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/isa_kernels.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/weight_rows.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/mxfp4.h"

namespace lathe::cpu {
namespace {

constexpr int64_t kBlock = 32;
static_assert(kMxfp4Block == kBlock && kFp8Block == kBlock);

using Dequantize = void (*)(const void*, float*, int64_t);
using GemmRows = void (*)(const float*, const uint8_t*, size_t, float*, int64_t, int64_t, int64_t,
                          int64_t, int64_t);
using DequantizeRows = void (*)(const uint8_t*, size_t, int64_t, int64_t, float*);

// Rows [n0, n1) of y = x . w^T, summing x[p] w[p] in order as matmul_reference does for an
// f32 matrix: the same bits as the f32 reference on the dequantized matrix.
void block_gemm_reference(Dequantize dequantize, size_t block_bytes, const float* x,
                          const uint8_t* w, size_t ldw, float* y, int64_t m, int64_t n0, int64_t n1,
                          int64_t ldy, int64_t k) {
  float row[kBlock];
  for (int64_t j = n0; j < n1; ++j) {
    const uint8_t* wr = w + static_cast<size_t>(j) * ldw;
    for (int64_t i = 0; i < m; ++i) {
      const float* xr = x + i * k;
      float s = 0.0f;
      for (int64_t b = 0; b < k / kBlock; ++b) {
        dequantize(wr + static_cast<size_t>(b) * block_bytes, row, kBlock);
        for (int64_t t = 0; t < kBlock; ++t) s += xr[b * kBlock + t] * row[t];
      }
      y[i * ldy + j] = s;
    }
  }
}

// From this many rows of x (prompts, experts with many tokens) a task dequantizes its weight
// rows into an f32 panel once and runs the f32 kernel over it, where the in-register decode
// would decode each block again for every 4 rows of x. The panel's values are the exact
// dequantized weights, so the result is the f32 kernel's on the dequantized matrix.
constexpr int64_t kPanelMinRows = 8;
// Weight rows per panel: a multiple of every f32 tile's rows (kRowsPerUnit).
constexpr int64_t kPanelRows = 2 * kRowsPerUnit;

struct BlockType {
  Dequantize dequantize;
  GemmRows avx2, avx512;
  DequantizeRows avx2_rows, avx512_rows;
};

BlockType block_type(DType t) {
  if (t == DType::MXFP4)
    return {mxfp4_dequantize, avx2::mxfp4::gemm_rows, avx512::mxfp4::gemm_rows,
            avx2::mxfp4::dequantize_rows, avx512::mxfp4::dequantize_rows};
  if (t == DType::FP8)
    return {fp8_dequantize, avx2::fp8::gemm_rows, avx512::fp8::gemm_rows,
            avx2::fp8::dequantize_rows, avx512::fp8::dequantize_rows};
  fail("internal: ", dtype_name(t), " is not a block type of block_matmul.cpp");
}

}  // namespace

bool is_block_type(DType t) {
  return t == DType::MXFP4 || t == DType::FP8;
}

void block_matmul_reference(const float* x, const void* w, DType w_dtype, const float* bias,
                            float* y, int64_t m, int64_t n, int64_t k) {
  const BlockType bt = block_type(w_dtype);
  block_gemm_reference(bt.dequantize, dtype_traits(w_dtype).block_bytes, x,
                       static_cast<const uint8_t*>(w), row_bytes(w_dtype, k), y, m, 0, n, n, k);
  add_bias(bias, y, m, 0, n, n);
}

void block_matmul_fast(const float* x, const void* w, DType w_dtype, const float* bias, float* y,
                       int64_t m, int64_t n, int64_t k, ThreadPool& pool, int tasks_per_thread,
                       int64_t row_block) {
  const BlockType bt = block_type(w_dtype);
  const auto* wq = static_cast<const uint8_t*>(w);
  const size_t ldw = row_bytes(w_dtype, k), block_bytes = dtype_traits(w_dtype).block_bytes;
  const Isa isa = active_isa();
  if (m >= kPanelMinRows && isa != Isa::Portable) {
    over_weight_rows(m, n, bias, y, pool, tasks_per_thread, [&](int64_t n0, int64_t n1) {
      // One panel per thread, kept for the next matmul (grown once, to kPanelRows x k).
      thread_local std::vector<float> panel;
      panel.resize(static_cast<size_t>(std::min(n1 - n0, kPanelRows) * k));
      for (int64_t r0 = n0; r0 < n1; r0 += kPanelRows) {
        const int64_t rows = std::min(n1 - r0, kPanelRows);
        const uint8_t* wr = wq + static_cast<size_t>(r0) * ldw;
        if (isa == Isa::Avx2) {
          bt.avx2_rows(wr, ldw, rows, k, panel.data());
          avx2::gemm_rows(x, panel.data(), y + r0, m, 0, rows, n, k, row_block);
        } else {
          bt.avx512_rows(wr, ldw, rows, k, panel.data());
          avx512::gemm_rows(x, panel.data(), y + r0, m, 0, rows, n, k, row_block);
        }
      }
    });
    return;
  }
  over_weight_rows(m, n, bias, y, pool, tasks_per_thread, [&](int64_t n0, int64_t n1) {
    switch (isa) {
      case Isa::Avx512Bf16:
      case Isa::Avx512:
        return bt.avx512(x, wq, ldw, y, m, n0, n1, n, k);
      case Isa::Avx2:
        return bt.avx2(x, wq, ldw, y, m, n0, n1, n, k);
      case Isa::Portable:
        return block_gemm_reference(bt.dequantize, block_bytes, x, wq, ldw, y, m, n0, n1, n, k);
    }
  });
}

}  // namespace lathe::cpu
