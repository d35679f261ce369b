#include "models/gated_deltanet.h"

#include "core/error.h"

namespace lathe {

GatedDeltaNetSpec read_gated_deltanet_spec(const JsonFields& f, int64_t hidden, float eps,
                                           graph::Activation act, bool fused_projections) {
  GatedDeltaNetSpec s{.hidden = hidden,
                      .k_heads = f.get_or<int64_t>("linear_num_key_heads", 16),
                      .v_heads = f.get_or<int64_t>("linear_num_value_heads", 32),
                      .k_dim = f.get_or<int64_t>("linear_key_head_dim", 128),
                      .v_dim = f.get_or<int64_t>("linear_value_head_dim", 128),
                      .conv_kernel = f.get_or<int64_t>("linear_conv_kernel_dim", 4),
                      .norm_eps = eps,
                      .act = act,
                      .fused_projections = fused_projections};
  check_sizes(f, {{"linear_num_key_heads", s.k_heads},
                  {"linear_num_value_heads", s.v_heads},
                  {"linear_key_head_dim", s.k_dim},
                  {"linear_value_head_dim", s.v_dim},
                  {"linear_conv_kernel_dim", s.conv_kernel}});
  if (s.v_heads % s.k_heads != 0)
    fail(f.origin(), ": linear_num_value_heads ", s.v_heads,
         " is not a multiple of linear_num_key_heads ", s.k_heads);
  if (s.conv_kernel > 64)
    fail(f.origin(), ": field \"linear_conv_kernel_dim\" is ", s.conv_kernel,
         "; lathe keeps at most 64 positions of convolution state");
  for (int64_t v : {s.key_dim(), s.value_dim(), s.conv_dim()})
    if (v > (int64_t{1} << 31))
      fail(f.origin(), ": linear attention heads times head sizes out of range");
  return s;
}

GatedDeltaNetWeights load_gated_deltanet(Weights& w, const std::string& prefix,
                                         const GatedDeltaNetSpec& s) {
  GatedDeltaNetWeights d;
  const int64_t h = s.hidden;
  if (s.fused_projections) {
    d.qkvz = w.matrix(prefix + "in_proj_qkvz.weight", {2 * s.key_dim() + 2 * s.value_dim(), h});
    d.ba = w.matrix(prefix + "in_proj_ba.weight", {2 * s.v_heads, h});
  } else {
    d.qkv = w.matrix(prefix + "in_proj_qkv.weight", {s.conv_dim(), h});
    d.z = w.matrix(prefix + "in_proj_z.weight", {s.value_dim(), h});
    d.b = w.matrix(prefix + "in_proj_b.weight", {s.v_heads, h});
    d.a = w.matrix(prefix + "in_proj_a.weight", {s.v_heads, h});
  }
  d.conv = w.vector(prefix + "conv1d.weight", {s.conv_dim(), 1, s.conv_kernel});
  d.dt_bias = w.vector(prefix + "dt_bias", {s.v_heads});
  d.a_log = w.vector(prefix + "A_log", {s.v_heads});
  d.norm = w.vector(prefix + "norm.weight", {s.v_dim});
  d.out = w.matrix(prefix + "out_proj.weight", {h, s.value_dim()});
  return d;
}

LayerStateSpec gated_deltanet_state(const GatedDeltaNetSpec& s) {
  return {.kind = StateKind::Recurrent,
          .recurrent = {{s.conv_kernel - 1, s.conv_dim()}, {s.v_heads, s.k_dim, s.v_dim}}};
}

namespace blocks {

Value gated_deltanet(Builder& g, Value x, const GatedDeltaNetWeights& w, const GatedDeltaNetSpec& s,
                     int64_t layer, const std::string& prefix) {
  const int64_t n = g.dim(x, 0), group = s.v_heads / s.k_heads;
  Value mixed, z, a, b;
  if (s.fused_projections) {
    // Qwen3NextGatedDeltaNet.fix_query_key_value_ordering: per key head
    // [q (k_dim) | k (k_dim) | v (group v_dim) | z (group v_dim)] and [b (group) | a (group)].
    const int64_t gv = group * s.v_dim;
    const Value qkvz = g.reshape(linear(g, x, w.qkvz), {n, s.k_heads, 2 * s.k_dim + 2 * gv});
    auto part = [&](int64_t start, int64_t len, int64_t cols) {
      return g.reshape(g.slice(qkvz, start, len), {n, cols});
    };
    mixed = g.concat(g.concat(part(0, s.k_dim, s.key_dim()), part(s.k_dim, s.k_dim, s.key_dim())),
                     part(2 * s.k_dim, gv, s.value_dim()));
    z = part(2 * s.k_dim + gv, gv, s.value_dim());
    const Value ba = g.reshape(linear(g, x, w.ba), {n, s.k_heads, 2 * group});
    b = g.reshape(g.slice(ba, 0, group), {n, s.v_heads});
    a = g.reshape(g.slice(ba, group, group), {n, s.v_heads});
  } else {
    mixed = linear(g, x, w.qkv);
    z = linear(g, x, w.z);
    b = linear(g, x, w.b);
    a = linear(g, x, w.a);
  }
  mixed = g.activation(s.act, g.causal_conv(mixed, g.weight(w.conv), {}, {layer, 0}));
  const Value q = g.reshape(g.slice(mixed, 0, s.key_dim()), {n, s.k_heads, s.k_dim});
  const Value k = g.reshape(g.slice(mixed, s.key_dim(), s.key_dim()), {n, s.k_heads, s.k_dim});
  const Value v =
      g.reshape(g.slice(mixed, 2 * s.key_dim(), s.value_dim()), {n, s.v_heads, s.v_dim});
  Value core =
      g.gated_delta_rule(q, k, v, a, b, g.weight(w.a_log), g.weight(w.dt_bias), {layer, 1});
  g.name(core, prefix + "attn");
  // Qwen3NextRMSNormGated: norm(core) * weight, times silu(z).
  core = rms_norm(g, core, w.norm, s.norm_eps);
  core = g.act_mul(graph::Activation::Silu, g.reshape(z, {n, s.v_heads, s.v_dim}), core);
  return g.name(linear(g, g.reshape(core, {n, s.value_dim()}), w.out), prefix + "attn_out");
}

}  // namespace blocks
}  // namespace lathe
