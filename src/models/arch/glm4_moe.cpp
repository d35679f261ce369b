// Glm4MoeForCausalLM: transformers/models/glm4_moe (GLM-4.5, GLM-4.6). A Llama-style block
// (pre-norm RMSNorms) with q/k/v biases (attention_bias), optional per-head q/k RMSNorm
// (use_qk_norm), rotary on the first half of each head (partial_rotary_factor 0.5, rotate_half
// pairs), and after first_k_dense_replace dense layers a mixture of experts: sigmoid router
// scores chosen with e_score_correction_bias within the best groups, renormalised and scaled
// by routed_scaling_factor, plus the shared experts. The next-token-prediction layers some
// checkpoints append (num_nextn_predict_layers) are not part of the causal LM: transformers
// ignores them, and so does lathe.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_glm4_moe(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Glm4MoeConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151552,
                                                        .intermediate_size = 10944,
                                                        .num_layers = 46,
                                                        .heads = 96,
                                                        .kv_heads = 8,
                                                        .max_position_embeddings = 131072,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = f.get_or<bool>("attention_bias", false);
  if (f.get_or<bool>("use_qk_norm", false)) c.attention.qk_norm = QkNorm::RmsPerHead;
  c.rope = read_rope_config(f, c.attention.head_dim, c.max_position_embeddings, 10000.0, 0.5);
  c.moe = read_sigmoid_moe(f, {.experts = 128,
                               .top_k = 8,
                               .inter = 1408,
                               .shared_experts = 1,
                               .groups = 1,
                               .top_groups = 1,
                               .first_dense = 1,
                               .scale = 1.0,
                               .norm_topk = true});
  c.layer_moe = read_first_dense_layers(f, c.num_layers, 1);
  c.moe_names.shared = "shared_experts.";
  c.extra_layers_ignored = true;
  check_moe_spec(ckpt, f, *c.moe,
                 {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
