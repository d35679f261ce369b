// GemmaForCausalLM: transformers/models/gemma (configuration_gemma.py, modeling_gemma.py).
// The Llama block with GemmaRMSNorm (scales by 1 + weight), embeddings multiplied by
// sqrt(hidden_size) (GemmaTextScaledWordEmbedding) and a tanh-GELU gated MLP.
#include <cmath>

#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_gemma(const Checkpoint& ckpt, const ModelOptions& opts) {
  // GemmaConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 256000,
                                                        .hidden_size = 3072,
                                                        .intermediate_size = 24576,
                                                        .num_layers = 28,
                                                        .heads = 16,
                                                        .kv_heads = 16,
                                                        .head_dim = 256,
                                                        .max_position_embeddings = 8192,
                                                        .tie_word_embeddings = true,
                                                        .hidden_act = nullptr});
  JsonFields f(ckpt.config(), ckpt.config_path());
  // GemmaConfig.__post_init__ turns the legacy "gelu" into "gelu_pytorch_tanh".
  const std::string act = f.get_or<std::string>("hidden_act", "gelu_pytorch_tanh");
  if (act != "gelu" && act != "gelu_pytorch_tanh")
    fail(f.origin(), ": field \"hidden_act\" is \"", act, "\"; ", c.architecture,
         " in lathe implements \"gelu_pytorch_tanh\"");
  c.mlp_act = graph::Activation::GeluTanh;
  if (f.get_or<bool>("use_bidirectional_attention", false))
    fail(f.origin(), ": field \"use_bidirectional_attention\" is true; lathe implements causal ",
         c.architecture);
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.norm_offset = 1.0f;
  // The scale is a float32 buffer: sqrt in double, rounded once.
  c.embed_multiplier = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
