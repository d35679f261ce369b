// StableLmForCausalLM: transformers/models/stablelm (configuration_stablelm.py,
// modeling_stablelm.py). LayerNorm (weight and bias) blocks, sequential or parallel
// (use_parallel_residual: x + attn(ln(x)) + mlp(ln(x)), with no post_attention_layernorm);
// grouped-query attention with optional q/k/v biases (use_qkv_bias), optional per-head q/k
// LayerNorms with a weight of their own for each head (qk_layernorm), and partial rotary
// (partial_rotary_factor 0.25 by default); a gated MLP.
#include "core/error.h"
#include "models/builder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct StableLmConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float layer_norm_eps = 1e-5f;
  bool tie_word_embeddings = false;
  bool use_parallel_residual = false;
  ops::Activation act = ops::Activation::Silu;
  AttentionSpec attention;
  RopeConfig rope;
};

class StableLmModel : public Model {
 public:
  StableLmModel(const Checkpoint& ckpt, StableLmConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), rope_(cfg_.rope) {
    Weights w(ckpt, opts.dtype);
    const int64_t h = cfg_.hidden_size;
    const AttentionSpec& s = cfg_.attention;
    embed_ = w.matrix("model.embed_tokens.weight", {cfg_.vocab_size, h});
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
      const std::string p = cat("model.layers.", i, ".");
      Layer l;
      l.attn_norm = load_layer_norm(w, p + "input_layernorm.", h);
      if (!cfg_.use_parallel_residual)
        l.mlp_norm = load_layer_norm(w, p + "post_attention_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", s);
      if (s.qk_layer_norm) {
        l.attn.q_norm = per_head_norm(w, p + "self_attn.q_layernorm.", s.heads, s.head_dim);
        l.attn.k_norm = per_head_norm(w, p + "self_attn.k_layernorm.", s.kv_heads, s.head_dim);
      }
      l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg_.intermediate_size, false);
      layers_.push_back(std::move(l));
    }
    final_norm_ = load_layer_norm(w, "model.norm.", h);
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
    const float eps = cfg_.layer_norm_eps;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      // StableLmDecoderLayer: parallel x + attn(ln(x)) + mlp(ln(x)), or sequential
      // y = x + attn(ln(x)); y + mlp(post_ln(y)).
      Tensor normed = layer_norm(x, l.attn_norm, eps);
      Tensor a =
          self_attention(ctx, normed, l.attn, cfg_.attention, cos, sin, cache.layers[i], pos0);
      if (cfg_.use_parallel_residual) {
        parallel_residual(x, a, gated_mlp(ctx, normed, l.mlp, cfg_.act));
      } else {
        ops::add_inplace(x, a);
        ops::add_inplace(x, gated_mlp(ctx, layer_norm(x, l.mlp_norm, eps), l.mlp, cfg_.act));
      }
      record(trace, cat("layer.", i, ".out"), x);
    }
    cache.length = pos0 + n;
    Tensor normed = layer_norm(all_logits ? x : last_row(x), final_norm_, eps);
    record(trace, "final_norm", normed);
    return ops::linear(ctx, normed, lm_head_);
  }

 private:
  // StableLmLayerNormPerHead: one bias-free nn.LayerNorm(head_dim) per head (norms.<h>),
  // gathered into one [heads, head_dim] weight that ops::layer_norm cycles through.
  static Tensor per_head_norm(Weights& w, const std::string& prefix, int64_t heads,
                              int64_t head_dim) {
    std::vector<Tensor> rows;
    for (int64_t hh = 0; hh < heads; ++hh)
      rows.push_back(w.vector(cat(prefix, "norms.", hh, ".weight"), {head_dim}));
    return stack_rows(rows);
  }

  struct Layer {
    NormWeights attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  StableLmConfig cfg_;
  Rope rope_;
  Tensor embed_, lm_head_;
  NormWeights final_norm_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_stablelm(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // StableLmConfig defaults.
  StableLmConfig c;
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", 50304);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 2560);
  c.intermediate_size = f.get_or<int64_t>("intermediate_size", 6912);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 32);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 4096);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_eps", 1e-5));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  c.use_parallel_residual = f.get_or<bool>("use_parallel_residual", false);
  c.act = read_activation(f, "hidden_act", "silu", c.architecture);
  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", 32);
  a.kv_heads = f.get_or<int64_t>("num_key_value_heads", 32);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", c.intermediate_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", a.heads},
                  {"num_key_value_heads", a.kv_heads},
                  {"max_position_embeddings", c.max_position_embeddings}});
  if (c.hidden_size % a.heads != 0 || a.heads % a.kv_heads != 0)
    fail(f.origin(), ": hidden_size ", c.hidden_size, ", num_attention_heads ", a.heads,
         " and num_key_value_heads ", a.kv_heads, " do not divide evenly");
  a.head_dim = c.hidden_size / a.heads;  // StableLmAttention ignores any head_dim field
  a.qkv_bias = f.get_or<bool>("use_qkv_bias", false);
  a.qk_layer_norm = f.get_or<bool>("qk_layernorm", false);
  if (a.qk_layer_norm) {
    a.qk_norm = QkNorm::PerHead;
    a.norm_eps = c.layer_norm_eps;
  }
  c.rope = read_rope_config(f, a.head_dim, c.max_position_embeddings, 10000.0, 0.25);
  return std::make_unique<StableLmModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
