// LlamaForCausalLM: transformers/models/llama (configuration_llama.py, modeling_llama.py).
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_llama(const Checkpoint& ckpt, const ModelOptions& opts) {
  // LlamaConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
