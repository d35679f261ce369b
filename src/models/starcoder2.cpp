// Starcoder2ForCausalLM: transformers/models/starcoder2 (configuration_starcoder2.py,
// modeling_starcoder2.py). Pre-norm blocks with LayerNorm (weight and bias), rotary
// grouped-query attention with biases (use_bias), an ungated MLP c_proj(act(c_fc(x))), and an
// optional sliding window on every layer.
#include "core/error.h"
#include "models/llama_family.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct Starcoder2Config {
  LlamaFamilyConfig base;  // the fields Starcoder2Config shares with LlamaConfig
  float norm_epsilon = 1e-5f;
  bool use_bias = true;
  ops::Activation act = ops::Activation::GeluTanh;
};

class Starcoder2Model : public Model {
 public:
  Starcoder2Model(const Checkpoint& ckpt, Starcoder2Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), rope_(cfg_.base.rope) {
    const LlamaFamilyConfig& b = cfg_.base;
    Weights w(ckpt, opts.dtype);
    const int64_t h = b.hidden_size, inter = b.intermediate_size;
    embed_ = w.matrix("model.embed_tokens.weight", {b.vocab_size, h});
    for (int64_t i = 0; i < b.num_layers; ++i) {
      const std::string p = cat("model.layers.", i, ".");
      Layer l;
      l.spec = b.attention;
      l.spec.window = b.layer_windows.at(i);
      l.attn_norm = load_layer_norm(w, p + "input_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      l.mlp_norm = load_layer_norm(w, p + "post_attention_layernorm.", h);
      l.fc = w.matrix(p + "mlp.c_fc.weight", {inter, h});
      l.proj = w.matrix(p + "mlp.c_proj.weight", {h, inter});
      if (cfg_.use_bias) {
        l.fc_bias = w.vector(p + "mlp.c_fc.bias", {inter});
        l.proj_bias = w.vector(p + "mlp.c_proj.bias", {h});
      }
      layers_.push_back(std::move(l));
    }
    final_norm_ = load_layer_norm(w, "model.norm.", h);
    lm_head_ = load_lm_head(w, b.tie_word_embeddings, embed_, b.vocab_size, h);
    w.finish(b.architecture);

    info_ = decoder_info(b, w.matrix_dtype());
  }

  Tensor forward(Context& ctx, std::span<const int32_t> ids, KVCache& cache, bool all_logits,
                 const Trace* trace) const override {
    const int64_t n = static_cast<int64_t>(ids.size()), pos0 = cache.length;
    check_cache_room(cache, n);
    Tensor cos, sin;
    rope_.tables(pos0, n, &cos, &sin);
    Tensor x = ops::embedding(embed_, ids);
    record(trace, "embed", x);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      // Starcoder2DecoderLayer: x + attn(ln(x)), then x + mlp(ln(x)).
      ops::add_inplace(x, self_attention(ctx, norm(x, l.attn_norm), l.attn, l.spec, cos, sin,
                                         cache.layers[i], pos0));
      // Starcoder2MLP: c_proj(act(c_fc(x))).
      Tensor hid = ops::linear(ctx, norm(x, l.mlp_norm), l.fc, bias(l.fc_bias));
      ops::add_inplace(x,
                       ops::linear(ctx, ops::activation(cfg_.act, hid), l.proj, bias(l.proj_bias)));
      record(trace, cat("layer.", i, ".out"), x);
    }
    cache.length = pos0 + n;
    Tensor normed = norm(all_logits ? x : last_row(x), final_norm_);
    record(trace, "final_norm", normed);
    return ops::linear(ctx, normed, lm_head_);
  }

 private:
  Tensor norm(const Tensor& x, const NormWeights& w) const {
    return layer_norm(x, w, cfg_.norm_epsilon);
  }
  static const Tensor* bias(const Tensor& t) { return t.defined() ? &t : nullptr; }

  struct Layer {
    AttentionSpec spec;
    NormWeights attn_norm, mlp_norm;
    AttentionWeights attn;
    Tensor fc, fc_bias, proj, proj_bias;
  };
  Starcoder2Config cfg_;
  Rope rope_;
  Tensor embed_, lm_head_;
  NormWeights final_norm_;
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
                                           .head_dim = {},
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
