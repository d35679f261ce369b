// StableLmForCausalLM: transformers/models/stablelm (configuration_stablelm.py,
// modeling_stablelm.py). LayerNorm (weight and bias) blocks, sequential or parallel
// (use_parallel_residual: x + attn(ln(x)) + mlp(ln(x)), with no post_attention_layernorm);
// grouped-query attention with optional q/k/v biases (use_qkv_bias), optional per-head q/k
// LayerNorms with a weight of their own for each head (qk_layernorm), and partial rotary
// (partial_rotary_factor 0.25 by default); a gated MLP.
#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct StableLmConfig : DecoderConfig {
  float layer_norm_eps = 1e-5f;
  bool use_parallel_residual = false;
  graph::Activation act = graph::Activation::Silu;
};

// transformers StableLmModel / StableLmDecoderLayer.
class StableLmModel : public Decoder {
 public:
  StableLmModel(const Checkpoint& ckpt, StableLmConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    ropes_.emplace_back(cfg_.rope);
    const int64_t h = cfg_.hidden_size;
    const AttentionSpec& s = cfg_.attention;
    const Norm ln = final_norm_ = Norm::layer(cfg_.layer_norm_eps);
    load(ckpt, opts, cfg_, [&](Weights& w, int64_t, const std::string& p) {
      Layer l;
      l.attn_norm = ln.load(w, p + "input_layernorm.", h);
      if (!cfg_.use_parallel_residual) l.mlp_norm = ln.load(w, p + "post_attention_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", s);
      if (s.qk_norm == QkNorm::LayerPerHead) {
        l.attn.q_norm = per_head_norm(w, p + "self_attn.q_layernorm.", s.heads, s.head_dim);
        l.attn.k_norm = per_head_norm(w, p + "self_attn.k_layernorm.", s.kv_heads, s.head_dim);
      }
      l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg_.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }

 protected:
  // StableLmDecoderLayer: parallel x + attn(ln(x)) + mlp(ln(x)) (added as x + (attn + mlp)),
  // or sequential y = x + attn(ln(x)); y + mlp(post_ln(y)).
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    const graph::Value normed = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    const graph::Value a =
        blocks::self_attention(g, normed, l.attn, cfg_.attention, in.attention(i), p);
    if (cfg_.use_parallel_residual)
      return g.add(x, g.add(a, blocks::gated_mlp(g, normed, l.mlp, cfg_.act, p)));
    x = g.add(x, a);
    const graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, blocks::gated_mlp(g, m, l.mlp, cfg_.act, p));
  }

 private:
  // StableLmLayerNormPerHead: one bias-free nn.LayerNorm(head_dim) per head (norms.<h>),
  // gathered into one [heads, head_dim] weight that the layer_norm op cycles through.
  static Tensor per_head_norm(Weights& w, const std::string& prefix, int64_t heads,
                              int64_t head_dim) {
    std::vector<Tensor> rows;
    for (int64_t hh = 0; hh < heads; ++hh)
      rows.push_back(w.vector(cat(prefix, "norms.", hh, ".weight"), {head_dim}));
    return stack_rows(rows);
  }

  struct Layer {
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  StableLmConfig cfg_;
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
  if (f.get_or<bool>("qk_layernorm", false)) {
    a.qk_norm = QkNorm::LayerPerHead;
    a.norm_eps = c.layer_norm_eps;
  }
  c.rope = read_rope_config(f, a.head_dim, c.max_position_embeddings, 10000.0, 0.25);
  return std::make_unique<StableLmModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
