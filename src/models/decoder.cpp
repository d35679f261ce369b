#include "models/decoder.h"

#include "core/error.h"

namespace lathe {

graph::Value Decoder::build(graph::Builder& g, const StepInputs& in) const {
  std::vector<graph::Value> tables;
  for (const Rope& r : ropes_) tables.push_back(g.rope_tables(r, in.positions));
  graph::Value x = g.name(embed(g, in), "embed");
  const LayerInputs li{in, tables};
  for (int64_t i = 0; i < info_.num_layers; ++i)
    x = g.name(layer(g, i, x, li), cat("layer.", i, ".out"));
  x = g.name(final_norm(g, g.rows(x, in.logit_rows)), "final_norm");
  return g.name(head(g, x), "logits");
}

graph::Value Decoder::embed(graph::Builder& g, const StepInputs& in) const {
  graph::Value x = g.embedding(g.weight(embed_), in.tokens);
  return embed_scale_ != 1 ? g.scale(x, embed_scale_) : x;
}

graph::Value Decoder::final_norm(graph::Builder& g, graph::Value x) const {
  return blocks::norm(g, x, final_norm_);
}

graph::Value Decoder::head(graph::Builder& g, graph::Value x) const {
  return blocks::linear(g, x, lm_head_, lm_head_bias_);
}

void Decoder::load(Weights& w, const DecoderSizes& c, const LoadLayer& load_layer,
                   const DecoderNames& names, const std::function<void(Weights&)>& rest) {
  const int64_t h = c.hidden_size;
  embed_ = w.matrix(names.embed, {names.embed_rows > 0 ? names.embed_rows : c.vocab_size, h});
  for (int64_t i = 0; i < c.num_layers; ++i) load_layer(w, i, cat(names.layers, i, "."));
  final_norm_ = final_norm_.load(w, names.final_norm, h);
  lm_head_ = load_lm_head(w, c.tie_word_embeddings, embed_, c.vocab_size, h, names.lm_head);
  if (rest) rest(w);
  w.finish(c.architecture);
}

void DecoderLayer::load_norms(Weights& w, const std::string& prefix, const Norm& norm, int64_t dim,
                              const NormNames& names) {
  const auto load = [&](const std::string& name) -> std::optional<Norm> {
    if (name.empty()) return std::nullopt;
    return norm.load(w, prefix + name, dim);
  };
  attn_norm = load(names.attn_norm);
  attn_post_norm = load(names.attn_post_norm);
  mlp_norm = load(names.mlp_norm);
  mlp_post_norm = load(names.mlp_post_norm);
}

graph::Value DecoderLayer::forward(graph::Builder& g, graph::Value x,
                                   const blocks::AttentionInputs& ai, const std::string& p) const {
  const auto normed = [&](graph::Value v, const std::optional<Norm>& n, const char* name) {
    return n ? g.name(blocks::norm(g, v, *n), p + name) : v;
  };
  const auto feed_forward = [&](graph::Value v) {
    return moe ? blocks::moe(g, v, *moe, moe_spec, p) : blocks::gated_mlp(g, v, mlp, act, p);
  };
  blocks::AttentionInputs attn_in = ai;
  if (sinks.defined()) attn_in.sinks = sinks;
  graph::Value a = normed(x, attn_norm, "attn_norm");
  if (parallel) {
    const graph::Value attn_out = blocks::self_attention(g, a, attn, spec, attn_in, p);
    const graph::Value m = mlp_norm ? normed(x, mlp_norm, "mlp_norm") : a;
    return g.add(x, g.add(attn_out, feed_forward(m)));
  }
  a = blocks::self_attention(g, a, attn, spec, attn_in, p);
  x = g.add(x, normed(a, attn_post_norm, "post_attn_norm"));
  graph::Value m = feed_forward(normed(x, mlp_norm, "mlp_norm"));
  return g.add(x, normed(m, mlp_post_norm, "post_mlp_norm"));
}

std::vector<LayerStateSpec> LayerStack::layer_states() const {
  std::vector<LayerStateSpec> out;
  for (const DecoderLayer& l : layers_)
    out.push_back({.kind = l.spec.window > 0 ? StateKind::SlidingKV : StateKind::FullKV,
                   .kv_heads = l.spec.kv_heads,
                   .head_dim = l.spec.head_dim,
                   .window = l.spec.window});
  return out;
}

graph::Value LayerStack::layer(graph::Builder& g, int64_t i, graph::Value x,
                               const LayerInputs& in) const {
  const DecoderLayer& l = layers_.at(static_cast<size_t>(i));
  return l.forward(g, x, in.attention(i, l.rope), layer_prefix(i));
}

std::string layer_prefix(int64_t i) {
  return cat("layer.", i, ".");
}

}  // namespace lathe
