// GPTJForCausalLM: transformers/models/gptj (configuration_gptj.py, modeling_gptj.py).
// One LayerNorm feeds attention and MLP in parallel (x + attn(ln(x)) + mlp(ln(x))); attention
// has no biases and rotates the first rotary_dim dims of each head as interleaved pairs
// (rotate_every_two); an ungated MLP fc_out(act(fc_in(x))); an lm_head with a bias.
#include "core/error.h"
#include "models/builder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct GPTJConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float layer_norm_eps = 1e-5f;
  bool tie_word_embeddings = false;
  ops::Activation act = ops::Activation::GeluTanh;
  AttentionSpec attention;
  RopeConfig rope;
};

class GPTJModel : public Model {
 public:
  GPTJModel(const Checkpoint& ckpt, GPTJConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), rope_(cfg_.rope) {
    Weights w(ckpt, opts.dtype);
    const int64_t h = cfg_.hidden_size;
    embed_ = w.matrix("transformer.wte.weight", {cfg_.vocab_size, h});
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
      const std::string p = cat("transformer.h.", i, ".");
      Layer l;
      l.norm = load_layer_norm(w, p + "ln_1.", h);
      l.attn = load_attention(w, p + "attn.", cfg_.attention, "out_proj");
      l.mlp = load_linear_mlp(w, p + "mlp.", "fc_in", "fc_out", h, cfg_.intermediate_size);
      layers_.push_back(std::move(l));
    }
    final_norm_ = load_layer_norm(w, "transformer.ln_f.", h);
    lm_head_ = load_lm_head(w, cfg_.tie_word_embeddings, embed_, cfg_.vocab_size, h);
    lm_head_bias_ = w.vector("lm_head.bias", {cfg_.vocab_size});
    // Causal-mask buffers older checkpoints still store (GPTJPreTrainedModel ignores them).
    w.ignore_if([](const std::string& name) {
      return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
    });
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
      // GPTJBlock: attn(ln_1(x)) + mlp(ln_1(x)) + x.
      Tensor normed = layer_norm(x, l.norm, eps);
      Tensor a =
          self_attention(ctx, normed, l.attn, cfg_.attention, cos, sin, cache.layers[i], pos0);
      parallel_residual(x, a, gated_mlp(ctx, normed, l.mlp, cfg_.act));
      record(trace, cat("layer.", i, ".out"), x);
    }
    cache.length = pos0 + n;
    Tensor normed = layer_norm(all_logits ? x : last_row(x), final_norm_, eps);
    record(trace, "final_norm", normed);
    return ops::linear(ctx, normed, lm_head_, &lm_head_bias_);
  }

 private:
  struct Layer {
    NormWeights norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  GPTJConfig cfg_;
  Rope rope_;
  Tensor embed_, lm_head_, lm_head_bias_;
  NormWeights final_norm_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_gptj(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // GPTJConfig defaults; its attribute_map lets config.json use either name.
  auto size = [&](const char* name, const char* alias, int64_t fallback) {
    return f.has(name) ? f.get<int64_t>(name) : f.get_or<int64_t>(alias, fallback);
  };
  GPTJConfig c;
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", 50400);
  c.hidden_size = size("n_embd", "hidden_size", 4096);
  c.num_layers = size("n_layer", "num_hidden_layers", 28);
  c.max_position_embeddings = size("n_positions", "max_position_embeddings", 2048);
  c.intermediate_size = f.get_or<int64_t>("n_inner", 4 * c.hidden_size);  // null: 4 * n_embd
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_epsilon", 1e-5));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  c.act = read_activation(f, "activation_function", "gelu_new", c.architecture);
  const int64_t heads = size("n_head", "num_attention_heads", 16);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"n_embd", c.hidden_size},
                  {"n_inner", c.intermediate_size},
                  {"n_layer", c.num_layers},
                  {"n_head", heads},
                  {"n_positions", c.max_position_embeddings}});
  if (c.hidden_size % heads != 0)
    fail(f.origin(), ": n_embd ", c.hidden_size, " is not a multiple of n_head ", heads);
  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = a.kv_heads = heads;
  a.head_dim = c.hidden_size / heads;
  a.rope_layout = ops::RopeLayout::Interleaved;  // rotate_every_two
  // GPTJRotaryEmbedding: fixed base 10000 over rotary_dim (null: n_embd, which transformers
  // can apply only when that is head_dim, i.e. one head).
  c.rope.head_dim = a.head_dim;
  c.rope.max_position_embeddings = c.max_position_embeddings;
  c.rope.original_max_position_embeddings = c.max_position_embeddings;
  c.rope.rot_dim = f.get_or<int64_t>("rotary_dim", c.hidden_size);
  if (c.rope.rot_dim <= 0 || c.rope.rot_dim > a.head_dim || c.rope.rot_dim % 2 != 0)
    fail(f.origin(), ": field \"rotary_dim\" is ", c.rope.rot_dim,
         "; it must be even and at most the head size ", a.head_dim);
  return std::make_unique<GPTJModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
