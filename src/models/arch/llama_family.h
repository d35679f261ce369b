// The decoder that Llama, Mistral, Qwen2 and Qwen3 share (transformers builds the latter three
// from LlamaModel through its modular files): pre-norm RMSNorm blocks, rotary grouped-query
// attention, SwiGLU MLP. What differs between them is their config reading, which fills a
// LlamaFamilyConfig in each architecture's own file.
#pragma once

#include <memory>
#include <vector>

#include "models/config_fields.h"
#include "models/layers.h"
#include "models/moe.h"

namespace lathe {

struct LlamaFamilyConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  bool mlp_bias = false;
  AttentionSpec attention;             // shared by every layer but for the window
  std::vector<int64_t> layer_windows;  // per layer: 0, or the sliding window
  RopeConfig rope;

  // Variants of the same block; the defaults are Llama's.
  graph::Activation mlp_act = graph::Activation::Silu;  // Gemma: gelu_pytorch_tanh
  bool mlp_gated = true;                                // Arcee: down(act(up(x))), no gate_proj
  float norm_offset = 0;          // Gemma: RMSNorm scales by (1 + weight) (GemmaRMSNorm)
  float embed_multiplier = 1;     // Gemma: sqrt(hidden_size); Granite: embedding_multiplier
  float residual_multiplier = 1;  // Granite: residual + branch * residual_multiplier
  float logits_divisor = 1;       // Granite: logits / logits_scaling
  std::vector<bool> layer_rope;   // SmolLM3 no_rope_layers; empty: rotary on every layer
  // Ministral3: queries rotate by tables of their own, `rope` with llama_4_scaling_beta's
  // position scale; unset: by the keys' tables.
  std::optional<RopeConfig> query_rope;

  // Mixtures of experts (Mixtral, Qwen2Moe, Qwen3Moe, Olmoe, GraniteMoe): the layers marked in
  // layer_moe run the MoE block under moe_module (the others a dense MLP of intermediate_size
  // under "mlp.").
  std::optional<MoeSpec> moe;
  std::vector<bool> layer_moe;
  std::string moe_module = "mlp.";
  MoeNames moe_names;
  // Mllama's text model: its embedding has rows past vocab_size (vocab_size + 8); 0: vocab_size.
  int64_t embedding_rows = 0;
  // Glm4Moe, DeepseekV3: tensors of layers past num_hidden_layers (the multi-token prediction
  // layers of num_nextn_predict_layers) are left unused, as transformers leaves them.
  bool extra_layers_ignored = false;
};

// Layer i's attention: the shared spec with the layer's window and rotary (layer_rope).
AttentionSpec layer_attention(const LlamaFamilyConfig& c, int64_t i);
// The family's RMSNorm: rms_norm_eps, and GemmaRMSNorm's offset where set.
Norm rms_norm_of(const LlamaFamilyConfig& c);

std::unique_ptr<Model> build_llama_family(const Checkpoint& ckpt, const LlamaFamilyConfig& cfg,
                                          const ModelOptions& opts);

// Fields common to the family, read with the given architecture defaults, which are
// LlamaConfig's unless set: a model file names those its transformers config class changes.
struct LlamaFamilyDefaults {
  int64_t vocab_size = 32000, hidden_size = 4096, intermediate_size = 11008, num_layers = 32;
  int64_t heads = 32;
  std::optional<int64_t> kv_heads = {};  // unset: equal to heads
  std::optional<int64_t> head_dim = {};  // unset: hidden_size / heads
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  // The one hidden_act value lathe implements for the architecture (its default), checked
  // here; nullptr when the model file reads the activation itself (Gemma).
  const char* hidden_act = "silu";
  double rope_theta = 10000.0;  // the config class's default_theta
  double rms_norm_eps = 1e-6;
};
LlamaFamilyConfig read_llama_family_config(const Checkpoint& ckpt, const LlamaFamilyDefaults& d);
// The same from `f`: config.json itself, or the text_config a multimodal config.json nests.
LlamaFamilyConfig read_llama_family_config(const Checkpoint& ckpt, const JsonFields& f,
                                           const LlamaFamilyDefaults& d);

// Marks the tensors of layers `first` and above (model.layers.N. with N >= first) unused: the
// multi-token prediction layers Glm4Moe and DeepseekV3 checkpoints append.
void ignore_layers_from(Weights& w, int64_t first);

// Reads use_sliding_window / sliding_window / max_window_layers / layer_types as Qwen2Config
// and Qwen3Config turn them into per-layer windows.
std::vector<int64_t> read_qwen_layer_windows(const JsonFields& cfg, int64_t num_layers);

}  // namespace lathe
