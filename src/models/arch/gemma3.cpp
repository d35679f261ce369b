// Gemma3ForCausalLM (text): transformers/models/gemma3 (Gemma3TextConfig in
// configuration_gemma3.py, Gemma3TextModel in modeling_gemma3.py). The Gemma2 decoder with
// per-head q/k RMSNorm (1 + weight), five sliding layers to one full layer by default, no
// soft-capping by default, and separate rotary for sliding layers (rope_local_base_freq, 1e4)
// and full layers (rope_theta 1e6 with rope_scaling).
#include "core/error.h"
#include "models/arch/gemma2.h"
#include "models/arch/gemma_common.h"
#include "models/registry.h"

namespace lathe {
std::unique_ptr<Model> load_gemma3(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Gemma3TextConfig defaults.
  Gemma2Config c =
      read_gemma2_config(ckpt, {.vocab_size = 262208,
                                .hidden_size = 2304,
                                .intermediate_size = 9216,
                                .num_layers = 26,
                                .heads = 8,
                                .kv_heads = 4,
                                .max_position_embeddings = 131072,
                                .final_softcap = 0,
                                .attn_softcap = 0,
                                .sliding_pattern = f.get_or<int64_t>("sliding_window_pattern", 6)});
  // Gemma3TextConfig keeps attn_logit_softcapping, but Gemma3Attention never passes it to the
  // attention function: transformers computes without it, and so does lathe.
  c.attention.softcap = 0;
  c.attention.qk_norm = QkNorm::RmsPerHead;
  c.attention.norm_offset = 1.0f;  // Gemma3RMSNorm
  c.ropes = read_gemma3_ropes(f, c.attention.head_dim, c.max_position_embeddings);
  c.layer_rope.clear();
  for (int64_t w : c.layer_windows) c.layer_rope.push_back(w > 0 ? 1 : 0);
  return build_gemma2_decoder(ckpt, std::move(c), opts);
}

}  // namespace lathe
