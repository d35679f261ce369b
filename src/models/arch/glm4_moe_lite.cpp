// Glm4MoeLiteForCausalLM: transformers/models/glm4_moe_lite (GLM-4.7-Flash). The DeepSeek
// decoder (models/arch/deepseek.h: multi-head latent attention, DeepseekV3Attention itself in
// transformers' modular file) with Glm4Moe's experts: sigmoid scores chosen with
// e_score_correction_bias within the best groups, renormalised and scaled, and shared
// experts; mlp_layer_types says which layers are dense (by default the first).
#include "core/error.h"
#include "models/arch/deepseek.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_glm4_moe_lite(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Glm4MoeLiteConfig defaults.
  DeepseekConfig c = read_deepseek_config(ckpt, {.vocab_size = 154880,
                                                 .hidden_size = 2048,
                                                 .intermediate_size = 10240,
                                                 .num_layers = 47,
                                                 .heads = 20,
                                                 .max_position_embeddings = 202752});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.moe = read_sigmoid_moe(f, {.experts = 64,
                               .top_k = 4,
                               .inter = 1536,
                               .shared_experts = 1,
                               .groups = 1,
                               .top_groups = 1,
                               .first_dense = 1,
                               .scale = 1.8,
                               .norm_topk = true});
  c.layer_moe.assign(static_cast<size_t>(c.num_layers), true);
  c.layer_moe[0] = false;
  if (f.has("mlp_layer_types")) {
    const Json& types = f.at("mlp_layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers)
      fail(f.origin(), ": field \"mlp_layer_types\" must list ", c.num_layers, " layer types");
    for (int64_t i = 0; i < c.num_layers; ++i) {
      if (types[i] != "dense" && types[i] != "sparse")
        fail(f.origin(), ": mlp_layer_types[", i, "] is ", types[i].dump(),
             "; Glm4MoeLite has dense and sparse layers");
      c.layer_moe[static_cast<size_t>(i)] = types[i] == "sparse";
    }
  }
  check_moe_spec(ckpt, f, c.moe,
                 {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
  return build_deepseek(ckpt, std::move(c), opts);
}

}  // namespace lathe
