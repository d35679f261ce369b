// Cohere2ForCausalLM: transformers/models/cohere2 (configuration_cohere2.py,
// modeling_cohere2.py). Cohere's parallel block (x + attn(ln(x)) + mlp(ln(x)) off one bias-free
// LayerNorm, interleaved rotary pairs, logits times logit_scale) without q/k norms, with
// sliding-window and full layers (layer_types, or every sliding_window_pattern-th layer full)
// and rotary only on the sliding layers.
#include "models/arch/cohere.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_cohere2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Cohere2Config defaults (rope_theta: PreTrainedConfig's default_theta).
  CohereConfig c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 256000,
                                           .hidden_size = 8192,
                                           .intermediate_size = 22528,
                                           .num_layers = 40,
                                           .heads = 64,
                                           .max_position_embeddings = 8192,
                                           .tie_word_embeddings = true,
                                           .hidden_act = nullptr});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.act = read_activation(f, "hidden_act", "silu", c.base.architecture);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_eps", 1e-5));
  c.logit_scale = static_cast<float>(f.get_or<double>("logit_scale", 0.0625));
  AttentionSpec& a = c.base.attention;
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  a.rope_layout = graph::RopeLayout::Interleaved;         // Cohere2's rotate_half pairs neighbours
  rotate_whole_head(c.base.rope, f.origin(), "Cohere2");  // Cohere2's apply_rotary_pos_emb
  // layer_types, else Cohere2Config's: layer i slides unless (i + 1) % sliding_window_pattern
  // is 0 (4 by default).
  c.base.layer_windows = read_layer_type_windows(
      f, c.base.num_layers, f.get_or<int64_t>("sliding_window_pattern", 4), 4096);
  // Cohere2Attention rotates q and k on the sliding layers only.
  c.base.layer_rope.clear();
  for (int64_t w : c.base.layer_windows) c.base.layer_rope.push_back(w > 0);
  return build_cohere_decoder(ckpt, std::move(c), opts);
}

}  // namespace lathe
