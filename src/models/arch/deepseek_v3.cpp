// DeepseekV3ForCausalLM: transformers/models/deepseek_v3 (DeepSeek-V3, -R1, Kimi K2). The
// DeepSeek decoder (models/arch/deepseek.h: multi-head latent attention with a compressed cache,
// experts after first_k_dense_replace dense layers) whose router chooses num_experts_per_tok
// experts by sigmoid scores plus e_score_correction_bias within the topk_group best of
// n_group groups, renormalised and scaled by routed_scaling_factor, beside the shared
// experts. Rotary runs on qk_rope_head_dim dims in interleaved pairs (rope_interleave).
#include "models/arch/deepseek.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_deepseek_v3(const Checkpoint& ckpt, const ModelOptions& opts) {
  // DeepseekV3Config defaults.
  DeepseekConfig c = read_deepseek_config(ckpt, {.vocab_size = 129280,
                                                 .hidden_size = 7168,
                                                 .intermediate_size = 18432,
                                                 .num_layers = 61,
                                                 .heads = 128,
                                                 .max_position_embeddings = 4096});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.moe = read_sigmoid_moe(f, {.experts = 256,
                               .top_k = 8,
                               .inter = 2048,
                               .shared_experts = 1,
                               .groups = 8,
                               .top_groups = 4,
                               .first_dense = 3,
                               .scale = 2.5,
                               .norm_topk = true});
  c.layer_moe = read_first_dense_layers(f, c.num_layers, 3);
  check_moe_spec(ckpt, f, c.moe,
                 {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
  return build_deepseek(ckpt, std::move(c), opts);
}

}  // namespace lathe
