// The CPU backends' op table: for each graph op, the function that runs a node of it and the
// one that sizes its scratch, in two forms chosen once, when a backend is made: the reference
// (the portable kernels on one thread, in a fixed summation order: the numbers every other
// form is tested against) and the fast one (the vectorised kernels of this machine, threaded).
// Each family of ops fills its entries from its own file, op_<family>.cpp; backend.cpp builds
// the two tables. Shapes were checked when a node was built (graph/builder.cpp); what the
// functions check is step data (ids, positions) that only execution sees.
#pragma once

#include <array>
#include <cstddef>

#include "graph/backend.h"

namespace lathe::cpu {

struct OpKernel {
  void (*run)(const NodeArgs&) = nullptr;
  // Scratch floats a node of `g` needs with `threads` threads and at most max_context positions
  // per sequence; null: none.
  size_t (*workspace)(const graph::Graph& g, const graph::Node& n, int threads,
                      int64_t max_context) = nullptr;
};

// One entry per graph::Op, Compress being the last (backend.cpp checks that every entry of
// both tables is filled).
inline constexpr size_t kOps = static_cast<size_t>(graph::Op::Compress) + 1;
using OpTable = std::array<OpKernel, kOps>;

inline OpKernel& entry(OpTable& t, graph::Op op) {
  return t[static_cast<size_t>(op)];
}

// Each fills its family's entries with the fast forms, or with the reference ones.
// op_data.cpp: Input, Weight, Reshape, Embedding, Rows, Concat, Slice, AllReduce, AllGather.
void add_data_ops(OpTable& t, bool fast);
// op_elementwise.cpp: RmsNorm, LayerNorm, ActMul, Activation, Add, Scale, Divide, Softcap,
// Clamp, Xielu, RowStat, Binary, HyperMix.
void add_elementwise_ops(OpTable& t, bool fast);
// op_matmul.cpp: Linear, HeadLinear, BatchMatmul, Route, Experts.
void add_matmul_ops(OpTable& t, bool fast);
// op_attention.cpp: RopeTables, Rope, Attention, Indexer, Compress.
void add_attention_ops(OpTable& t, bool fast);
// op_recurrent.cpp: CausalConv, GatedDeltaRule, Ssd.
void add_recurrent_ops(OpTable& t, bool fast);

// The fast backend's choices among its Linear kernels (op_matmul.cpp): the compiled mode
// times them.
const KernelChoices& matmul_choices();

// An optional F32 input's data, or null.
inline const float* f32_or_null(const Tensor* t) {
  return t ? t->data<float>() : nullptr;
}

}  // namespace lathe::cpu
