// ApertusForCausalLM: transformers/models/apertus (configuration_apertus.py,
// modeling_apertus.py). The Llama block with its norms named attention_layernorm and
// feedforward_layernorm, per-head q/k RMSNorms, an ungated MLP down(xielu(up(x))) whose xIELU
// activation has learned alpha_p / alpha_n per layer, and llama3 rotary scaling by default.
#include <cmath>

#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct ApertusConfig {
  LlamaFamilyConfig base;  // the fields ApertusConfig shares with LlamaConfig
  bool xielu = true;       // hidden_act "xielu" (the default); else base.mlp_act
};

// XIELUActivation's coefficients formed from its parameters as _xielu_python does:
// alpha_p = softplus(alpha_p'), alpha_n = beta + softplus(alpha_n').
struct Xielu {
  float alpha_p = 0, alpha_n = 0, beta = 0.5f, eps = -1e-6f;
};

float softplus(float x) {  // torch softplus (beta 1, threshold 20), in f32
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

Xielu load_xielu(Weights& w, const std::string& prefix) {
  Xielu a;
  // beta and eps are buffers; checkpoints that lack them get XIELUActivation's defaults.
  if (w.has(prefix + "beta")) a.beta = w.vector(prefix + "beta", {}).data<float>()[0];
  if (w.has(prefix + "eps")) a.eps = w.vector(prefix + "eps", {}).data<float>()[0];
  a.alpha_p = softplus(w.vector(prefix + "alpha_p", {1}).data<float>()[0]);
  a.alpha_n = a.beta + softplus(w.vector(prefix + "alpha_n", {1}).data<float>()[0]);
  return a;
}

// transformers ApertusModel / ApertusDecoderLayer: x + attn(norm(x)), then x + mlp(norm(x)).
class ApertusModel : public Decoder {
 public:
  ApertusModel(const Checkpoint& ckpt, ApertusConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    ropes_.emplace_back(cfg_.base.rope);
    const LlamaFamilyConfig& b = cfg_.base;
    const int64_t h = b.hidden_size;
    const Norm rms = final_norm_ = rms_norm_of(b);
    load(ckpt, opts, b, [&](Weights& w, int64_t, const std::string& p) {
      Layer l;
      l.attn_norm = rms.load(w, p + "attention_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", b.attention);
      l.mlp_norm = rms.load(w, p + "feedforward_layernorm.", h);
      l.mlp =
          load_gated_mlp(w, p + "mlp.", h, b.intermediate_size, {.bias = false, .gated = false});
      if (cfg_.xielu) l.act = load_xielu(w, p + "mlp.act_fn.");
      layers_.push_back(std::move(l));
    });
  }

 protected:
  // ApertusDecoderLayer (pre-norm, as Llama).
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    a = blocks::self_attention(g, a, l.attn, cfg_.base.attention, in.attention(i), p);
    x = g.add(x, a);
    graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, mlp(g, m, l, p));
  }

 private:
  struct Layer {
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;  // up and down only
    Xielu act;
  };

  // ApertusMLP: down_proj(act_fn(up_proj(x))).
  graph::Value mlp(graph::Builder& g, graph::Value x, const Layer& l, const std::string& p) const {
    if (!cfg_.xielu) return blocks::gated_mlp(g, x, l.mlp, cfg_.base.mlp_act, p);
    const graph::Value up = blocks::linear(g, x, l.mlp.up);
    const graph::Value h = g.xielu(up, l.act.alpha_p, l.act.alpha_n, l.act.beta, l.act.eps);
    return g.name(blocks::linear(g, h, l.mlp.down), p + "mlp_out");
  }

  ApertusConfig cfg_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_apertus(const Checkpoint& ckpt, const ModelOptions& opts) {
  // ApertusConfig defaults.
  ApertusConfig c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 131072,
                                           .intermediate_size = 14336,
                                           .max_position_embeddings = 65536,
                                           .hidden_act = nullptr,
                                           .rope_theta = 12000000.0,
                                           .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  const std::string act = f.get_or<std::string>("hidden_act", "xielu");
  c.xielu = act == "xielu";
  if (!c.xielu) c.base.mlp_act = read_activation(f, "hidden_act", "xielu", c.base.architecture);
  AttentionSpec& a = c.base.attention;
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  a.qk_norm = QkNorm::RmsPerHead;
  // ApertusConfig: with neither rope_parameters nor rope_scaling, llama3 scaling at theta 12e6.
  if (!f.has("rope_parameters") && !f.has("rope_scaling")) {
    Json cfg = f.json();
    cfg["rope_parameters"] = {{"rope_type", "llama3"},  {"rope_theta", 12000000.0},
                              {"factor", 8.0},          {"original_max_position_embeddings", 8192},
                              {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
    c.base.rope = read_rope_config(JsonFields(cfg, f.origin()), a.head_dim,
                                   c.base.max_position_embeddings, 12000000.0);
  }
  return std::make_unique<ApertusModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
