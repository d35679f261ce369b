#include "models/arch/gemma_common.h"

#include <cmath>

#include "core/error.h"
#include "models/blocks.h"

namespace lathe {

std::vector<RopeConfig> read_gemma3_ropes(const JsonFields& f, int64_t head_dim,
                                          int64_t max_position_embeddings) {
  Json full = {{"rope_type", "default"}}, local = {{"rope_type", "default"}};
  if (f.has("rope_parameters")) {
    const Json& rp = f.at("rope_parameters");
    if (!rp.is_object() || !(rp.contains("full_attention") || rp.contains("sliding_attention")))
      fail(f.origin(),
           ": field \"rope_parameters\" must be keyed by layer type "
           "(full_attention, sliding_attention)");
    if (rp.contains("full_attention") && !rp["full_attention"].is_null())
      full = rp["full_attention"];
    if (rp.contains("sliding_attention") && !rp["sliding_attention"].is_null())
      local = rp["sliding_attention"];
  } else if (f.has("rope_scaling")) {
    if (!f.at("rope_scaling").is_object())
      fail(f.origin(), ": field \"rope_scaling\" must be an object");
    full.update(f.at("rope_scaling"));
  }
  if (!full.is_object() || !local.is_object())
    fail(f.origin(), ": field \"rope_parameters\" entries must be objects");
  if (!full.contains("rope_theta")) full["rope_theta"] = f.get_or<double>("rope_theta", 1e6);
  if (!local.contains("rope_theta"))
    local["rope_theta"] = f.get_or<double>("rope_local_base_freq", 1e4);
  std::vector<RopeConfig> ropes;
  for (auto [name, params] : {std::pair{"full_attention", &full}, {"sliding_attention", &local}}) {
    const Json cfg = {{"rope_parameters", *params}};
    ropes.push_back(read_rope_config(JsonFields(cfg, f.origin() + ": rope_parameters." + name),
                                     head_dim, max_position_embeddings));
  }
  return ropes;
}

void read_kv_sharing_of(const JsonFields& f, const std::vector<GemmaAttentionLayer*>& layers) {
  const int64_t num_layers = static_cast<int64_t>(layers.size());
  const int64_t shared = f.get_or<int64_t>("num_kv_shared_layers", 0);
  if (shared < 0 || shared >= num_layers)
    fail(f.origin(), ": field \"num_kv_shared_layers\" is ", shared, ", must be in [0, ",
         num_layers, ") (some layer must store the keys and values the others share)");
  const int64_t first_shared = num_layers - shared;
  for (int64_t i = 0; i < num_layers; ++i) {
    GemmaAttentionLayer& l = *layers[i];
    l.kv_layer = i;
    if (i < first_shared) continue;
    l.kv_shared = true;
    l.kv_layer = -1;
    for (int64_t j = first_shared - 1; j >= 0 && l.kv_layer < 0; --j)
      if (layers[j]->sliding == l.sliding) l.kv_layer = j;
    if (l.kv_layer < 0)
      fail(f.origin(), ": field \"num_kv_shared_layers\" is ", shared, ": layer ", i,
           " shares the keys and values of an earlier ",
           l.sliding ? "sliding_attention" : "full_attention", " layer, and there is none");
  }
}

Tensor ones(int64_t n) {
  Tensor t = Tensor::zeros(DType::F32, {n});
  for (int64_t j = 0; j < n; ++j) t.mut<float>()[j] = 1.0f;
  return t;
}

GemmaAttentionWeights load_gemma_attention(Weights& w, const std::string& prefix,
                                           const GemmaAttentionLayer& c, int64_t heads,
                                           int64_t hidden) {
  const int64_t hd = c.head_dim;
  GemmaAttentionWeights a;
  a.q = w.matrix(prefix + "q_proj.weight", {heads * hd, hidden});
  a.q_norm = w.vector(prefix + "q_norm.weight", {hd});
  if (!c.kv_shared) {
    a.k = w.matrix(prefix + "k_proj.weight", {c.kv_heads * hd, hidden});
    if (!c.k_eq_v) a.v = w.matrix(prefix + "v_proj.weight", {c.kv_heads * hd, hidden});
    a.k_norm = w.vector(prefix + "k_norm.weight", {hd});
    a.v_norm = ones(hd);
  }
  a.o = w.matrix(prefix + "o_proj.weight", {hidden, heads * hd});
  return a;
}

graph::Value gemma_attention(graph::Builder& g, graph::Value x, const GemmaAttentionLayer& c,
                             const GemmaAttentionWeights& w, int64_t heads, float eps,
                             graph::Value rope_tables, const std::string& p) {
  const int64_t n = g.dim(x, 0), hd = c.head_dim;
  auto norm = [&](graph::Value v, const Tensor& weight) {
    return blocks::rms_norm(g, v, weight, eps, 0.0f);
  };
  graph::Value q = g.reshape(blocks::linear(g, x, w.q), {n, heads, hd});
  q = g.name(g.rope(norm(q, w.q_norm), rope_tables, graph::RopeLayout::HalfSplit), p + "q");
  graph::Builder::AttentionParams ap{.layer = c.kv_layer, .window = c.window, .scale = 1.0f};
  graph::Value out;
  if (c.kv_shared) {  // the keys and values layer kv_layer stored this step
    ap.kv_read_only = true;
    out = g.attention(q, {}, {}, ap);
  } else {
    const graph::Value k_proj = g.reshape(blocks::linear(g, x, w.k), {n, c.kv_heads, hd});
    // attention_k_eq_v: the values are the keys' projection, before k_norm and rotary.
    graph::Value v = c.k_eq_v ? k_proj : g.reshape(blocks::linear(g, x, w.v), {n, c.kv_heads, hd});
    graph::Value k = norm(k_proj, w.k_norm);
    k = g.name(g.rope(k, rope_tables, graph::RopeLayout::HalfSplit), p + "k");
    v = g.name(norm(v, w.v_norm), p + "v");
    out = g.attention(q, k, v, ap);
  }
  out = g.reshape(g.name(out, p + "attn"), {n, heads * hd});
  return g.name(blocks::linear(g, out, w.o), p + "attn_out");
}

std::vector<LayerStateSpec> gemma_layer_states(const std::vector<GemmaAttentionLayer>& layers) {
  std::vector<LayerStateSpec> out;
  for (const GemmaAttentionLayer& l : layers)
    out.push_back(l.kv_shared
                      ? LayerStateSpec{.kind = StateKind::Recurrent, .recurrent = {}}
                      : LayerStateSpec{.kind = l.sliding ? StateKind::SlidingKV : StateKind::FullKV,
                                       .kv_heads = l.kv_heads,
                                       .head_dim = l.head_dim,
                                       .window = l.window});
  return out;
}

PerLayerEmbeddings load_per_layer_embeddings(Weights& w, const std::string& m, int64_t vocab,
                                             int64_t layers, int64_t dim, int64_t hidden) {
  PerLayerEmbeddings p;
  p.layers = layers;
  p.dim = dim;
  p.embed = w.matrix(m + "embed_tokens_per_layer.weight", {vocab, layers * dim});
  p.model_projection = w.matrix(m + "per_layer_model_projection.weight", {layers * dim, hidden});
  p.projection_norm = w.vector(m + "per_layer_projection_norm.weight", {dim});
  return p;
}

graph::Value per_layer_inputs(graph::Builder& g, graph::Value x, graph::Value tokens,
                              const PerLayerEmbeddings& p, float eps, graph::IdRange range) {
  const int64_t n = g.dim(x, 0), hidden = g.dim(x, 1), width = p.layers * p.dim;
  graph::Value tok = g.embedding(g.weight(p.embed), tokens, 0, range);
  tok = g.scale(tok, static_cast<float>(std::sqrt(static_cast<double>(p.dim))));
  graph::Value proj = blocks::linear(g, x, p.model_projection);
  proj = g.scale(proj, static_cast<float>(std::pow(static_cast<double>(hidden), -0.5)));
  proj = g.reshape(
      blocks::rms_norm(g, g.reshape(proj, {n, p.layers, p.dim}), p.projection_norm, eps, 0.0f),
      {n, width});
  return g.name(g.scale(g.add(proj, tok), static_cast<float>(std::pow(2.0, -0.5))),
                "per_layer_inputs");
}

PerLayerInputGate load_per_layer_input_gate(Weights& w, const std::string& p, int64_t hidden,
                                            int64_t dim) {
  return {.gate = w.matrix(p + "per_layer_input_gate.weight", {dim, hidden}),
          .projection = w.matrix(p + "per_layer_projection.weight", {hidden, dim}),
          .norm = w.vector(p + "post_per_layer_input_norm.weight", {hidden})};
}

graph::Value per_layer_input_gate(graph::Builder& g, graph::Value x, graph::Value per_layer_input,
                                  const PerLayerInputGate& w, graph::Activation act, float eps) {
  graph::Value h = g.act_mul(act, blocks::linear(g, x, w.gate), per_layer_input);
  return blocks::rms_norm(g, blocks::linear(g, h, w.projection), w.norm, eps, 0.0f);
}

}  // namespace lathe
