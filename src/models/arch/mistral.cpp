// MistralForCausalLM: transformers/models/mistral. Llama with a sliding window on every layer.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_mistral(const Checkpoint& ckpt, const ModelOptions& opts) {
  // MistralConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(
      ckpt, {.intermediate_size = 14336, .kv_heads = 8, .max_position_embeddings = 4096 * 32});
  JsonFields f(ckpt.config(), ckpt.config_path());
  // sliding_window defaults to 4096 and may be null (no window).
  const int64_t window =
      f.json().contains("sliding_window") ? f.get_or<int64_t>("sliding_window", 0) : 4096;
  c.layer_windows.assign(static_cast<size_t>(c.num_layers), window);
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
