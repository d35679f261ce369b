// GPTNeoXForCausalLM: transformers/models/gpt_neox (configuration_gpt_neox.py,
// modeling_gpt_neox.py). LayerNorm (weight and bias) blocks whose attention and MLP run either
// in parallel off the same input (use_parallel_residual, each with its own norm) or in
// sequence; a fused query_key_value laid out per head; partial rotary (rotary_pct) on the
// first dims of each head; an ungated MLP with biases.
#include "core/error.h"
#include "models/builder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct GPTNeoXConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  float layer_norm_eps = 1e-5f;
  bool tie_word_embeddings = false;
  bool use_parallel_residual = true;
  bool attention_bias = true;
  ops::Activation act = ops::Activation::Gelu;
  AttentionSpec attention;
  RopeConfig rope;
};

class GPTNeoXModel : public Model {
 public:
  GPTNeoXModel(const Checkpoint& ckpt, GPTNeoXConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), rope_(cfg_.rope) {
    Weights w(ckpt, opts.dtype);
    const int64_t h = cfg_.hidden_size, inter = cfg_.intermediate_size;
    embed_ = w.matrix("gpt_neox.embed_in.weight", {cfg_.vocab_size, h});
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
      const std::string p = cat("gpt_neox.layers.", i, ".");
      Layer l;
      l.attn_norm = load_layer_norm(w, p + "input_layernorm.", h);
      l.mlp_norm = load_layer_norm(w, p + "post_attention_layernorm.", h);
      // GPTNeoXAttention views query_key_value's output as [heads, 3 * head_size] and chunks
      // each head into q, k, v: rows are [q_0; k_0; v_0; q_1; ...], one group per head.
      const AttentionSpec& s = cfg_.attention;
      FusedQkv qkv =
          split_fused_qkv(w.matrix(p + "attention.query_key_value.weight", {3 * h, h}), s, s.heads);
      l.attn.q = std::move(qkv.q);
      l.attn.k = std::move(qkv.k);
      l.attn.v = std::move(qkv.v);
      l.attn.o = w.matrix(p + "attention.dense.weight", {h, h});
      if (cfg_.attention_bias) {
        FusedQkv b =
            split_fused_qkv(w.vector(p + "attention.query_key_value.bias", {3 * h}), s, s.heads);
        l.attn.q_bias = std::move(b.q);
        l.attn.k_bias = std::move(b.k);
        l.attn.v_bias = std::move(b.v);
        l.attn.o_bias = w.vector(p + "attention.dense.bias", {h});
      }
      // GPTNeoXMLP: dense_4h_to_h(act(dense_h_to_4h(x))), nn.Linear biases always.
      l.mlp = load_linear_mlp(w, p + "mlp.", "dense_h_to_4h", "dense_4h_to_h", h, inter);
      layers_.push_back(std::move(l));
    }
    final_norm_ = load_layer_norm(w, "gpt_neox.final_layer_norm.", h);
    // Published checkpoints name the head embed_out; transformers renames it lm_head.
    if (!cfg_.tie_word_embeddings && w.has("embed_out.weight"))
      lm_head_ = w.matrix("embed_out.weight", {cfg_.vocab_size, h});
    else
      lm_head_ = load_lm_head(w, cfg_.tie_word_embeddings, embed_, cfg_.vocab_size, h);
    // Buffers older checkpoints still store (GPTNeoXPreTrainedModel ignores them).
    w.ignore_if([](const std::string& name) {
      return name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias") ||
             name.ends_with(".rotary_emb.inv_freq");
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
      // GPTNeoXLayer: attn(ln1(x)), then either x + attn + mlp(ln2(x)) (parallel) or
      // y = x + attn; y + mlp(ln2(y)).
      Tensor a = self_attention(ctx, layer_norm(x, l.attn_norm, eps), l.attn, cfg_.attention, cos,
                                sin, cache.layers[i], pos0);
      if (cfg_.use_parallel_residual) {
        Tensor m = gated_mlp(ctx, layer_norm(x, l.mlp_norm, eps), l.mlp, cfg_.act);
        parallel_residual(x, a, m);
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
  struct Layer {
    NormWeights attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  GPTNeoXConfig cfg_;
  Rope rope_;
  Tensor embed_, lm_head_;
  NormWeights final_norm_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_gpt_neox(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // GPTNeoXConfig defaults.
  GPTNeoXConfig c;
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", 50432);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 6144);
  c.intermediate_size = f.get_or<int64_t>("intermediate_size", 24576);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 44);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 2048);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_eps", 1e-5));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  c.use_parallel_residual = f.get_or<bool>("use_parallel_residual", true);
  c.attention_bias = f.get_or<bool>("attention_bias", true);
  c.act = read_activation(f, "hidden_act", "gelu", c.architecture);
  const int64_t heads = f.get_or<int64_t>("num_attention_heads", 64);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", c.intermediate_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", heads},
                  {"max_position_embeddings", c.max_position_embeddings}});
  if (c.hidden_size % heads != 0)
    fail(f.origin(), ": hidden_size ", c.hidden_size, " is not a multiple of num_attention_heads ",
         heads);
  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = a.kv_heads = heads;
  a.head_dim = c.hidden_size / heads;  // GPTNeoXAttention: hidden_size // num_attention_heads
  a.qkv_bias = a.o_bias = c.attention_bias;
  // GPTNeoXConfig reads the legacy rotary_pct and rotary_emb_base into rope_parameters.
  const Json rope = with_legacy_rope_fields(f, "rotary_emb_base", 10000.0, "rotary_pct", 0.25);
  c.rope = read_rope_config(JsonFields(rope, f.origin()), a.head_dim, c.max_position_embeddings);
  return std::make_unique<GPTNeoXModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
