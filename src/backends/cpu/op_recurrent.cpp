// The CPU backends' recurrent ops (ops.h): each sequence's causal convolution, Gated
// DeltaNet's delta rule and Mamba2's selective state space recurrence, over the state its
// cache layer keeps.
#include <algorithm>

#include "backends/cpu/ops.h"
#include "backends/cpu/recurrent.h"
#include "core/error.h"

namespace lathe::cpu {
namespace {

using graph::Op;

// The state tensor a recurrent node of segment s reads and updates, checked against the shape
// the node expects (a span: a decode step allocates nothing).
float* recurrent_state(const NodeArgs& a, const graph::Segment& s,
                       std::initializer_list<int64_t> expect) {
  const graph::StateAttrs p = a.node.op == Op::Ssd
                                  ? graph::StateAttrs{a.node.attr<graph::SsdAttrs>().layer,
                                                      a.node.attr<graph::SsdAttrs>().slot}
                                  : a.node.attr<graph::StateAttrs>();
  KVCache& cache = *a.step.caches[static_cast<size_t>(s.seq)];
  if (p.layer < 0 || p.layer >= static_cast<int64_t>(cache.layers.size()))
    fail("internal: ", graph::op_name(a.node.op), ": layer ", p.layer, " not in the cache");
  KVCache::Layer& l = cache.layers[static_cast<size_t>(p.layer)];
  if (l.kind != StateKind::Recurrent || p.slot < 0 ||
      p.slot >= static_cast<int64_t>(l.states.size()) ||
      !std::ranges::equal(l.states[static_cast<size_t>(p.slot)].shape(), expect))
    fail("internal: ", graph::op_name(a.node.op), ": layer ", p.layer, " has no state ", p.slot,
         " of shape ", shape_str(Shape(expect)));
  return l.states[static_cast<size_t>(p.slot)].mut<float>();
}

void run_causal_conv(const NodeArgs& a) {
  const Tensor &x = *a.inputs[0], &w = *a.inputs[1];
  const int64_t ch = x.dim(1), kernel = w.numel() / ch;
  for (const graph::Segment& s : a.step.segments)
    causal_conv(x.data<float>() + s.first * ch, s.count, ch, w.data<float>(), kernel,
                f32_or_null(a.inputs[2]), recurrent_state(a, s, {kernel - 1, ch}),
                a.out.mut<float>() + s.first * ch);
}

template <bool kFast>
void run_gated_delta_rule(const NodeArgs& a) {
  const Tensor &q = *a.inputs[0], &v = *a.inputs[2];
  const int64_t kh = q.dim(1), dk = q.dim(2), vh = v.dim(1), dv = v.dim(2);
  for (const graph::Segment& s : a.step.segments) {
    DeltaRuleArgs args{q.data<float>() + s.first * kh * dk,
                       a.inputs[1]->data<float>() + s.first * kh * dk,
                       v.data<float>() + s.first * vh * dv,
                       a.inputs[3]->data<float>() + s.first * vh,
                       a.inputs[4]->data<float>() + s.first * vh,
                       a.inputs[5]->data<float>(),
                       a.inputs[6]->data<float>(),
                       s.count,
                       kh,
                       vh,
                       dk,
                       dv,
                       recurrent_state(a, s, {vh, dk, dv}),
                       a.out.mut<float>() + s.first * vh * dv,
                       a.workspace};
    if constexpr (kFast)
      gated_delta_rule_fast(args, a.pool);
    else
      gated_delta_rule(args, nullptr);
  }
}

template <bool kFast>
void run_ssd(const NodeArgs& a) {
  const Tensor &x = *a.inputs[0], &b = *a.inputs[4];
  const int64_t heads = x.dim(1), dp = x.dim(2), groups = b.dim(1), ds = b.dim(2);
  for (const graph::Segment& s : a.step.segments) {
    SsdArgs args{x.data<float>() + s.first * heads * dp,
                 a.inputs[1]->data<float>() + s.first * heads,
                 a.inputs[2]->data<float>(),
                 a.inputs[3]->data<float>(),
                 b.data<float>() + s.first * groups * ds,
                 a.inputs[5]->data<float>() + s.first * groups * ds,
                 a.inputs[6]->data<float>(),
                 a.node.attr<graph::SsdAttrs>().dt_min,
                 a.node.attr<graph::SsdAttrs>().dt_max,
                 s.count,
                 heads,
                 dp,
                 groups,
                 ds,
                 recurrent_state(a, s, {heads, ds, dp}),
                 a.out.mut<float>() + s.first * heads * dp};
    if constexpr (kFast)
      ssd_fast(args, a.pool);
    else
      ssd(args, nullptr);
  }
}

template <bool kFast>
size_t delta_rule_floats(const graph::Graph& g, const graph::Node& n, int threads, int64_t) {
  const int64_t k_dim = g.at(n.inputs[0]).shape[2];
  return static_cast<size_t>((kFast ? threads : 1) * delta_rule_scratch_floats(k_dim, n.shape[2]));
}

template <bool kFast>
void add(OpTable& t) {
  entry(t, Op::CausalConv) = {run_causal_conv};
  entry(t, Op::GatedDeltaRule) = {run_gated_delta_rule<kFast>, delta_rule_floats<kFast>};
  entry(t, Op::Ssd) = {run_ssd<kFast>};
}

}  // namespace

void add_recurrent_ops(OpTable& t, bool fast) {
  fast ? add<true>(t) : add<false>(t);
}

}  // namespace lathe::cpu
