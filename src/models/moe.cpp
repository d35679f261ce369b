#include "models/moe.h"

#include "core/error.h"
#include "models/config_fields.h"

namespace lathe {

MoeWeights load_moe(Weights& w, const std::string& prefix, int64_t hidden, const MoeSpec& s,
                    const MoeNames& names) {
  MoeWeights m;
  m.router = w.matrix(prefix + names.router, {s.experts, hidden});
  {  // the routed experts stay mapped, even with ModelOptions::copy_weights
    const Weights::KeepMapped mapped(w);
    if (!names.gate_up.empty()) {
      if (!s.gated) fail("internal: load_moe: fused gate_up tensors for ungated experts");
      const Tensor gate_up = w.matrix(prefix + names.gate_up, {s.experts, 2 * s.inter, hidden});
      const Tensor down = w.matrix(prefix + names.down_fused, {s.experts, hidden, s.inter});
      for (int64_t e = 0; e < s.experts; ++e) {
        const Tensor gu = gate_up.rows(e, 1).reshape({2 * s.inter, hidden});
        m.experts.push_back({.gate = matrix_rows(gu, 0, s.inter),
                             .up = matrix_rows(gu, s.inter, s.inter),
                             .down = down.rows(e, 1).reshape({hidden, s.inter})});
      }
    } else {
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string p = cat(prefix, names.experts, e, ".");
        m.experts.push_back(
            {.gate = s.gated ? w.matrix(p + names.gate + ".weight", {s.inter, hidden}) : Tensor{},
             .up = w.matrix(p + names.up + ".weight", {s.inter, hidden}),
             .down = w.matrix(p + names.down + ".weight", {hidden, s.inter})});
      }
    }
  }
  if (s.shared_inter > 0)
    m.shared = load_gated_mlp(w, prefix + names.shared, hidden, s.shared_inter, {.gated = s.gated});
  if (s.shared_gate) m.shared_gate = w.matrix(prefix + names.shared_gate, {1, hidden});
  if (s.correction_bias)
    m.correction_bias =
        names.correction_bias_row
            ? w.vector(prefix + names.correction_bias, {1, s.experts}).reshape({s.experts})
            : w.vector(prefix + names.correction_bias, {s.experts});
  return m;
}

MoeSpec read_sigmoid_moe(const JsonFields& f, const SigmoidMoeDefaults& d) {
  MoeSpec s{.experts = f.get_or<int64_t>("n_routed_experts", d.experts),
            .top_k = f.get_or<int64_t>("num_experts_per_tok", d.top_k),
            .inter = f.get_or<int64_t>("moe_intermediate_size", d.inter),
            .routing = graph::Routing::Sigmoid,
            .norm_topk = f.get_or<bool>("norm_topk_prob", d.norm_topk),
            .norm_eps = 1e-20f,
            .scale = static_cast<float>(f.get_or<double>("routed_scaling_factor", d.scale)),
            .groups = f.get_or<int64_t>("n_group", d.groups),
            .top_groups = f.get_or<int64_t>("topk_group", d.top_groups),
            .correction_bias = true};
  const int64_t shared = f.get_or<int64_t>("n_shared_experts", d.shared_experts);
  if (shared < 0 || shared > (int64_t{1} << 16))
    fail(f.origin(), ": field \"n_shared_experts\" is ", shared, ", out of range");
  for (auto [name, v] : {std::pair{"n_routed_experts", s.experts},
                         {"num_experts_per_tok", s.top_k},
                         {"moe_intermediate_size", s.inter},
                         {"n_group", s.groups},
                         {"topk_group", s.top_groups}})
    if (v <= 0 || v > (int64_t{1} << 20))
      fail(f.origin(), ": field \"", name, "\" is ", v, ", out of range");
  if (s.experts % s.groups != 0 || s.top_groups > s.groups || s.top_k > s.experts ||
      s.top_k > s.top_groups * (s.experts / s.groups))
    fail(f.origin(), ": ", s.experts, " experts in n_group ", s.groups, " groups, topk_group ",
         s.top_groups, ", num_experts_per_tok ", s.top_k, " do not fit together");
  s.shared_inter = shared * s.inter;
  return s;
}

std::vector<bool> read_first_dense_layers(const JsonFields& f, int64_t num_layers,
                                          int64_t default_first_dense) {
  const int64_t first = f.get_or<int64_t>("first_k_dense_replace", default_first_dense);
  if (first < 0) fail(f.origin(), ": field \"first_k_dense_replace\" is ", first);
  std::vector<bool> sparse(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) sparse[static_cast<size_t>(i)] = i >= first;
  return sparse;
}

std::vector<bool> read_mlp_layer_types(const JsonFields& f, int64_t num_layers,
                                       int64_t default_first_dense) {
  if (!f.has("mlp_layer_types")) return read_first_dense_layers(f, num_layers, default_first_dense);
  const Json& types = f.at("mlp_layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != num_layers)
    fail(f.origin(), ": field \"mlp_layer_types\" must list ", num_layers, " layer types");
  std::vector<bool> sparse(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) {
    const Json& t = types[static_cast<size_t>(i)];
    if (t != "dense" && t != "sparse")
      fail(f.origin(), ": mlp_layer_types[", i, "] is ", t.dump(), "; \"dense\" or \"sparse\"");
    sparse[static_cast<size_t>(i)] = t == "sparse";
  }
  return sparse;
}

void check_moe_spec(const Checkpoint& ckpt, const JsonFields& f, const MoeSpec& s,
                    const MoeFields& names) {
  check_sizes(f, {{names.experts, s.experts}, {names.top_k, s.top_k}, {names.inter, s.inter}});
  if (s.top_k > s.experts)
    fail(f.origin(), ": field \"", names.top_k, "\" is ", s.top_k, ", more than the ", s.experts,
         " experts (\"", names.experts, "\")");
  // Every expert has at least one tensor of its own (or a slice of one per layer, for 3-D
  // layouts, whose shapes are checked against the experts count when loaded).
  if (static_cast<uint64_t>(s.experts) > ckpt.tensor_names().size() &&
      static_cast<uint64_t>(s.experts) * 4 > ckpt.total_tensor_bytes())
    fail(f.origin(), ": field \"", names.experts, "\" is ", s.experts,
         ", but the checkpoint holds ", ckpt.tensor_names().size(), " tensors");
  if (s.shared_inter < 0 || s.shared_inter > (int64_t{1} << 31))
    fail(f.origin(), ": the shared experts' intermediate size ", s.shared_inter,
         " is out of range");
}

std::vector<bool> read_sparse_layers(const JsonFields& f, int64_t num_layers, int64_t experts) {
  const int64_t step = f.get_or<int64_t>("decoder_sparse_step", 1);
  if (step < 1) fail(f.origin(), ": field \"decoder_sparse_step\" is ", step, ", must be >= 1");
  std::vector<bool> sparse(static_cast<size_t>(num_layers), false);
  for (int64_t i = 0; i < num_layers; ++i)
    sparse[static_cast<size_t>(i)] = experts > 0 && (i + 1) % step == 0;
  if (f.has("mlp_only_layers")) {
    const Json& only = f.at("mlp_only_layers");
    if (!only.is_array()) fail(f.origin(), ": field \"mlp_only_layers\" must be a list of layers");
    for (const Json& l : only) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= num_layers)
        fail(f.origin(), ": mlp_only_layers holds ", l.dump(), ", not a layer of ", num_layers);
      sparse[l.get<size_t>()] = false;
    }
  }
  return sparse;
}

namespace blocks {

Value moe(Builder& g, Value x, const MoeWeights& w, const MoeSpec& s, const std::string& prefix) {
  Value logits = linear(g, x, w.router, w.router_bias, graph::Quantize::Never);
  Value route = g.name(g.route(logits,
                               {.routing = s.routing,
                                .top_k = s.top_k,
                                .norm_topk = s.norm_topk,
                                .norm_eps = s.norm_eps,
                                .scale = s.scale,
                                .groups = s.groups,
                                .top_groups = s.top_groups},
                               g.weight(w.correction_bias)),
                       prefix + "route");
  std::vector<Builder::Expert> experts;
  for (const GatedMlpWeights& e : w.experts)
    experts.push_back({g.weight(e.gate), g.weight(e.up), g.weight(e.down), g.weight(e.gate_bias),
                       g.weight(e.up_bias), g.weight(e.down_bias)});
  Value out = g.experts(x, route, experts, s.act, s.glu, s.scale_inputs);
  if (s.shared_inter > 0) {
    Value shared = feed_forward(g, x, w.shared, s.act);
    if (s.shared_gate)
      shared = g.act_mul(graph::Activation::Sigmoid, linear(g, x, w.shared_gate), shared);
    out = g.add(out, shared);
  }
  return g.name(out, prefix + "mlp_out");
}

}  // namespace blocks
}  // namespace lathe
