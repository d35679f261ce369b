// OlmoForCausalLM: transformers/models/olmo (configuration_olmo.py, modeling_olmo.py).
// The Llama block with LayerNorms that have no parameters (OlmoLayerNorm, eps 1e-5) and
// q, k and v optionally clamped to [-clip_qkv, clip_qkv] straight after their projections.
#include "core/error.h"
#include "models/llama_family.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct OlmoConfig {
  LlamaFamilyConfig base;  // the fields OlmoConfig shares with LlamaConfig
  ops::Activation act = ops::Activation::Silu;
};

// OlmoLayerNorm: F.layer_norm without weight or bias, at a fixed eps.
constexpr float kOlmoNormEps = 1e-5f;
Tensor olmo_norm(const Tensor& x) {
  return ops::layer_norm(x, nullptr, nullptr, kOlmoNormEps);
}

class OlmoModel : public Model {
 public:
  OlmoModel(const Checkpoint& ckpt, OlmoConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), rope_(cfg_.base.rope) {
    const LlamaFamilyConfig& b = cfg_.base;
    Weights w(ckpt, opts.dtype);
    const int64_t h = b.hidden_size;
    embed_ = w.matrix("model.embed_tokens.weight", {b.vocab_size, h});
    for (int64_t i = 0; i < b.num_layers; ++i) {
      const std::string p = cat("model.layers.", i, ".");
      Layer l;
      l.attn = load_attention(w, p + "self_attn.", b.attention);
      l.mlp = load_gated_mlp(w, p + "mlp.", h, b.intermediate_size, false);
      layers_.push_back(std::move(l));
    }
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
      // OlmoDecoderLayer (pre-norm, as Llama).
      ops::add_inplace(x, self_attention(ctx, olmo_norm(x), l.attn, cfg_.base.attention, cos, sin,
                                         cache.layers[i], pos0));
      ops::add_inplace(x, gated_mlp(ctx, olmo_norm(x), l.mlp, cfg_.act));
      record(trace, cat("layer.", i, ".out"), x);
    }
    cache.length = pos0 + n;
    Tensor normed = olmo_norm(all_logits ? x : last_row(x));
    record(trace, "final_norm", normed);
    return ops::linear(ctx, normed, lm_head_);
  }

 private:
  struct Layer {
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  OlmoConfig cfg_;
  Rope rope_;
  Tensor embed_, lm_head_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_olmo(const Checkpoint& ckpt, const ModelOptions& opts) {
  // OlmoConfig defaults.
  OlmoConfig c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 50304,
                                           .hidden_size = 4096,
                                           .intermediate_size = 11008,
                                           .num_layers = 32,
                                           .heads = 32,
                                           .kv_heads = {},
                                           .head_dim = {},
                                           .max_position_embeddings = 2048,
                                           .tie_word_embeddings = false,
                                           .hidden_act = nullptr});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.act = read_activation(f, "hidden_act", "silu", c.base.architecture);
  AttentionSpec& a = c.base.attention;
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  // clip_qkv: null (the default) means no clamping.
  if (f.has("clip_qkv")) {
    a.clip_qkv = static_cast<float>(f.get<double>("clip_qkv"));
    if (!(a.clip_qkv > 0))
      fail(f.origin(), ": field \"clip_qkv\" is ", a.clip_qkv, "; it must be positive or null");
  }
  return std::make_unique<OlmoModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
