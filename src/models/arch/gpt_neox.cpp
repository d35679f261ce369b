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

struct GPTNeoXConfig : DecoderConfig {
  float layer_norm_eps = 1e-5f;
  bool use_parallel_residual = true;
  bool attention_bias = true;
  graph::Activation act = graph::Activation::Gelu;
};

// transformers GPTNeoXModel / GPTNeoXLayer: attn(ln1(x)), then either x + (attn + mlp(ln2(x)))
// (parallel) or y = x + attn; y + mlp(ln2(y)).
class GPTNeoXModel : public LayerStack {
 public:
  GPTNeoXModel(const Checkpoint& ckpt, const GPTNeoXConfig& cfg, const ModelOptions& opts) {
    ropes_.emplace_back(cfg.rope);
    const int64_t h = cfg.hidden_size, inter = cfg.intermediate_size;
    const Norm ln = final_norm_ = Norm::layer(cfg.layer_norm_eps);
    // Published checkpoints name the head embed_out; transformers renames it lm_head.
    const bool embed_out = !cfg.tie_word_embeddings && ckpt.has("embed_out.weight");
    load(
        ckpt, opts, cfg,
        [&](Weights& w, int64_t, const std::string& p) {
          const AttentionSpec& s = cfg.attention;
          DecoderLayer l{.spec = s, .act = cfg.act, .parallel = cfg.use_parallel_residual};
          l.load_norms(w, p, ln, h,
                       {.attn_norm = "input_layernorm.", .mlp_norm = "post_attention_layernorm."});
          // GPTNeoXAttention views query_key_value's output as [heads, 3 * head_size] and
          // chunks each head into q, k, v: rows [q_0; k_0; v_0; q_1; ...], a group per head.
          l.attn = load_fused_attention(w, p + "attention.query_key_value.", p + "attention.dense.",
                                        s, s.heads, cfg.attention_bias);
          // GPTNeoXMLP: dense_4h_to_h(act(dense_h_to_4h(x))), nn.Linear biases always.
          l.mlp = load_linear_mlp(w, p + "mlp.", "dense_h_to_4h", "dense_4h_to_h", h, inter);
          layers_.push_back(std::move(l));
        },
        {.embed = "gpt_neox.embed_in.weight",
         .layers = "gpt_neox.layers.",
         .final_norm = "gpt_neox.final_layer_norm.",
         .lm_head = embed_out ? "embed_out.weight" : "lm_head.weight"},
        [](Weights& w) {
          // Buffers older checkpoints still store (GPTNeoXPreTrainedModel ignores them).
          w.ignore_if([](const std::string& name) {
            return name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias") ||
                   name.ends_with(".rotary_emb.inv_freq");
          });
        });
  }
};

}  // namespace

std::unique_ptr<Model> load_gpt_neox(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // GPTNeoXConfig defaults.
  GPTNeoXConfig c;
  read_sizes(ckpt, f,
             {.vocab_size = 50432,
              .hidden_size = 6144,
              .intermediate_size = 24576,
              .num_layers = 44,
              .max_position_embeddings = 2048},
             c);
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
  return std::make_unique<GPTNeoXModel>(ckpt, c, opts);
}

}  // namespace lathe
