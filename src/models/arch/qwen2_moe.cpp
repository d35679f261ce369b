// Qwen2MoeForCausalLM: transformers/models/qwen2_moe. Qwen2 attention (q/k/v biases) with a
// sparse MoE block on the layers decoder_sparse_step and mlp_only_layers choose: a softmax
// router over num_experts, top num_experts_per_tok (renormalised when norm_topk_prob), plus a
// shared expert that every token runs, scaled by sigmoid(shared_expert_gate(x)).
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_qwen2_moe(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Qwen2MoeConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151936,
                                                        .hidden_size = 2048,
                                                        .intermediate_size = 5632,
                                                        .num_layers = 24,
                                                        .heads = 16,
                                                        .kv_heads = 16,
                                                        .max_position_embeddings = 32768});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = f.get_or<bool>("qkv_bias", true);
  // Qwen2MoeConfig: with use_sliding_window, the odd-numbered layers (i + 1 odd) below
  // max_window_layers slide, unless layer_types says otherwise.
  const bool use_window = f.get_or<bool>("use_sliding_window", false);
  const int64_t window = use_window ? f.get_or<int64_t>("sliding_window", 4096) : 0;
  const int64_t max_window_layers = f.get_or<int64_t>("max_window_layers", 28);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    bool sliding = (i + 1) % 2 == 1 && i < max_window_layers;
    if (f.has("layer_types")) {
      const Json& types = f.at("layer_types");
      if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers)
        fail(f.origin(), ": field \"layer_types\" must list ", c.num_layers, " layer types");
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements full_attention and sliding_attention");
      sliding = types[i] == "sliding_attention";
    }
    c.layer_windows[static_cast<size_t>(i)] = sliding ? window : 0;
  }
  const int64_t experts = f.get_or<int64_t>("num_experts", 60);
  c.moe = MoeSpec{.experts = experts,
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 4),
                  .inter = f.get_or<int64_t>("moe_intermediate_size", 1408),
                  .norm_topk = f.get_or<bool>("norm_topk_prob", false),
                  .shared_inter = f.get_or<int64_t>("shared_expert_intermediate_size", 5632),
                  .shared_gate = true};
  c.layer_moe = read_sparse_layers(f, c.num_layers, experts);
  check_moe_spec(ckpt, f, *c.moe, {"num_experts", "num_experts_per_tok", "moe_intermediate_size"});
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
