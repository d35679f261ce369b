// Qwen3MoeForCausalLM: transformers/models/qwen3_moe. Qwen3 attention (per-head q/k RMSNorm)
// with a sparse MoE block on the layers decoder_sparse_step and mlp_only_layers choose: a
// softmax router over num_experts, top num_experts_per_tok, renormalised when norm_topk_prob;
// no shared expert.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_qwen3_moe(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Qwen3MoeConfig defaults (head_dim: hidden_size / heads unless given).
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151936,
                                                        .hidden_size = 2048,
                                                        .intermediate_size = 6144,
                                                        .num_layers = 24,
                                                        .kv_heads = 4,
                                                        .max_position_embeddings = 32768});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.attention.qk_norm = QkNorm::RmsPerHead;
  // Every layer slides when use_sliding_window is set.
  if (f.get_or<bool>("use_sliding_window", false))
    c.layer_windows.assign(static_cast<size_t>(c.num_layers),
                           f.get_or<int64_t>("sliding_window", 4096));
  // Published configs say num_experts; transformers 5 saves it as num_local_experts.
  const int64_t experts =
      f.get_or<int64_t>("num_experts", f.get_or<int64_t>("num_local_experts", 128));
  c.moe = MoeSpec{.experts = experts,
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 8),
                  .inter = f.get_or<int64_t>("moe_intermediate_size", 768),
                  .norm_topk = f.get_or<bool>("norm_topk_prob", false)};
  c.layer_moe = read_sparse_layers(f, c.num_layers, experts);
  check_moe_spec(ckpt, f, *c.moe, {"num_experts", "num_experts_per_tok", "moe_intermediate_size"});
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
