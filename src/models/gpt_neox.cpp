// GPTNeoXForCausalLM: transformers/models/gpt_neox (configuration_gpt_neox.py,
// modeling_gpt_neox.py). LayerNorm (weight and bias) blocks whose attention and MLP run either
// in parallel off the same input (use_parallel_residual, each with its own norm) or in
// sequence; a fused query_key_value laid out per head; partial rotary (rotary_pct) on the
// first dims of each head; an ungated MLP with biases.
#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
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
  graph::Activation act = graph::Activation::Gelu;
  AttentionSpec attention;
  RopeConfig rope;
};

class GPTNeoXModel : public Decoder {
 public:
  GPTNeoXModel(const Checkpoint& ckpt, GPTNeoXConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    ropes_.emplace_back(cfg_.rope);
    Weights w(ckpt, opts.dtype, !opts.dequantize_fp8);
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
          split_fused_qkv(w, p + "attention.query_key_value.weight",
                          w.matrix(p + "attention.query_key_value.weight", {3 * h, h}), s, s.heads);
      l.attn.q = std::move(qkv.q);
      l.attn.k = std::move(qkv.k);
      l.attn.v = std::move(qkv.v);
      l.attn.o = w.matrix(p + "attention.dense.weight", {h, h});
      if (cfg_.attention_bias) {
        FusedQkv b =
            split_fused_qkv(w, p + "attention.query_key_value.bias",
                            w.vector(p + "attention.query_key_value.bias", {3 * h}), s, s.heads);
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

 protected:
  // GPTNeoXLayer: attn(ln1(x)), then either x + (attn + mlp(ln2(x))) (parallel) or
  // y = x + attn; y + mlp(ln2(y)).
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = cat("layer.", i, ".");
    const float eps = cfg_.layer_norm_eps;
    graph::Value normed = g.name(blocks::layer_norm(g, x, l.attn_norm, eps), p + "attn_norm");
    graph::Value a = blocks::self_attention(g, normed, l.attn, cfg_.attention,
                                            {.rope_tables = in.rope_tables[0], .layer = i}, p);
    if (cfg_.use_parallel_residual) {
      graph::Value m = g.name(blocks::layer_norm(g, x, l.mlp_norm, eps), p + "mlp_norm");
      return g.add(x, g.add(a, blocks::gated_mlp(g, m, l.mlp, cfg_.act, p)));
    }
    x = g.add(x, a);
    graph::Value m = g.name(blocks::layer_norm(g, x, l.mlp_norm, eps), p + "mlp_norm");
    return g.add(x, blocks::gated_mlp(g, m, l.mlp, cfg_.act, p));
  }

  graph::Value final_norm(graph::Builder& g, graph::Value x) const override {
    return blocks::layer_norm(g, x, final_norm_, cfg_.layer_norm_eps);
  }

 private:
  struct Layer {
    NormWeights attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  GPTNeoXConfig cfg_;
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
