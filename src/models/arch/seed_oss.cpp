// SeedOssForCausalLM: transformers/models/seed_oss (configuration_seed_oss.py,
// modular_seed_oss.py). Llama with q/k/v biases (attention_bias, default on) separate from
// the output projection's (attention_out_bias, default off), and head_dim default 128.
// Its dropouts do nothing at inference.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_seed_oss(const Checkpoint& ckpt, const ModelOptions& opts) {
  // SeedOssConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 155136,
                                                        .intermediate_size = 27648,
                                                        .num_layers = 64,
                                                        .heads = 80,
                                                        .kv_heads = 8,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 524288});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = f.get_or<bool>("attention_bias", true);
  c.attention.o_bias = f.get_or<bool>("attention_out_bias", false);
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
