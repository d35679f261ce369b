// Qwen2ForCausalLM: transformers/models/qwen2. Llama with q/k/v biases and optional sliding
// windows on the upper layers.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_qwen2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Qwen2Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151936,
                                                        .intermediate_size = 22016,
                                                        .kv_heads = 32,
                                                        .max_position_embeddings = 32768});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = true;
  c.layer_windows = read_qwen_layer_windows(f, c.num_layers);
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
