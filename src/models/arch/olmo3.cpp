// Olmo3ForCausalLM: transformers/models/olmo3 (configuration_olmo3.py, modeling_olmo3.py).
// Olmo2's post-norm decoder (q and k RMS-normed across heads) with sliding-window and full
// layers (layer_types; by default every fourth layer is full) and a rotary schedule per layer
// type.
#include "core/error.h"
#include "models/arch/olmo2.h"
#include "models/registry.h"

namespace lathe {
namespace {

// Olmo3Config.convert_rope_params_to_dict: rope_parameters is keyed by layer type (by default
// both "default"); a legacy rope_scaling updates the full layers' entry; rope_theta gives the
// full layers' theta, and the sliding layers keep default_theta (500000) unless their entry
// names one: the config pops rope_theta for the full layers before it looks for the sliding
// layers' one.
std::vector<RopeConfig> read_olmo3_ropes(const JsonFields& f, int64_t head_dim,
                                         int64_t max_position_embeddings) {
  constexpr double kDefaultTheta = 500000.0;
  Json full = {{"rope_type", "default"}}, sliding = {{"rope_type", "default"}};
  if (f.has("rope_parameters")) {
    const Json& rp = f.at("rope_parameters");
    if (!rp.is_object() || !(rp.contains("full_attention") || rp.contains("sliding_attention")))
      fail(f.origin(),
           ": field \"rope_parameters\" must be keyed by layer type "
           "(full_attention, sliding_attention)");
    if (rp.contains("full_attention") && !rp["full_attention"].is_null())
      full = rp["full_attention"];
    if (rp.contains("sliding_attention") && !rp["sliding_attention"].is_null())
      sliding = rp["sliding_attention"];
  }
  if (!full.is_object() || !sliding.is_object())
    fail(f.origin(), ": field \"rope_parameters\" entries must be objects");
  if (f.has("rope_scaling")) {
    if (!f.at("rope_scaling").is_object())
      fail(f.origin(), ": field \"rope_scaling\" must be an object");
    full.update(f.at("rope_scaling"));
  }
  if (!full.contains("rope_theta"))
    full["rope_theta"] = f.get_or<double>("rope_theta", kDefaultTheta);
  if (!sliding.contains("rope_theta")) sliding["rope_theta"] = kDefaultTheta;
  std::vector<RopeConfig> ropes;
  for (auto [name, params] :
       {std::pair{"full_attention", &full}, {"sliding_attention", &sliding}}) {
    // standardize_rope_params copies a top-level partial_rotary_factor into each entry.
    if (f.has("partial_rotary_factor") && !params->contains("partial_rotary_factor"))
      (*params)["partial_rotary_factor"] = f.at("partial_rotary_factor");
    const Json cfg = {{"rope_parameters", *params}};
    const JsonFields p(cfg, f.origin() + ": rope_parameters." + name);
    RopeConfig r = read_rope_config(p, head_dim, max_position_embeddings);
    rotate_whole_head(r, p.origin(), "Olmo3");  // Olmo3's apply_rotary_pos_emb
    ropes.push_back(r);
  }
  return ropes;
}

}  // namespace

std::unique_ptr<Model> load_olmo3(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Olmo3Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(
      ckpt, {.vocab_size = 50304, .rope_theta = 500000.0, .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.attention.qk_norm = QkNorm::RmsAcrossHeads;  // Olmo3Attention's q_norm / k_norm
  c.mlp_bias = false;                            // Olmo3MLP has no biases
  // layer_types, else Olmo3Config's: layer i slides unless (i + 1) % 4 == 0.
  c.layer_windows = read_layer_type_windows(f, c.num_layers, 4, 4096);
  Olmo2Config o{.base = std::move(c)};
  o.ropes = read_olmo3_ropes(f, o.base.attention.head_dim, o.base.max_position_embeddings);
  for (int64_t w : o.base.layer_windows) o.layer_rope.push_back(w > 0 ? 1 : 0);
  return build_olmo2_decoder(ckpt, std::move(o), opts);
}

}  // namespace lathe
