// The Olmo2 decoder (transformers Olmo2Model), which Olmo3 reuses with sliding-window layers
// and a rotary schedule per layer type.
#pragma once

#include <memory>
#include <vector>

#include "models/arch/llama_family.h"

namespace lathe {

struct Olmo2Config {
  LlamaFamilyConfig base;              // Olmo2Config's fields are LlamaConfig's; windows per layer
  std::vector<RopeConfig> ropes = {};  // the rotary schedules (empty: base.rope alone)
  std::vector<int> layer_rope = {};    // per layer: index into ropes (empty: all 0)
};

std::unique_ptr<Model> build_olmo2_decoder(const Checkpoint& ckpt, Olmo2Config cfg,
                                           const ModelOptions& opts);

}  // namespace lathe
