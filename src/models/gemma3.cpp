// Gemma3ForCausalLM (text): transformers/models/gemma3 (Gemma3TextConfig in
// configuration_gemma3.py, Gemma3TextModel in modeling_gemma3.py). The Gemma2 decoder with
// per-head q/k RMSNorm (1 + weight), five sliding layers to one full layer by default, no
// soft-capping by default, and separate rotary for sliding layers (rope_local_base_freq, 1e4)
// and full layers (rope_theta 1e6 with rope_scaling).
#include "core/error.h"
#include "models/gemma2.h"
#include "models/registry.h"

namespace lathe {
namespace {

// Gemma3TextConfig.convert_rope_params_to_dict: rope_parameters is keyed by layer type; the
// legacy fields give full layers rope_theta and rope_scaling, sliding layers
// rope_local_base_freq.
std::vector<RopeConfig> read_gemma3_ropes(const JsonFields& f, int64_t head_dim,
                                          int64_t max_position_embeddings) {
  Json full = {{"rope_type", "default"}}, local = {{"rope_type", "default"}};
  if (f.has("rope_parameters")) {
    const Json& rp = f.at("rope_parameters");
    if (!rp.is_object() || !(rp.contains("full_attention") || rp.contains("sliding_attention")))
      fail(f.origin(),
           ": field \"rope_parameters\" must be keyed by layer type "
           "(full_attention, sliding_attention)");
    if (rp.contains("full_attention") && !rp["full_attention"].is_null())
      full = rp["full_attention"];
    if (rp.contains("sliding_attention") && !rp["sliding_attention"].is_null())
      local = rp["sliding_attention"];
  } else if (f.has("rope_scaling")) {
    if (!f.at("rope_scaling").is_object())
      fail(f.origin(), ": field \"rope_scaling\" must be an object");
    full.update(f.at("rope_scaling"));
  }
  if (!full.is_object() || !local.is_object())
    fail(f.origin(), ": field \"rope_parameters\" entries must be objects");
  if (!full.contains("rope_theta")) full["rope_theta"] = f.get_or<double>("rope_theta", 1e6);
  if (!local.contains("rope_theta"))
    local["rope_theta"] = f.get_or<double>("rope_local_base_freq", 1e4);
  std::vector<RopeConfig> ropes;
  for (auto [name, params] : {std::pair{"full_attention", &full}, {"sliding_attention", &local}}) {
    const Json cfg = {{"rope_parameters", *params}};
    ropes.push_back(read_rope_config(JsonFields(cfg, f.origin() + ": rope_parameters." + name),
                                     head_dim, max_position_embeddings));
  }
  return ropes;
}

}  // namespace

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
