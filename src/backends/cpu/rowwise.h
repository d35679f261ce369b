// Row statistics, broadcasting elementwise arithmetic and per-token small matmuls (graph
// Op::RowStat, Op::Binary, Op::BatchMatmul): one kernel serves every backend, so the bits are
// the same on each. Gemma3n's AltUp streams and its activation sparsity are built from them.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "graph/graph.h"

namespace lathe::cpu {

// y[r] = the statistic of x[r, 0 .. d) for `rows` rows (graph::RowStat), summed in double:
// Mean, Std (population) and Rms = sqrt(max(mean(x^2), eps)) rounded to f32 as torch's f32
// mean is before its clamp and sqrt.
void row_stat(graph::RowStat stat, float eps, const float* x, float* y, int64_t rows, int64_t d);

// out = a op b over `out_shape`, a and b broadcast to it as torch broadcasts (each shape
// aligned at its last dimension; a size-1 or missing dimension repeats).
void binary(graph::BinaryOp op, const float* a, const Shape& a_shape, const float* b,
            const Shape& b_shape, float* out, const Shape& out_shape);

// out[t] = a[t] . b[t] for t < n: a [n, m, k], b [n, k, d], out [n, m, d]; each output a sum
// over k in order, in f32.
void batch_matmul(const float* a, const float* b, float* out, int64_t n, int64_t m, int64_t k,
                  int64_t d);

}  // namespace lathe::cpu
