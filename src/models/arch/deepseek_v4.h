// DeepseekV4ForCausalLM: transformers/models/deepseek_v4 (configuration_deepseek_v4.py,
// modeling_deepseek_v4.py). The config and tensors as DeepseekV4Config and the published
// checkpoints name them; the model itself (models/arch/deepseek_v4_model.cpp) builds its graph on
// them (docs/deepseek-v4.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "models/layers.h"
#include "models/rope.h"

namespace lathe {

// DeepseekV4Attention's kind, by layer_types.
enum class Dsv4Attention : uint8_t { Sliding, Csa, Hca };

struct Dsv4Config {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, max_position_embeddings = 0;
  int64_t heads = 0, head_dim = 0, rope_dim = 0;  // rope_dim: qk_rope_head_dim (the last dims)
  int64_t q_lora_rank = 0, o_groups = 0, o_lora_rank = 0;
  int64_t experts = 0, top_k = 0, inter = 0;  // n_routed_experts, num_experts_per_tok, moe_...
  float routed_scaling_factor = 1, swiglu_limit = 0;
  int64_t hc_mult = 0, hc_sinkhorn_iters = 0;
  float hc_eps = 0, rms_norm_eps = 0;
  int64_t sliding_window = 0;
  int64_t csa_rate = 0, hca_rate = 0;  // compress_rates
  int64_t index_heads = 0, index_head_dim = 0, index_topk = 0;
  bool tie_word_embeddings = false;
  std::vector<Dsv4Attention> layer_attention;
  std::vector<bool> layer_hash;         // mlp_layer_types "hash_moe"
  RopeConfig main_rope, compress_rope;  // sliding layers; CSA / HCA layers and compressors
};

// Reads config.json with DeepseekV4Config's defaults and its legacy fields (compress_ratios,
// compress_rate_csa / _hca, num_hash_layers, qk_rope_head_dim); a value lathe would compute
// differently is an error naming the file and field.
Dsv4Config read_deepseek_v4_config(const Checkpoint& ckpt);

struct Dsv4Compressor {
  Tensor wkv, wgate;  // [c * dim, hidden]: c = 2 on CSA (the Ca and Cb series), 1 on HCA
  Tensor ape;         // position_bias [rate, c * dim]
  Tensor norm;        // [dim]
};

struct Dsv4Layer {
  Tensor wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sinks;
  Dsv4Compressor compressor;  // CSA and HCA layers
  Dsv4Compressor index_compressor;
  Tensor index_wq_b, index_weights_proj;  // CSA layers: the indexer
  Tensor attn_norm, ffn_norm;
  Tensor hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
  Tensor router, correction_bias;  // correction_bias: top-k layers
  std::vector<int32_t> tid2eid;    // hash layers: [vocab, top_k] expert ids
  std::vector<GatedMlpWeights> experts;
  GatedMlpWeights shared;
};

struct Dsv4Weights {
  DType matrix_dtype = DType::F32;
  Tensor embed, final_norm, hc_head_fn, hc_head_base, hc_head_scale, lm_head;
  std::vector<Dsv4Layer> layers;
};

// Every tensor of the checkpoint, as transformers saves them (model.layers.N.attn.wq_a, ...,
// model.embed_tokens, model.hc_head.hc_fn, head) or as DeepSeek publishes them (layers.N...,
// embed, hc_head_fn, head; its multi-token-prediction layers mtp.* are not read, as
// transformers ignores them). Throws listing every missing, misshapen and unused tensor.
Dsv4Weights load_deepseek_v4_weights(const Checkpoint& ckpt, const Dsv4Config& c,
                                     std::optional<DType> matrix_dtype, bool fp8_native = true);

}  // namespace lathe
