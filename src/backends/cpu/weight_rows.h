// How the matmuls split their work: blocks of weight rows over the thread pool, each block's
// bias added by the task that computed it. Shared by the f32/bf16, quantized and MXFP4 matmuls
// (compiled without per-ISA flags; the per-ISA kernels never include this).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"

namespace lathe::cpu {

// Weight rows a task takes at least: a multiple of every kernel's tile (2, 3, 4, 6 and 8 rows).
constexpr int64_t kRowsPerUnit = 24;

// bias[j] added to rows [0, m) of y[m, n] for columns [n0, n1) (nothing without a bias).
inline void add_bias(const float* bias, float* y, int64_t m, int64_t n0, int64_t n1, int64_t n) {
  if (!bias) return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = n0; j < n1; ++j) y[i * n + j] += bias[j];
}

// Runs fn(n0, n1) over blocks of weight rows on the pool, at most tasks_per_thread blocks
// per thread, then adds the bias.
template <class F>
void over_weight_rows(int64_t m, int64_t n, const float* bias, float* y, ThreadPool& pool,
                      int tasks_per_thread, const F& fn) {
  const int64_t units = (n + kRowsPerUnit - 1) / kRowsPerUnit;
  pool.parallel_for(
      units, 1,
      [&](int64_t u0, int64_t u1) {
        const int64_t n0 = u0 * kRowsPerUnit, n1 = std::min(n, u1 * kRowsPerUnit);
        fn(n0, n1);
        add_bias(bias, y, m, n0, n1, n);
      },
      tasks_per_thread);
}

}  // namespace lathe::cpu
