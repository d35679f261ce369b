// Olmo2ForCausalLM: transformers/models/olmo2 (configuration_olmo2.py, modeling_olmo2.py).
// Llama's fields and pieces in a post-norm block: x + norm(attn(x)), then x + norm(mlp(x)),
// with q and k RMS-normed over the whole projection (all heads) before rotary.
#include "models/arch/olmo2.h"

#include "core/error.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

// transformers Olmo2Model / Olmo2DecoderLayer (and Olmo3's, which adds sliding-window layers
// and a rotary schedule per layer type): the norms follow each branch; nothing normalises its
// input.
class Olmo2Model : public LayerStack {
 public:
  Olmo2Model(const Checkpoint& ckpt, const Olmo2Config& cfg, const ModelOptions& opts) {
    const LlamaFamilyConfig& b = cfg.base;
    if (cfg.ropes.empty()) ropes_.emplace_back(b.rope);
    for (const RopeConfig& r : cfg.ropes) ropes_.emplace_back(r);
    if (!cfg.layer_rope.empty() && static_cast<int64_t>(cfg.layer_rope.size()) != b.num_layers)
      fail("internal: ", b.architecture, ": ", cfg.layer_rope.size(), " rotary indices for ",
           b.num_layers, " layers");
    for (int r : cfg.layer_rope)
      if (r < 0 || r >= static_cast<int>(ropes_.size()))
        fail("internal: ", b.architecture, ": layer rotary index ", r, " out of range");
    const int64_t h = b.hidden_size;
    const Norm rms = final_norm_ = rms_norm_of(b);
    load(ckpt, opts, b, [&](Weights& w, int64_t i, const std::string& p) {
      // Olmo2MLP: down(act(gate(x)) * up(x)).
      DecoderLayer l{.spec = layer_attention(b, i), .act = b.mlp_act};
      if (!cfg.layer_rope.empty()) l.rope = static_cast<size_t>(cfg.layer_rope.at(i));
      l.load_norms(w, p, rms, h,
                   {.attn_post_norm = "post_attention_layernorm.",
                    .mlp_post_norm = "post_feedforward_layernorm."});
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      l.mlp = load_gated_mlp(w, p + "mlp.", h, b.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }
};

}  // namespace

std::unique_ptr<Model> build_olmo2_decoder(const Checkpoint& ckpt, Olmo2Config cfg,
                                           const ModelOptions& opts) {
  return std::make_unique<Olmo2Model>(ckpt, cfg, opts);
}

std::unique_ptr<Model> load_olmo2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Olmo2Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 50304, .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.attention.qk_norm = QkNorm::RmsAcrossHeads;
  c.mlp_bias = false;  // Olmo2MLP has no biases whatever the config says
  return build_olmo2_decoder(ckpt, {.base = std::move(c)}, opts);
}

}  // namespace lathe
