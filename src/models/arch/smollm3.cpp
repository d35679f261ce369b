// SmolLM3ForCausalLM: transformers/models/smollm3 (configuration_smollm3.py,
// modeling_smollm3.py). Llama with rotary skipped on some layers (no_rope_layers, by default
// every no_rope_layer_interval-th) and an optional sliding window on layer_types'
// sliding_attention layers.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_smollm3(const Checkpoint& ckpt, const ModelOptions& opts) {
  // SmolLM3Config defaults (default_theta 2e6).
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 128256,
                                                        .hidden_size = 2048,
                                                        .num_layers = 36,
                                                        .heads = 16,
                                                        .kv_heads = 4,
                                                        .max_position_embeddings = 32768,
                                                        .tie_word_embeddings = true,
                                                        .rope_theta = 2000000.0});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  const auto layers = static_cast<size_t>(c.num_layers);

  // SmolLM3Config.__post_init__: no_rope_layers[i] = 1 (rotary) unless (i + 1) is a multiple
  // of no_rope_layer_interval.
  c.layer_rope.assign(layers, true);
  if (f.has("no_rope_layers")) {
    const Json& v = f.at("no_rope_layers");
    if (!v.is_array() || v.size() != layers)
      fail(f.origin(), ": field \"no_rope_layers\" must list ", c.num_layers, " flags");
    for (size_t i = 0; i < layers; ++i) {
      if (!v[i].is_number_integer() && !v[i].is_boolean())
        fail(f.origin(), ": no_rope_layers[", i, "] is ", v[i].dump(), ", not 0 or 1");
      c.layer_rope[i] = v[i].is_boolean() ? v[i].get<bool>() : v[i].get<int64_t>() != 0;
    }
  } else {
    const int64_t interval = f.get_or<int64_t>("no_rope_layer_interval", 4);
    if (interval <= 0)
      fail(f.origin(), ": field \"no_rope_layer_interval\" is ", interval, ", must be positive");
    for (size_t i = 0; i < layers; ++i) c.layer_rope[i] = (i + 1) % interval != 0;
  }

  // SmolLM3Attention: sliding_window applies where use_sliding_window is set and the layer
  // type is sliding_attention; by default the no-rope layers are the sliding ones.
  const bool use = f.get_or<bool>("use_sliding_window", false);
  const std::optional<int64_t> window = f.get_optional<int64_t>("sliding_window");
  for (size_t i = 0; i < layers; ++i) {
    bool sliding = use && window && !c.layer_rope[i];
    if (f.has("layer_types")) {
      const Json& types = f.at("layer_types");
      if (!types.is_array() || types.size() != layers)
        fail(f.origin(), ": field \"layer_types\" must list ", c.num_layers, " layer types");
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements full_attention and sliding_attention");
      sliding = types[i] == "sliding_attention";
      // transformers masks such a layer with the window but the layer itself has none.
      if (sliding && !(use && window))
        fail(f.origin(), ": layer_types[", i,
             "] is \"sliding_attention\" but use_sliding_window / sliding_window are unset");
    }
    c.layer_windows[i] = sliding ? *window : 0;
  }
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
