// GPTJForCausalLM: transformers/models/gptj (configuration_gptj.py, modeling_gptj.py).
// One LayerNorm feeds attention and MLP in parallel (x + attn(ln(x)) + mlp(ln(x))); attention
// has no biases and rotates the first rotary_dim dims of each head as interleaved pairs
// (rotate_every_two); an ungated MLP fc_out(act(fc_in(x))); an lm_head with a bias.
#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct GPTJConfig : DecoderConfig {
  float layer_norm_eps = 1e-5f;
  graph::Activation act = graph::Activation::GeluTanh;
};

// transformers GPTJModel / GPTJBlock: attn(ln_1(x)) + mlp(ln_1(x)) + x, summed as
// x + (attn + mlp).
class GPTJModel : public LayerStack {
 public:
  GPTJModel(const Checkpoint& ckpt, const GPTJConfig& cfg, const ModelOptions& opts) {
    ropes_.emplace_back(cfg.rope);
    const int64_t h = cfg.hidden_size;
    const Norm ln = final_norm_ = Norm::layer(cfg.layer_norm_eps);
    load(
        ckpt, opts, cfg,
        [&](Weights& w, int64_t, const std::string& p) {
          DecoderLayer l{.spec = cfg.attention, .act = cfg.act, .parallel = true};
          l.load_norms(w, p, ln, h, {.attn_norm = "ln_1."});
          l.attn = load_attention(w, p + "attn.", l.spec, "out_proj");
          l.mlp = load_linear_mlp(w, p + "mlp.", "fc_in", "fc_out", h, cfg.intermediate_size);
          layers_.push_back(std::move(l));
        },
        {.embed = "transformer.wte.weight",
         .layers = "transformer.h.",
         .final_norm = "transformer.ln_f."},
        [&](Weights& w) {
          // GPTJForCausalLM: lm_head has a bias.
          lm_head_bias_ = w.vector("lm_head.bias", {cfg.vocab_size});
          // Causal-mask buffers older checkpoints still store (GPTJPreTrainedModel ignores them).
          w.ignore_if([](const std::string& name) {
            return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
          });
        });
  }
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
  a.rope_layout = graph::RopeLayout::Interleaved;  // rotate_every_two
  // GPTJRotaryEmbedding: fixed base 10000 over rotary_dim (null: n_embd, which transformers
  // can apply only when that is head_dim, i.e. one head).
  c.rope.head_dim = a.head_dim;
  c.rope.max_position_embeddings = c.max_position_embeddings;
  c.rope.original_max_position_embeddings = c.max_position_embeddings;
  c.rope.rot_dim = f.get_or<int64_t>("rotary_dim", c.hidden_size);
  if (c.rope.rot_dim <= 0 || c.rope.rot_dim > a.head_dim || c.rope.rot_dim % 2 != 0)
    fail(f.origin(), ": field \"rotary_dim\" is ", c.rope.rot_dim,
         "; it must be even and at most the head size ", a.head_dim);
  return std::make_unique<GPTJModel>(ckpt, c, opts);
}

}  // namespace lathe
