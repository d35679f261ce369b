// The CPU backends' matrix ops (ops.h): Linear over any weight type of kernels.h, per-head
// and per-token matrices, and a mixture of experts' routing and experts; and the fast
// backend's choices among its Linear kernels, which the compiled mode times.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/moe.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/rowwise.h"
#include "core/error.h"

namespace lathe::cpu {
namespace {

using graph::Op;

// The first expert an Experts node holds: under expert parallelism (src/shard/rank_graph.h)
// a rank's node lacks the other ranks' experts.
size_t first_expert(const graph::Node& node) {
  const size_t experts = (node.inputs.size() - 2) / graph::kExpertInputs;
  for (size_t e = 0; e < experts; ++e)
    if (node.inputs[2 + e * graph::kExpertInputs + 1].valid()) return e;
  fail("internal: an experts node that holds no expert");
}

// Per head h: rows x[:, h, :] times w[h]^T, gathered into the workspace and scattered back.
size_t head_linear_floats(int64_t n, int64_t k, int64_t m, DType w_dtype, bool reference) {
  const size_t scratch = matmul_scratch_bytes(w_dtype, n, k, reference);
  return static_cast<size_t>(n * (k + m)) + (scratch + sizeof(float) - 1) / sizeof(float);
}

template <bool kFast>
void run_head_linear(const NodeArgs& a) {
  const Tensor &x = *a.inputs[0], &w = *a.inputs[1];
  const int64_t n = x.dim(0), heads = x.dim(1), k = x.dim(2), m = w.dim(1);
  float* xs = a.workspace;
  float* ys = xs + n * k;
  const size_t wbytes = static_cast<size_t>(m * k) * dtype_size(w.dtype());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(xs + t * k, x.data<float>() + (t * heads + h) * k,
                  static_cast<size_t>(k) * sizeof(float));
    const void* wh = w.data<uint8_t>() + static_cast<size_t>(h) * wbytes;
    if constexpr (kFast)
      matmul_fast(xs, wh, w.dtype(), nullptr, ys, n, m, k, ys + n * m, a.pool);
    else
      matmul_reference(xs, wh, w.dtype(), nullptr, ys, n, m, k);
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(a.out.mut<float>() + (t * heads + h) * m, ys + t * m,
                  static_cast<size_t>(m) * sizeof(float));
  }
}

// The ways the fast backend can run a Linear node (KernelChoices::variants): tasks per thread, and
// for f32 and bf16 weights in a step of several rows, the rows of x per pass over a block of
// weights. Variant 0 is the uncompiled default; every one gives the same bits. No variant
// splits coarser than the default: fewer tasks per thread timed faster for a node alone, but
// made whole decode steps slower on a busy machine (a descheduled thread's one big task holds
// up the step; docs/compile-cache.md).
constexpr MatmulSchedule kMatmulSchedules[] = {{4, 96},  {8, 96}, {4, 32},
                                               {4, 256}, {8, 32}, {8, 256}};
constexpr int kSplitOnlySchedules = 2;  // the first two differ in the split only

int matmul_schedules(const graph::Graph& g, const graph::Node& node) {
  const graph::Node& w = g.at(node.inputs[1]);
  const int64_t m = shape_numel(node.shape) / w.shape[0];
  const bool tiled = w.dtype == DType::F32 || w.dtype == DType::BF16;
  return m > 1 && tiled ? static_cast<int>(std::size(kMatmulSchedules)) : kSplitOnlySchedules;
}
MatmulSchedule schedule(int variant) {
  return variant > 0 && variant < static_cast<int>(std::size(kMatmulSchedules))
             ? kMatmulSchedules[variant]
             : MatmulSchedule{};
}

// The fast backend's variants and fused Linear groups, which the compiled mode times.
class CpuChoices : public KernelChoices {
 public:
  int variants(const graph::Graph& g, const graph::Node& node) const override {
    return node.op == Op::Linear ? matmul_schedules(g, node) : 1;
  }
  std::string variant_name(const graph::Graph& g, const graph::Node& node, int v) const override {
    const int n = variants(g, node);
    if (n <= 1 || v < 0 || v >= n) return "default";
    const MatmulSchedule& s = kMatmulSchedules[v];
    if (n == kSplitOnlySchedules) return cat(s.tasks_per_thread, " tasks/thread");
    return cat(s.tasks_per_thread, " tasks/thread, ", s.row_block, " rows/pass");
  }
  bool fuses_linears(const graph::Graph& g, std::span<const int32_t> group) const override {
    if (group.size() > kMaxMatmulParts) return false;
    // Quantized weights only: run as one, their groups made SmolLM2's decode 4-11% faster
    // end to end (x quantized once, one parallel loop instead of three); bf16 groups made it
    // 8% slower on two threads (docs/performance-log.md).
    const DType t = g.at(g.nodes[static_cast<size_t>(group.front())].inputs[1]).dtype;
    return t == DType::Q8_0 || t == DType::Q4_0;
  }
  void run_linears(std::span<const NodeArgs> group) const override {
    const NodeArgs& first = group.front();
    const Tensor& w = *first.inputs[1];
    const int64_t k = w.dim(1), m = first.inputs[0]->numel() / k;
    MatmulPart parts[kMaxMatmulParts];
    for (size_t p = 0; p < group.size(); ++p)
      parts[p] = {group[p].inputs[1]->data<void>(), f32_or_null(group[p].inputs[2]),
                  group[p].out.mut<float>(), group[p].inputs[1]->dim(0)};
    matmul_fast_parts(first.inputs[0]->data<float>(),
                      std::span<const MatmulPart>(parts, group.size()), w.dtype(), m, k,
                      first.workspace, first.pool, schedule(first.variant));
  }
};

template <bool kFast>
void run_linear(const NodeArgs& a) {
  const Tensor &x = *a.inputs[0], &w = *a.inputs[1];
  const int64_t k = w.dim(1), rows = w.dim(0), m = x.numel() / k;
  if constexpr (kFast)
    matmul_fast(x.data<float>(), w.data<void>(), w.dtype(), f32_or_null(a.inputs[2]),
                a.out.mut<float>(), m, rows, k, a.workspace, a.pool, schedule(a.variant));
  else
    matmul_reference(x.data<float>(), w.data<void>(), w.dtype(), f32_or_null(a.inputs[2]),
                     a.out.mut<float>(), m, rows, k, a.workspace);
}

template <bool kFast>
size_t linear_floats(const graph::Graph& g, const graph::Node& node, int, int64_t) {
  const graph::Node& w = g.at(node.inputs[1]);
  const int64_t k = w.shape[1], m = shape_numel(node.shape) / w.shape[0];
  return (matmul_scratch_bytes(w.dtype, m, k, !kFast) + sizeof(float) - 1) / sizeof(float);
}

template <bool kFast>
size_t head_linear_scratch(const graph::Graph& g, const graph::Node& node, int, int64_t) {
  const graph::Node& w = g.at(node.inputs[1]);
  return head_linear_floats(node.shape[0], w.shape[2], w.shape[1], w.dtype, !kFast);
}

void run_batch_matmul(const NodeArgs& a) {
  const Tensor &x = *a.inputs[0], &b = *a.inputs[1];
  batch_matmul(x.data<float>(), b.data<float>(), a.out.mut<float>(), x.dim(0), x.dim(1), x.dim(2),
               b.dim(2));
}

void run_route(const NodeArgs& a) {
  const Tensor& x = *a.inputs[0];
  route(x.data<float>(), f32_or_null(a.inputs[1]), x.dim(0), x.dim(1),
        a.node.attr<graph::RouteAttrs>(), a.out.mut<float>(), a.workspace, f32_or_null(a.inputs[2]),
        a.inputs.size() > 3 ? f32_or_null(a.inputs[3]) : nullptr);
}

size_t route_floats(const graph::Graph& g, const graph::Node& node, int, int64_t) {
  const auto& p = node.attr<graph::RouteAttrs>();
  return route_workspace_floats(g.at(node.inputs[0]).shape[1], p.top_k, p.groups);
}

template <bool kFast>
void run_experts(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const auto& p = n.attr<graph::ExpertsAttrs>();
  const Tensor& x = *a.inputs[0];
  const int64_t count = static_cast<int64_t>(a.inputs.size() - 2) / graph::kExpertInputs;
  const Tensor& up = *a.inputs[first_expert(n) * graph::kExpertInputs + 3];
  experts({x.data<float>(), a.inputs[1]->data<float>(), x.dim(0), x.dim(1), up.dim(0), p.top_k,
           count, a.inputs.data() + 2, p.act, a.out.mut<float>(), a.workspace, p.glu, p.limit,
           p.alpha, p.scale_inputs},
          !kFast, a.pool);
}

template <bool kFast>
size_t experts_floats(const graph::Graph& g, const graph::Node& node, int, int64_t) {
  const graph::Node& up = g.at(node.inputs[first_expert(node) * graph::kExpertInputs + 3]);
  const int64_t count = static_cast<int64_t>(node.inputs.size() - 2) / graph::kExpertInputs;
  size_t scratch = 0;  // the most any of its matrices needs
  for (int64_t e = 0; e < count; ++e)
    for (int i = 0; i < 3; ++i)
      if (const graph::Value w = node.inputs[2 + e * graph::kExpertInputs + i]; w.valid())
        scratch = std::max(scratch, experts_scratch_bytes(g.at(w).dtype, node.shape[0],
                                                          node.shape[1], up.shape[0], !kFast));
  return experts_workspace_floats(node.shape[0], node.shape[1], up.shape[0],
                                  node.attr<graph::ExpertsAttrs>().top_k, count, scratch);
}

template <bool kFast>
void add(OpTable& t) {
  entry(t, Op::Linear) = {run_linear<kFast>, linear_floats<kFast>};
  entry(t, Op::HeadLinear) = {run_head_linear<kFast>, head_linear_scratch<kFast>};
  entry(t, Op::BatchMatmul) = {run_batch_matmul};
  entry(t, Op::Route) = {run_route, route_floats};
  entry(t, Op::Experts) = {run_experts<kFast>, experts_floats<kFast>};
}

}  // namespace

void add_matmul_ops(OpTable& t, bool fast) {
  fast ? add<true>(t) : add<false>(t);
}

const KernelChoices& matmul_choices() {
  static const CpuChoices choices;
  return choices;
}

}  // namespace lathe::cpu
