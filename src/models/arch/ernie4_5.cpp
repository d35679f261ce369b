// Ernie4_5ForCausalLM: transformers/models/ernie4_5 (configuration_ernie4_5.py,
// modular_ernie4_5.py). Llama with interleaved rotary pairs (GLM's rotate_half), one
// use_bias switch for every projection, head_dim 128 and tied embeddings by default.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_ernie4_5(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Ernie4_5Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 103424,
                                                        .hidden_size = 1024,
                                                        .intermediate_size = 3072,
                                                        .num_layers = 18,
                                                        .heads = 16,
                                                        .kv_heads = 2,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 131072,
                                                        .tie_word_embeddings = true,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  const bool bias = f.get_or<bool>("use_bias", false);
  c.attention.qkv_bias = c.attention.o_bias = c.mlp_bias = bias;
  c.attention.rope_layout = graph::RopeLayout::Interleaved;
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
