// Exaone4ForCausalLM: transformers/models/exaone4 (configuration_exaone4.py,
// modeling_exaone4.py). A post-norm block (x + norm(attn(x)), then x + norm(mlp(x)), as
// Olmo2) with per-head q/k RMSNorms, sliding-window and full layers (layer_types, or every
// sliding_window_pattern-th layer full), and rotary only on the sliding layers when a
// sliding_window is set (on every layer when it is null).
#include "core/error.h"
#include "models/arch/olmo2.h"
#include "models/registry.h"

namespace lathe {
std::unique_ptr<Model> load_exaone4(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Exaone4Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 102400,
                                                        .intermediate_size = 16384,
                                                        .kv_heads = 32,
                                                        .hidden_act = nullptr,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.mlp_act = read_activation(f, "hidden_act", "silu", c.architecture);
  c.attention.qk_norm = QkNorm::RmsPerHead;
  // sliding_window defaults to 4096; null turns windows off and puts rotary on every layer.
  const bool windowed = !f.json().contains("sliding_window") || f.has("sliding_window");
  const int64_t window = f.get_or<int64_t>("sliding_window", 4096);
  if (windowed && window <= 0)
    fail(f.origin(), ": field \"sliding_window\" is ", window, "; it must be positive or null");
  // layer_types, else Exaone4Config's: layer i slides unless (i + 1) % pattern == 0.
  std::vector<bool> sliding(static_cast<size_t>(c.num_layers));
  if (f.has("layer_types")) {
    const Json& types = f.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers)
      fail(f.origin(), ": field \"layer_types\" must list ", c.num_layers, " layer types");
    for (int64_t i = 0; i < c.num_layers; ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements full_attention and sliding_attention");
      sliding[i] = types[i] == "sliding_attention";
    }
  } else {
    if (!windowed)  // transformers computes the pattern modulo 0 here and fails
      fail(f.origin(), ": field \"sliding_window\" is null and there is no \"layer_types\"");
    const Json pattern = f.json().value("sliding_window_pattern", Json(4));
    if (!pattern.is_number_integer() || pattern.get<int64_t>() <= 0)
      fail(f.origin(), ": field \"sliding_window_pattern\" is ", pattern.dump(),
           "; lathe implements a positive integer (or an explicit \"layer_types\")");
    for (int64_t i = 0; i < c.num_layers; ++i) sliding[i] = (i + 1) % pattern.get<int64_t>() != 0;
  }
  c.layer_rope.assign(static_cast<size_t>(c.num_layers), true);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (sliding[i] && !windowed)
      fail(f.origin(), ": layer ", i, " is sliding_attention but field \"sliding_window\" is null");
    c.layer_windows[i] = sliding[i] ? window : 0;
    // Exaone4Attention: rotary when sliding_window is None or the layer slides.
    c.layer_rope[i] = !windowed || sliding[i];
  }
  // Exaone4DecoderLayer is Olmo2's post-norm block (the norms follow each branch).
  return build_olmo2_decoder(ckpt, {.base = std::move(c)}, opts);
}

}  // namespace lathe
