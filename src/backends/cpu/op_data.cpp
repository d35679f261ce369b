// The CPU backends' data-movement ops (ops.h): embedding rows, gathering rows, joining and
// slicing columns, and the collectives of a sharded run; Input, Weight and Reshape compute
// nothing (the executor binds or aliases them).
#include <algorithm>
#include <cstring>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "graph/collectives.h"

namespace lathe::cpu {
namespace {

using graph::Op;

void run_nothing(const NodeArgs&) {}

void run_embedding(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const auto& p = n.attr<graph::EmbeddingAttrs>();
  const Tensor& table = *a.inputs[0];
  const Tensor& ids = *a.inputs[1];
  const int64_t vocab = table.dim(0), dim = table.dim(1);
  const size_t row_bytes = lathe::row_bytes(table.dtype(), dim);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = int64_t{ids.data<int32_t>()[i]} + p.id_offset;
    float* row = a.out.mut<float>() + i * dim;
    const graph::IdRange range = p.id_range;
    if ((id < 0 && (range == graph::IdRange::Zeros || range == graph::IdRange::ZerosBelow)) ||
        (id >= vocab && (range == graph::IdRange::Zeros || range == graph::IdRange::ZerosPast))) {
      std::fill(row, row + dim, 0.0f);
      continue;
    }
    if ((id < 0 || id >= vocab) && range == graph::IdRange::FirstRow) {
      convert_to_f32(table.dtype(), table.data<uint8_t>(), row, static_cast<size_t>(dim));
      continue;
    }
    if (id < 0 || id >= vocab) {
      if (p.id_offset != 0)
        fail("position ", id - p.id_offset, " is past the model's ", vocab - p.id_offset,
             " learned positions (max_position_embeddings)");
      fail("token id ", id, " is outside the vocabulary of ", vocab, " tokens");
    }
    convert_to_f32(table.dtype(), table.data<uint8_t>() + static_cast<size_t>(id) * row_bytes, row,
                   static_cast<size_t>(dim));
  }
}

void run_concat(const NodeArgs& a) {
  const Tensor* x = a.inputs[0];
  const Tensor& b = *a.inputs[1];
  const int64_t da = x->dim(-1), db = b.dim(-1), rows = x->numel() / da;
  float* o = a.out.mut<float>();
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(o + r * (da + db), x->data<float>() + r * da,
                static_cast<size_t>(da) * sizeof(float));
    std::memcpy(o + r * (da + db) + da, b.data<float>() + r * db,
                static_cast<size_t>(db) * sizeof(float));
  }
}

void run_slice(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  const int64_t cols = x->dim(-1), m = a.out.dim(-1), rows = numel / m;
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(a.out.mut<float>() + r * m,
                x->data<float>() + r * cols + n.attr<graph::SliceAttrs>().start,
                static_cast<size_t>(m) * sizeof(float));
}

void run_rows(const NodeArgs& a) {
  const Tensor* x = a.inputs[0];
  const Tensor& idx = *a.inputs[1];
  const int64_t rows = x->dim(0), dim = x->dim(1);
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int32_t r = idx.data<int32_t>()[i];
    if (r < 0 || r >= rows) fail("internal: rows: row ", r, " of ", rows);
    std::memcpy(a.out.mut<float>() + i * dim, x->data<float>() + int64_t{r} * dim,
                static_cast<size_t>(dim) * sizeof(float));
  }
}

// Gathers every rank's x into the workspace, then sums it in rank order (AllReduce) or lays
// each row's pieces side by side (AllGather).
void run_collective(const NodeArgs& a) {
  graph::Collectives& comm = *a.node.attr<graph::CollectiveAttrs>().comm;
  const Tensor& x = *a.inputs[0];
  const int64_t n = x.numel(), ranks = comm.size();
  float* all = a.workspace;
  comm.all_gather(x.data<float>(), n, all,
                  a.node.name.empty() ? graph::op_name(a.node.op) : a.node.name);
  float* out = a.out.mut<float>();
  if (a.node.op == Op::AllReduce) {
    std::memcpy(out, all, static_cast<size_t>(n) * sizeof(float));
    for (int64_t r = 1; r < ranks; ++r)
      for (int64_t i = 0; i < n; ++i) out[i] += all[r * n + i];
    return;
  }
  const int64_t m = x.dim(-1), rows = n / std::max<int64_t>(m, 1);
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t row = 0; row < rows; ++row)
      std::memcpy(out + (row * ranks + r) * m, all + r * n + row * m,
                  static_cast<size_t>(m) * sizeof(float));
}

// Every rank's x, gathered.
size_t collective_floats(const graph::Graph& g, const graph::Node& n, int, int64_t) {
  return static_cast<size_t>(shape_numel(g.at(n.inputs[0]).shape) *
                             n.attr<graph::CollectiveAttrs>().comm->size());
}

}  // namespace

void add_data_ops(OpTable& t, bool) {
  for (Op op : {Op::Input, Op::Weight, Op::Reshape}) entry(t, op) = {run_nothing};
  entry(t, Op::Embedding) = {run_embedding};
  entry(t, Op::Rows) = {run_rows};
  entry(t, Op::Concat) = {run_concat};
  entry(t, Op::Slice) = {run_slice};
  entry(t, Op::AllReduce) = {run_collective, collective_floats};
  entry(t, Op::AllGather) = {run_collective, collective_floats};
}

}  // namespace lathe::cpu
