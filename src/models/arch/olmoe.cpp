// OlmoeForCausalLM: transformers/models/olmoe. Llama with RMSNorm of q and k over the whole
// projection (then clip_qkv, when set) and a sparse MoE block on every layer: a softmax router
// over num_experts, top num_experts_per_tok, renormalised when norm_topk_prob.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_olmoe(const Checkpoint& ckpt, const ModelOptions& opts) {
  // OlmoeConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 50304,
                                                        .hidden_size = 2048,
                                                        .intermediate_size = 2048,
                                                        .num_layers = 16,
                                                        .heads = 16,
                                                        .max_position_embeddings = 4096,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.attention.qk_norm = QkNorm::RmsAcrossHeads;
  c.attention.clip_qkv = static_cast<float>(f.get_or<double>("clip_qkv", 0.0));
  c.attention.clip_after_norm = true;
  const int64_t experts =
      f.get_or<int64_t>("num_experts", f.get_or<int64_t>("num_local_experts", 64));
  c.moe = MoeSpec{.experts = experts,
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 8),
                  .inter = c.intermediate_size,
                  .norm_topk = f.get_or<bool>("norm_topk_prob", false)};
  c.layer_moe.assign(static_cast<size_t>(c.num_layers), true);
  check_moe_spec(ckpt, f, *c.moe, {"num_experts", "num_experts_per_tok", "intermediate_size"});
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
