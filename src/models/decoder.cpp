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

graph::Value Decoder::head(graph::Builder& g, graph::Value x) const {
  return blocks::linear(g, x, lm_head_);
}

}  // namespace lathe
