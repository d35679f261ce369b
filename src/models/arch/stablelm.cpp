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

// StableLmLayerNormPerHead: one bias-free nn.LayerNorm(head_dim) per head (norms.<h>),
// gathered into one [heads, head_dim] weight that the layer_norm op cycles through.
Tensor per_head_norm(Weights& w, const std::string& prefix, int64_t heads, int64_t head_dim) {
  std::vector<Tensor> rows;
  for (int64_t hh = 0; hh < heads; ++hh)
    rows.push_back(w.vector(cat(prefix, "norms.", hh, ".weight"), {head_dim}));
  return stack_rows(rows);
}

// transformers StableLmModel / StableLmDecoderLayer: parallel x + attn(ln(x)) + mlp(ln(x))
// (added as x + (attn + mlp)), or sequential y = x + attn(ln(x)); y + mlp(post_ln(y)).
class StableLmModel : public LayerStack {
 public:
  StableLmModel(const Checkpoint& ckpt, const StableLmConfig& cfg, const ModelOptions& opts) {
    ropes_.emplace_back(cfg.rope);
    const int64_t h = cfg.hidden_size;
    const AttentionSpec& s = cfg.attention;
    const bool parallel = cfg.use_parallel_residual;
    const Norm ln = final_norm_ = Norm::layer(cfg.layer_norm_eps);
    load(ckpt, opts, cfg, [&](Weights& w, int64_t, const std::string& p) {
      DecoderLayer l{.spec = s, .act = cfg.act, .parallel = parallel};
      l.load_norms(w, p, ln, h,
                   {.attn_norm = "input_layernorm.",
                    .mlp_norm = parallel ? "" : "post_attention_layernorm."});
      l.attn = load_attention(w, p + "self_attn.", s);
      if (s.qk_norm == QkNorm::LayerPerHead) {
        l.attn.q_norm = per_head_norm(w, p + "self_attn.q_layernorm.", s.heads, s.head_dim);
        l.attn.k_norm = per_head_norm(w, p + "self_attn.k_layernorm.", s.kv_heads, s.head_dim);
      }
      l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }
};

}  // namespace

std::unique_ptr<Model> load_stablelm(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // StableLmConfig defaults.
  StableLmConfig c;
  read_sizes(ckpt, f,
             {.vocab_size = 50304,
              .hidden_size = 2560,
              .intermediate_size = 6912,
              .num_layers = 32,
              .max_position_embeddings = 4096},
             c);
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
  return std::make_unique<StableLmModel>(ckpt, c, opts);
}

}  // namespace lathe
