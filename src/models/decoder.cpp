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

std::string layer_prefix(int64_t i) {
  return cat("layer.", i, ".");
}

}  // namespace lathe
