// BloomForCausalLM: transformers/models/bloom (configuration_bloom.py, modeling_bloom.py).
// No position embeddings but ALiBi biases in attention, a LayerNorm right after the token
// embedding (word_embeddings_layernorm), a fused query_key_value viewed per head as [q, k, v],
// a tanh-GELU MLP of 4 * hidden, and apply_residual_connection_post_layernorm choosing whether
// each residual is the block input or its LayerNorm.
#include <algorithm>

#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct BloomConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, max_position_embeddings = 0;
  float layer_norm_eps = 1e-5f;
  bool residual_post_layernorm = false;  // apply_residual_connection_post_layernorm
  bool tie_word_embeddings = true;
  AttentionSpec attention;
};

class BloomModel : public Decoder {
 public:
  BloomModel(const Checkpoint& ckpt, BloomConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), slopes_(alibi_slopes_tensor(cfg_.attention.heads)) {
    const int64_t h = cfg_.hidden_size;
    const AttentionSpec& s = cfg_.attention;
    const Norm ln = final_norm_ = Norm::layer(cfg_.layer_norm_eps);
    const std::string base = base_model_prefix(ckpt, "transformer.", "word_embeddings.weight");
    load(
        ckpt, opts, cfg_,
        [&](Weights& w, int64_t, const std::string& p) {
          Layer l;
          l.attn_norm = ln.load(w, p + "input_layernorm.", h);
          // BloomAttention._reshape: query_key_value's output viewed as (heads, 3, head_dim).
          const std::string qkv = p + "self_attention.query_key_value.";
          const FusedQkv m =
              split_fused_qkv(w, qkv + "weight", w.matrix(qkv + "weight", {3 * h, h}), s, s.heads);
          const FusedQkv b =
              split_fused_qkv(w, qkv + "bias", w.vector(qkv + "bias", {3 * h}), s, s.heads);
          l.attn.q = m.q, l.attn.k = m.k, l.attn.v = m.v;
          l.attn.q_bias = b.q, l.attn.k_bias = b.k, l.attn.v_bias = b.v;
          l.attn.o = w.matrix(p + "self_attention.dense.weight", {h, h});
          l.attn.o_bias = w.vector(p + "self_attention.dense.bias", {h});
          l.mlp_norm = ln.load(w, p + "post_attention_layernorm.", h);
          l.mlp = load_linear_mlp(w, p + "mlp.", "dense_h_to_4h", "dense_4h_to_h", h, 4 * h);
          layers_.push_back(std::move(l));
        },
        {.embed = base + "word_embeddings.weight",
         .layers = base + "h.",
         .final_norm = base + "ln_f."},
        [&](Weights& w) { embed_norm_ = ln.load(w, base + "word_embeddings_layernorm.", h); });
  }

 protected:
  // BloomModel: word_embeddings_layernorm(word_embeddings(ids)).
  graph::Value embed(graph::Builder& g, const StepInputs& in) const override {
    return blocks::norm(g, Decoder::embed(g, in), embed_norm_);
  }

  // BloomBlock: attention and MLP each add to a residual that is their input, or with
  // apply_residual_connection_post_layernorm that input's LayerNorm.
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs&) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    const bool post = cfg_.residual_post_layernorm;
    graph::Value normed = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    // BloomAttention: ALiBi, slope_h * j, added to the scaled scores.
    graph::Value a = blocks::self_attention(
        g, normed, l.attn, cfg_.attention,
        {.rope_tables = {}, .layer = i, .bias = graph::PositionBias::Alibi, .slopes = slopes_}, p);
    a = g.add(a, post ? normed : x);
    normed = g.name(blocks::norm(g, a, l.mlp_norm), p + "mlp_norm");
    // BloomMLP: dense_4h_to_h(BloomGelu(dense_h_to_4h(x))), BloomGelu the tanh approximation.
    graph::Value m = blocks::gated_mlp(g, normed, l.mlp, graph::Activation::GeluTanh, p);
    return g.add(m, post ? normed : a);
  }

 private:
  struct Layer {
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  BloomConfig cfg_;
  Tensor slopes_;
  Norm embed_norm_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_bloom(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // BloomConfig defaults; n_embed, when given, replaces hidden_size.
  BloomConfig c;
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", 250880);
  c.hidden_size = read_int_alias(f, "n_embed", "hidden_size", 64);
  c.num_layers = read_int_alias(f, "n_layer", "num_hidden_layers", 2);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_epsilon", 1e-5));
  c.residual_post_layernorm = f.get_or<bool>("apply_residual_connection_post_layernorm", false);
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", true);
  // ALiBi sets no position limit and BloomConfig has no max_position_embeddings; the length
  // BLOOM was trained at sizes lathe's default cache.
  c.max_position_embeddings = 2048;
  // pretraining_tp with slow_but_exact sums the dense layers in slices: the same product.
  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = read_int_alias(f, "n_head", "num_attention_heads", 8);
  if (a.heads <= 0 || c.hidden_size <= 0 || c.hidden_size % a.heads != 0)
    fail(f.origin(), ": hidden_size ", c.hidden_size, " is not a positive multiple of n_head ",
         a.heads);
  a.kv_heads = a.heads;
  a.head_dim = c.hidden_size / a.heads;
  a.rope = false;
  check_sizes(f, {{"vocab_size", c.vocab_size}, {"n_layer", c.num_layers}});
  return std::make_unique<BloomModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
