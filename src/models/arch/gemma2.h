// The Gemma2 decoder (transformers Gemma2Model), which Gemma3's text model reuses with
// per-head q/k norms, other defaults and a rotary kind per layer type.
#pragma once

#include <memory>
#include <vector>

#include "models/config_fields.h"
#include "models/layers.h"

namespace lathe {

struct Gemma2Config {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = true;
  graph::Activation act = graph::Activation::GeluTanh;
  float final_softcap = 0;  // 0: none
  AttentionSpec attention;  // shared by every layer but for the window
  std::vector<int64_t> layer_windows;
  std::vector<RopeConfig> ropes;  // the rotary kinds
  std::vector<int> layer_rope;    // per layer: index into ropes (empty: all 0)
};

// The defaults that differ between Gemma2Config and Gemma3TextConfig.
struct Gemma2Defaults {
  int64_t vocab_size, hidden_size, intermediate_size, num_layers, heads, kv_heads;
  int64_t max_position_embeddings;
  float final_softcap, attn_softcap;  // 0: None
  int64_t sliding_pattern;  // default layer_types: layer i slides unless (i + 1) % pattern == 0
};

// Reads every field but the rotary ones, which the model file reads.
Gemma2Config read_gemma2_config(const Checkpoint& ckpt, const Gemma2Defaults& d);

std::unique_ptr<Model> build_gemma2_decoder(const Checkpoint& ckpt, Gemma2Config cfg,
                                            const ModelOptions& opts);

}  // namespace lathe
