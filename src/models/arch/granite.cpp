// GraniteForCausalLM: transformers/models/granite (configuration_granite.py,
// modeling_granite.py). Llama with four multipliers: embeddings times embedding_multiplier,
// attention scale attention_multiplier (instead of head_dim^-0.5), residual branches times
// residual_multiplier, logits divided by logits_scaling.
#include "models/arch/granite.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_granite(const Checkpoint& ckpt, const ModelOptions& opts) {
  // GraniteConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {});
  read_granite_multipliers(JsonFields(ckpt.config(), ckpt.config_path()), c);
  return build_llama_family(ckpt, c, opts);
}

void read_granite_multipliers(const JsonFields& f, LlamaFamilyConfig& c) {
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.embed_multiplier = static_cast<float>(f.get_or<double>("embedding_multiplier", 1.0));
  c.attention.scale = static_cast<float>(f.get_or<double>("attention_multiplier", 1.0));
  c.residual_multiplier = static_cast<float>(f.get_or<double>("residual_multiplier", 1.0));
  c.logits_divisor = static_cast<float>(f.get_or<double>("logits_scaling", 1.0));
}

}  // namespace lathe
