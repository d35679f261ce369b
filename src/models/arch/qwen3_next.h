// The hybrid decoder Qwen3Next and Qwen3.5 share (transformers builds Qwen3_5 from Qwen3Next
// through its modular file): pre-norm blocks whose token mixer is, by layer_types, Gated
// DeltaNet linear attention (models/gated_deltanet.h) or gated full attention (q_proj also
// gives an output gate, q/k RMSNorm per head, partial rotary), and whose feed-forward is a
// SwiGLU MLP or a Qwen2Moe-style mixture of experts with a gated shared expert. Every RMSNorm
// but the linear attention's own scales by (1 + weight).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/arch/llama_family.h"
#include "models/gated_deltanet.h"

namespace lathe {

struct Qwen3HybridConfig {
  // Sizes, attention, rotary, MoE (layer_moe) and tying, as the Llama family reads them.
  LlamaFamilyConfig base;
  GatedDeltaNetSpec linear;
  std::vector<bool> layer_linear;  // per layer: linear attention (else full attention)
  // Where the text model's tensors live: "model." for a causal LM, "model.language_model."
  // inside a multimodal checkpoint, whose other tensors (`ignored_prefix`, the vision tower)
  // are left unloaded.
  std::string prefix = "model.";
  std::string ignored_prefix;
};

// The fields Qwen3NextConfig and Qwen3_5TextConfig share, read from `f` (config.json, or its
// text_config) with the config class's defaults in `d`: layer_types (or
// full_attention_interval, default 4) and the linear attention's sizes.
Qwen3HybridConfig read_qwen3_hybrid_config(const Checkpoint& ckpt, const JsonFields& f,
                                           const LlamaFamilyDefaults& d, bool fused_projections);

std::unique_ptr<Model> build_qwen3_hybrid(const Checkpoint& ckpt, Qwen3HybridConfig cfg,
                                          const ModelOptions& opts);

}  // namespace lathe
