// ArceeForCausalLM: transformers/models/arcee (configuration_arcee.py, modeling_arcee.py).
// Llama whose MLP has no gate: down_proj(relu2(up_proj(x))), relu2 = relu(x)^2.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_arcee(const Checkpoint& ckpt, const ModelOptions& opts) {
  // ArceeConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.hidden_size = 2560,
                                                        .intermediate_size = 18432,
                                                        .max_position_embeddings = 4096,
                                                        .hidden_act = "relu2",
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.mlp_gated = false;
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
