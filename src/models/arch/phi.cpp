// PhiForCausalLM: transformers/models/phi (configuration_phi.py, modeling_phi.py).
// One LayerNorm feeds attention and MLP in parallel (x + attn(ln(x)) + mlp(ln(x))); attention
// with biases, an output projection named dense, optional q/k LayerNorms shared by the heads
// (qk_layernorm), and partial rotary (partial_rotary_factor 0.5 by default); an ungated MLP
// fc2(act(fc1(x))); a final LayerNorm and an lm_head with a bias.
#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct PhiConfig : DecoderConfig {
  float layer_norm_eps = 1e-5f;
  graph::Activation act = graph::Activation::GeluTanh;
};

// transformers PhiModel / PhiDecoderLayer: attn(ln(x)) + mlp(ln(x)) + x, added as
// x + (attn + mlp).
class PhiModel : public LayerStack {
 public:
  PhiModel(const Checkpoint& ckpt, const PhiConfig& cfg, const ModelOptions& opts) {
    ropes_.emplace_back(cfg.rope);
    const int64_t h = cfg.hidden_size;
    const AttentionSpec& s = cfg.attention;
    const Norm ln = final_norm_ = Norm::layer(cfg.layer_norm_eps);
    load(
        ckpt, opts, cfg,
        [&](Weights& w, int64_t, const std::string& p) {
          DecoderLayer l{.spec = s, .act = cfg.act, .parallel = true};
          l.load_norms(w, p, ln, h, {.attn_norm = "input_layernorm."});
          l.attn = load_attention(w, p + "self_attn.", s, "dense");
          if (s.qk_norm == QkNorm::LayerPerHead) {  // nn.LayerNorm(head_dim), one for all heads
            const NormWeights q = load_layer_norm(w, p + "self_attn.q_layernorm.", s.head_dim);
            const NormWeights k = load_layer_norm(w, p + "self_attn.k_layernorm.", s.head_dim);
            l.attn.q_norm = q.weight;
            l.attn.q_norm_bias = q.bias;
            l.attn.k_norm = k.weight;
            l.attn.k_norm_bias = k.bias;
          }
          l.mlp = load_linear_mlp(w, p + "mlp.", "fc1", "fc2", h, cfg.intermediate_size);
          layers_.push_back(std::move(l));
        },
        {.final_norm = "model.final_layernorm."},
        // PhiForCausalLM: lm_head has a bias.
        [&](Weights& w) { lm_head_bias_ = w.vector("lm_head.bias", {cfg.vocab_size}); });
  }
};

}  // namespace

std::unique_ptr<Model> load_phi(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // PhiConfig defaults.
  PhiConfig c;
  read_sizes(ckpt, f,
             {.vocab_size = 51200,
              .hidden_size = 2048,
              .intermediate_size = 8192,
              .num_layers = 24,
              .max_position_embeddings = 2048},
             c);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_eps", 1e-5));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  c.act = read_activation(f, "hidden_act", "gelu_new", c.architecture);
  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", 32);
  a.kv_heads = f.get_or<int64_t>("num_key_value_heads", a.heads);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", c.intermediate_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", a.heads},
                  {"num_key_value_heads", a.kv_heads},
                  {"max_position_embeddings", c.max_position_embeddings}});
  if (a.heads % a.kv_heads != 0)
    fail(f.origin(), ": num_attention_heads ", a.heads,
         " is not a multiple of num_key_value_heads ", a.kv_heads);
  // PhiAttention: head_dim if the config has one, else hidden_size // num_attention_heads; the
  // q/k LayerNorms are sized hidden_size // num_attention_heads.
  a.head_dim = f.get_or<int64_t>("head_dim", c.hidden_size / a.heads);
  a.qkv_bias = a.o_bias = true;
  if (f.get_or<bool>("qk_layernorm", false)) {
    a.qk_norm = QkNorm::LayerPerHead;
    a.norm_eps = c.layer_norm_eps;
  }
  c.rope = read_rope_config(f, a.head_dim, c.max_position_embeddings, 10000.0, 0.5);
  return std::make_unique<PhiModel>(ckpt, c, opts);
}

}  // namespace lathe
