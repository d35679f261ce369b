// The skeleton every decoder-only model shares, once: token embedding, the layer loop,
// the rows that want logits, final norm, output head. A model file derives from Decoder,
// loads its weights and supplies its own layer (and, where it differs, embedding, norm and
// head), readable beside its modeling_<arch>.py.
#pragma once

#include <span>
#include <vector>

#include "models/blocks.h"
#include "models/engine.h"
#include "models/rope.h"

namespace lathe {

// What a layer reads besides the residual stream.
struct LayerInputs {
  const StepInputs& step;
  std::span<const graph::Value> rope_tables;  // one per entry of Decoder::ropes_
};

class Decoder : public GraphModel {
 public:
  // embed -> layer.0 .. layer.N-1 (each named "layer.i.out") -> rows -> final_norm -> head.
  graph::Value build(graph::Builder& g, const StepInputs& in) const final;

 protected:
  // [n, hidden]: rows of embed_ for the tokens, times embed_scale_ when it is not 1.
  virtual graph::Value embed(graph::Builder& g, const StepInputs& in) const;
  virtual graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                             const LayerInputs& in) const = 0;
  virtual graph::Value final_norm(graph::Builder& g, graph::Value x) const = 0;
  // [r, vocab]: x . lm_head_^T by default.
  virtual graph::Value head(graph::Builder& g, graph::Value x) const;

  std::vector<Rope> ropes_;  // rotary schedules; tables are computed once per step for each
  Tensor embed_, lm_head_;
  float embed_scale_ = 1;
};

}  // namespace lathe
