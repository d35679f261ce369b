// Qwen3ForCausalLM: transformers/models/qwen3. Qwen2 without q/k/v biases (unless
// attention_bias), with RMSNorm of q and k per head before rotary, and head_dim default 128.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_qwen3(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Qwen3Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151936,
                                                        .intermediate_size = 22016,
                                                        .kv_heads = 32,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 32768});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.attention.qk_norm = QkNorm::RmsPerHead;
  c.layer_windows = read_qwen_layer_windows(f, c.num_layers);
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
