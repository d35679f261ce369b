// Olmo2ForCausalLM: transformers/models/olmo2 (configuration_olmo2.py, modeling_olmo2.py).
// Llama's fields and pieces in a post-norm block: x + norm(attn(x)), then x + norm(mlp(x)),
// with q and k RMS-normed over the whole projection (all heads) before rotary.
#include "core/error.h"
#include "models/llama_family.h"
#include "models/registry.h"

namespace lathe {
namespace {

class Olmo2Model : public Model {
 public:
  Olmo2Model(const Checkpoint& ckpt, LlamaFamilyConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), rope_(cfg_.rope) {
    Weights w(ckpt, opts.dtype);
    const int64_t h = cfg_.hidden_size;
    embed_ = w.matrix("model.embed_tokens.weight", {cfg_.vocab_size, h});
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
      const std::string p = cat("model.layers.", i, ".");
      Layer l;
      l.attn = load_attention(w, p + "self_attn.", cfg_.attention);
      l.attn_post_norm = w.vector(p + "post_attention_layernorm.weight", {h});
      l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg_.intermediate_size, false);
      l.mlp_post_norm = w.vector(p + "post_feedforward_layernorm.weight", {h});
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector("model.norm.weight", {h});
    lm_head_ = load_lm_head(w, cfg_.tie_word_embeddings, embed_, cfg_.vocab_size, h);
    w.finish(cfg_.architecture);

    info_ = decoder_info(cfg_, w.matrix_dtype());
  }

  Tensor forward(Context& ctx, std::span<const int32_t> ids, KVCache& cache, bool all_logits,
                 const Trace* trace) const override {
    const int64_t n = static_cast<int64_t>(ids.size()), pos0 = cache.length;
    check_cache_room(cache, n);
    Tensor cos, sin;
    rope_.tables(pos0, n, &cos, &sin);
    Tensor x = ops::embedding(embed_, ids);
    record(trace, "embed", x);
    const float eps = cfg_.rms_norm_eps;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      // Olmo2DecoderLayer: the norms follow each branch; nothing normalises its input.
      Tensor a = self_attention(ctx, x, l.attn, cfg_.attention, cos, sin, cache.layers[i], pos0);
      ops::add_inplace(x, ops::rms_norm(a, l.attn_post_norm, eps));
      Tensor m = swiglu_mlp(ctx, x, l.mlp);
      ops::add_inplace(x, ops::rms_norm(m, l.mlp_post_norm, eps));
      record(trace, cat("layer.", i, ".out"), x);
    }
    cache.length = pos0 + n;
    Tensor normed = ops::rms_norm(all_logits ? x : last_row(x), final_norm_, eps);
    record(trace, "final_norm", normed);
    return ops::linear(ctx, normed, lm_head_);
  }

 private:
  struct Layer {
    Tensor attn_post_norm, mlp_post_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  LlamaFamilyConfig cfg_;
  Rope rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_olmo2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Olmo2Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 50304,
                                                        .hidden_size = 4096,
                                                        .intermediate_size = 11008,
                                                        .num_layers = 32,
                                                        .heads = 32,
                                                        .kv_heads = {},
                                                        .head_dim = {},
                                                        .max_position_embeddings = 2048,
                                                        .tie_word_embeddings = false,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.attention.qkv_bias = c.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.attention.qk_norm = QkNorm::AcrossHeads;
  c.mlp_bias = false;  // Olmo2MLP has no biases whatever the config says
  return std::make_unique<Olmo2Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
