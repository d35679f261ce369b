// Starcoder2ForCausalLM: transformers/models/starcoder2 (configuration_starcoder2.py,
// modeling_starcoder2.py). Pre-norm blocks with LayerNorm (weight and bias), rotary
// grouped-query attention with biases (use_bias), an ungated MLP c_proj(act(c_fc(x))), and an
// optional sliding window on every layer.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct Starcoder2Config {
  LlamaFamilyConfig base;  // the fields Starcoder2Config shares with LlamaConfig
  float norm_epsilon = 1e-5f;
  bool use_bias = true;
  graph::Activation act = graph::Activation::GeluTanh;
};

// transformers Starcoder2Model / Starcoder2DecoderLayer: x + attn(ln(x)), then x + mlp(ln(x)).
class Starcoder2Model : public Decoder {
 public:
  Starcoder2Model(const Checkpoint& ckpt, Starcoder2Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    ropes_.emplace_back(cfg_.base.rope);
    const LlamaFamilyConfig& b = cfg_.base;
    const int64_t h = b.hidden_size, inter = b.intermediate_size;
    const Norm ln = final_norm_ = Norm::layer(cfg_.norm_epsilon);
    load(ckpt, opts, b, [&](Weights& w, int64_t i, const std::string& p) {
      Layer l;
      l.spec = layer_attention(b, i);
      l.attn_norm = ln.load(w, p + "input_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      l.mlp_norm = ln.load(w, p + "post_attention_layernorm.", h);
      // Starcoder2MLP: c_proj(act(c_fc(x))), an ungated MLP.
      l.mlp = load_linear_mlp(w, p + "mlp.", "c_fc", "c_proj", h, inter, cfg_.use_bias);
      layers_.push_back(std::move(l));
    });
  }

  std::vector<LayerStateSpec> layer_states() const override {
    return blocks::kv_layer_states(cfg_.base.attention, cfg_.base.layer_windows);
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    a = blocks::self_attention(g, a, l.attn, l.spec, in.attention(i), p);
    x = g.add(x, a);
    graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, blocks::gated_mlp(g, m, l.mlp, cfg_.act, p));
  }

 private:
  struct Layer {
    AttentionSpec spec;
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;  // up (c_fc) and down (c_proj) only
  };
  Starcoder2Config cfg_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_starcoder2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Starcoder2Config defaults.
  Starcoder2Config c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 49152,
                                           .hidden_size = 3072,
                                           .intermediate_size = 12288,
                                           .num_layers = 30,
                                           .heads = 24,
                                           .kv_heads = 2,
                                           .max_position_embeddings = 4096,
                                           .tie_word_embeddings = true,
                                           .hidden_act = nullptr});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.norm_epsilon = static_cast<float>(f.get_or<double>("norm_epsilon", 1e-5));
  c.use_bias = f.get_or<bool>("use_bias", true);
  c.act = read_activation(f, "hidden_act", "gelu_pytorch_tanh", c.base.architecture);
  c.base.attention.qkv_bias = c.base.attention.o_bias = c.use_bias;
  // sliding_window defaults to null (no window); when set it applies to every layer.
  c.base.layer_windows.assign(static_cast<size_t>(c.base.num_layers),
                              f.get_or<int64_t>("sliding_window", 0));
  return std::make_unique<Starcoder2Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
