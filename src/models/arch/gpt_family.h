// The decoder GPT-2 and GPTBigCode share (transformers GPT2Model, GPTBigCodeModel): token plus
// learned absolute position embeddings, pre-norm blocks with LayerNorm (weight and bias),
// attention through one fused c_attn and c_proj, an ungated MLP c_proj(act(c_fc(x))), and a
// final ln_f; every linear has a bias. What differs between the two is their config reading
// and a few named variant fields, filled in each architecture's own file.
#pragma once

#include <memory>
#include <vector>

#include "models/config_fields.h"
#include "models/layers.h"

namespace lathe {

struct GptFamilyConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, inner_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float layer_norm_eps = 1e-5f;
  bool tie_word_embeddings = true;
  graph::Activation act = graph::Activation::GeluTanh;
  AttentionSpec attention;         // heads, kv_heads (1 for multi-query), head_dim, scale
  std::vector<float> layer_scale;  // per layer: the softmax scale (GPT-2 may divide by i + 1)

  // Variants; the defaults are GPTBigCode's.
  bool conv1d = false;     // GPT-2: Conv1D weights stored [in, out], transposed at load
  int64_t qkv_groups = 1;  // how c_attn's rows are grouped, see split_fused_qkv
};

std::unique_ptr<Model> build_gpt_family(const Checkpoint& ckpt, const GptFamilyConfig& cfg,
                                        const ModelOptions& opts);

// Fields GPT2Config and GPTBigCodeConfig share (n_embd, n_layer, n_head, n_inner, n_positions,
// layer_norm_epsilon, activation_function, scale_attn_weights, tie_word_embeddings), read with
// the class defaults; `act` is the default activation_function. add_cross_attention is refused.
GptFamilyConfig read_gpt_family_config(const Checkpoint& ckpt, const char* act);

}  // namespace lathe
