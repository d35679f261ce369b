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
// and a rotary schedule per layer type).
class Olmo2Model : public Decoder {
 public:
  Olmo2Model(const Checkpoint& ckpt, Olmo2Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg.base)), layer_rope_(std::move(cfg.layer_rope)) {
    if (cfg.ropes.empty()) cfg.ropes.push_back(cfg_.rope);
    for (const RopeConfig& r : cfg.ropes) ropes_.emplace_back(r);
    if (layer_rope_.empty()) layer_rope_.assign(static_cast<size_t>(cfg_.num_layers), 0);
    if (static_cast<int64_t>(layer_rope_.size()) != cfg_.num_layers)
      fail("internal: ", cfg_.architecture, ": ", layer_rope_.size(), " rotary indices for ",
           cfg_.num_layers, " layers");
    for (int r : layer_rope_)
      if (r < 0 || r >= static_cast<int>(ropes_.size()))
        fail("internal: ", cfg_.architecture, ": layer rotary index ", r, " out of range");
    const int64_t h = cfg_.hidden_size;
    const Norm rms = final_norm_ = rms_norm_of(cfg_);
    load(ckpt, opts, cfg_, [&](Weights& w, int64_t i, const std::string& p) {
      Layer l;
      l.spec = layer_attention(cfg_, i);
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      l.attn_post_norm = rms.load(w, p + "post_attention_layernorm.", h);
      l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg_.intermediate_size);
      l.mlp_post_norm = rms.load(w, p + "post_feedforward_layernorm.", h);
      layers_.push_back(std::move(l));
    });
  }

  std::vector<LayerStateSpec> layer_states() const override {
    return blocks::kv_layer_states(cfg_.attention, cfg_.layer_windows);
  }

 protected:
  // Olmo2DecoderLayer: the norms follow each branch; nothing normalises its input.
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    const auto ai = in.attention(i, static_cast<size_t>(layer_rope_[i]));
    graph::Value a = blocks::self_attention(g, x, l.attn, l.spec, ai, p);
    x = g.add(x, g.name(blocks::norm(g, a, l.attn_post_norm), p + "post_attn_norm"));
    // Olmo2MLP: down(act(gate(x)) * up(x)), act silu (the one hidden_act read accepts).
    graph::Value m = blocks::gated_mlp(g, x, l.mlp, cfg_.mlp_act, p);
    return g.add(x, g.name(blocks::norm(g, m, l.mlp_post_norm), p + "post_mlp_norm"));
  }

 private:
  struct Layer {
    AttentionSpec spec;
    Norm attn_post_norm, mlp_post_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  LlamaFamilyConfig cfg_;
  std::vector<int> layer_rope_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> build_olmo2_decoder(const Checkpoint& ckpt, Olmo2Config cfg,
                                           const ModelOptions& opts) {
  return std::make_unique<Olmo2Model>(ckpt, std::move(cfg), opts);
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
