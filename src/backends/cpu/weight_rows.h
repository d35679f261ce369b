// How the matmuls split their work: blocks of weight rows over the thread pool, each block's
// bias added by the task that computed it. Shared by the f32/bf16, quantized and MXFP4 matmuls
// (compiled without per-ISA flags; the per-ISA kernels never include this).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "backends/cpu/kernels.h"
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

// Runs fn(part, n0, n1) over blocks of the parts' weight rows, every part's blocks in one loop
// on the pool (at most tasks_per_thread tasks per thread), then adds each block's bias. A
// block never spans two parts; a task may.
template <class F>
void over_parts_rows(int64_t m, std::span<const MatmulPart> parts, ThreadPool& pool,
                     int tasks_per_thread, const F& fn) {
  int64_t first_unit[kMaxMatmulParts + 1] = {};  // parts[p]'s blocks start at first_unit[p]
  for (size_t p = 0; p < parts.size(); ++p)
    first_unit[p + 1] = first_unit[p] + (parts[p].n + kRowsPerUnit - 1) / kRowsPerUnit;
  pool.parallel_for(
      first_unit[parts.size()], 1,
      [&](int64_t u0, int64_t u1) {
        for (size_t p = 0; p < parts.size(); ++p) {
          const int64_t b0 = std::max(u0, first_unit[p]), b1 = std::min(u1, first_unit[p + 1]);
          if (b0 >= b1) continue;
          const MatmulPart& part = parts[p];
          const int64_t n0 = (b0 - first_unit[p]) * kRowsPerUnit;
          const int64_t n1 = std::min(part.n, (b1 - first_unit[p]) * kRowsPerUnit);
          fn(p, n0, n1);
          add_bias(part.bias, part.y, m, n0, n1, part.n);
        }
      },
      tasks_per_thread);
}

// Runs fn(n0, n1) over blocks of weight rows on the pool, at most tasks_per_thread blocks
// per thread, then adds the bias.
template <class F>
void over_weight_rows(int64_t m, int64_t n, const float* bias, float* y, ThreadPool& pool,
                      int tasks_per_thread, const F& fn) {
  const MatmulPart part{nullptr, bias, y, n};
  over_parts_rows(m, std::span<const MatmulPart>(&part, 1), pool, tasks_per_thread,
                  [&](size_t, int64_t n0, int64_t n1) { fn(n0, n1); });
}

}  // namespace lathe::cpu
