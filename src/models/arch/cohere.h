// The Cohere decoder (transformers CohereModel), which Cohere2 reuses with sliding-window and
// full layers, rotary only on the sliding ones, and no q/k norms.
#pragma once

#include <memory>

#include "models/arch/llama_family.h"

namespace lathe {

struct CohereConfig {
  // The fields CohereConfig shares with LlamaConfig; per layer its window (layer_windows) and
  // whether it rotates q and k (layer_rope, empty: every layer).
  LlamaFamilyConfig base;
  float layer_norm_eps = 1e-5f;
  float logit_scale = 0.0625f;
  graph::Activation act = graph::Activation::Silu;
};

// The fields CohereConfig and Cohere2Config read alike, with their defaults (which differ in
// rope_theta): sizes, activation, norms, logit_scale, attention biases, interleaved rotary.
CohereConfig read_cohere_config(const Checkpoint& ckpt, const JsonFields& f, double rope_theta);

std::unique_ptr<Model> build_cohere_decoder(const Checkpoint& ckpt, const CohereConfig& cfg,
                                            const ModelOptions& opts);

}  // namespace lathe
