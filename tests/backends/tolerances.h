// How far a backend's output may be from the reference backend's, per op and dtype: the one
// table the op test bench (op_test.cpp) checks every case against.
//
// How the values were chosen: `LATHE_OP_BENCH_REPORT=1 op_tests` prints the fast backend's
// NMSE and max abs error for every case; a tolerance is the worst figure over the bench's
// shape classes with 10-100x headroom. Inputs are uniform in (-1, 1), so max abs error is in
// units of the inputs' scale.
//  - Linear: the one op whose fast kernel sums in another order (8-lane partial sums, AVX2
//    where the CPU has it) than the reference's plain loop. Worst observed (x86-64, AVX2):
//      F32:  NMSE 2.7e-13, max abs 1.7e-5 (2 x 64 x 576; 37 x 300 x 200 gives 7.5e-14, 1.2e-5)
//      BF16: NMSE 1.8e-13, max abs 1.5e-5 (2 x 64 x 576, with bias)
//    so NMSE 1e-11 (37x / 55x headroom) and max abs 2e-4 (12x / 13x). BF16 weights widen to
//    F32 exactly, so both dtypes see errors of one size.
//  - Every other op runs the same kernel on both CPU backends (attention only splits its
//    (token, head) rows across threads, each row computed as the reference computes it):
//    0, bit for bit.
#pragma once

#include <optional>

#include "core/dtype.h"
#include "graph/graph.h"

namespace lathe::optest {

struct Tolerance {
  double nmse = 0;     // sum (a - b)^2 / sum b^2 over the output
  double max_abs = 0;  // max |a - b|
  // Both 0: the backend must reproduce the reference bit for bit.
  bool exact() const { return nmse == 0 && max_abs == 0; }
};

struct ToleranceRow {
  graph::Op op;
  DType dtype;  // the weight's (Linear) or the table's (Embedding) dtype; F32 for the rest
  Tolerance tol;
};

inline constexpr ToleranceRow kTolerances[] = {
    {graph::Op::Embedding, DType::F32, {}},
    {graph::Op::Embedding, DType::BF16, {}},
    {graph::Op::Embedding, DType::F16, {}},
    {graph::Op::Linear, DType::F32, {1e-11, 2e-4}},
    {graph::Op::Linear, DType::BF16, {1e-11, 2e-4}},
    {graph::Op::RmsNorm, DType::F32, {}},
    {graph::Op::LayerNorm, DType::F32, {}},
    {graph::Op::ActMul, DType::F32, {}},
    {graph::Op::Activation, DType::F32, {}},
    {graph::Op::Add, DType::F32, {}},
    {graph::Op::Scale, DType::F32, {}},
    {graph::Op::Divide, DType::F32, {}},
    {graph::Op::Softcap, DType::F32, {}},
    {graph::Op::Clamp, DType::F32, {}},
    {graph::Op::Xielu, DType::F32, {}},
    {graph::Op::Reshape, DType::F32, {}},
    {graph::Op::RopeTables, DType::F32, {}},
    {graph::Op::Rope, DType::F32, {}},
    {graph::Op::Attention, DType::F32, {}},
    {graph::Op::Rows, DType::F32, {}},
};

inline std::optional<Tolerance> tolerance(graph::Op op, DType dtype) {
  for (const ToleranceRow& r : kTolerances)
    if (r.op == op && r.dtype == dtype) return r.tol;
  return std::nullopt;
}

}  // namespace lathe::optest
