// The decoder DeepSeek-V2 and DeepSeek-V3 share (transformers builds DeepseekV3 from
// DeepseekV2 in its modular file): pre-norm RMSNorm blocks with multi-head latent attention
// (models/mla.h) and, after first_k_dense_replace dense layers, a mixture of experts with
// shared experts (models/moe.h). What differs is the router, which each model file reads.
#pragma once

#include <memory>
#include <vector>

#include "models/mla.h"
#include "models/moe.h"
#include "models/rope.h"

namespace lathe {

struct DeepseekConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  MlaSpec mla;
  RopeConfig rope;
  MoeSpec moe;
  std::vector<bool> layer_moe;
  struct {
    int64_t kv_heads, head_dim;  // the latent cache, for ModelInfo
  } attention;
};

// The config class's defaults for the fields the two share.
struct DeepseekDefaults {
  int64_t vocab_size, hidden_size, intermediate_size, num_layers, heads, max_position_embeddings;
  // DeepseekV3Config's; GlmMoeDsaConfig's differ.
  int64_t q_lora_rank = 1536, kv_lora_rank = 512, qk_nope = 128, qk_rope = 64, v_head_dim = 128;
  double rms_norm_eps = 1e-6;
};

// Reads everything but the router (moe) and layer_moe.
DeepseekConfig read_deepseek_config(const Checkpoint& ckpt, const DeepseekDefaults& d);

std::unique_ptr<Model> build_deepseek(const Checkpoint& ckpt, DeepseekConfig cfg,
                                      const ModelOptions& opts);

}  // namespace lathe
