// Cohere2ForCausalLM: transformers/models/cohere2 (configuration_cohere2.py,
// modeling_cohere2.py). Cohere's parallel block (x + attn(ln(x)) + mlp(ln(x)) off one bias-free
// LayerNorm, interleaved rotary pairs, logits times logit_scale) without q/k norms, with
// sliding-window and full layers (layer_types, or every sliding_window_pattern-th layer full)
// and rotary only on the sliding layers.
#include "models/arch/cohere.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_cohere2(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Cohere2Config defaults (rope_theta: PreTrainedConfig's default_theta).
  CohereConfig c = read_cohere_config(ckpt, f, 10000.0);
  rotate_whole_head(c.base.rope, f.origin(), "Cohere2");  // Cohere2's apply_rotary_pos_emb
  // layer_types, else Cohere2Config's: layer i slides unless (i + 1) % sliding_window_pattern
  // is 0 (4 by default).
  c.base.layer_windows = read_layer_type_windows(
      f, c.base.num_layers, f.get_or<int64_t>("sliding_window_pattern", 4), 4096);
  // Cohere2Attention rotates q and k on the sliding layers only.
  c.base.layer_rope.clear();
  for (int64_t w : c.base.layer_windows) c.base.layer_rope.push_back(w > 0);
  return build_cohere_decoder(ckpt, c, opts);
}

}  // namespace lathe
