// Gemma2ForCausalLM: transformers/models/gemma2 (configuration_gemma2.py, modeling_gemma2.py).
// Gemma's embedding scaling and (1 + weight) RMSNorm, with a "sandwich" block (norms before
// and after both attention and MLP), alternating sliding-window and full attention layers,
// attention scores scaled by query_pre_attn_scalar^-0.5 and soft-capped, and soft-capped
// final logits.
#include "models/arch/gemma2.h"

#include <cmath>

#include "core/error.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {

Gemma2Config read_gemma2_config(const Checkpoint& ckpt, const Gemma2Defaults& d) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  Gemma2Config c;
  read_sizes(
      ckpt, f,
      {d.vocab_size, d.hidden_size, d.intermediate_size, d.num_layers, d.max_position_embeddings},
      c);
  c.rms_norm_eps = static_cast<float>(f.get_or<double>("rms_norm_eps", 1e-6));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", true);
  c.act = read_activation(f, "hidden_activation", "gelu_pytorch_tanh", c.architecture);
  c.final_softcap = read_nullable_float(f, "final_logit_softcapping", d.final_softcap);
  if (f.get_or<bool>("use_bidirectional_attention", false))
    fail(f.origin(), ": field \"use_bidirectional_attention\" is true; lathe implements causal ",
         c.architecture);

  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", d.heads);
  a.kv_heads = f.get_or<int64_t>("num_key_value_heads", d.kv_heads);
  a.head_dim = f.get_or<int64_t>("head_dim", 256);
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  a.norm_eps = c.rms_norm_eps;
  a.scale = static_cast<float>(
      std::pow(static_cast<double>(f.get_or<double>("query_pre_attn_scalar", 256)), -0.5));
  a.softcap = read_nullable_float(f, "attn_logit_softcapping", d.attn_softcap);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", c.intermediate_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", a.heads},
                  {"num_key_value_heads", a.kv_heads},
                  {"head_dim", a.head_dim},
                  {"max_position_embeddings", c.max_position_embeddings}});
  if (a.heads % a.kv_heads != 0)
    fail(f.origin(), ": num_attention_heads ", a.heads,
         " is not a multiple of num_key_value_heads ", a.kv_heads);

  // sliding_window may be null only when no layer slides (transformers cannot run it).
  const int64_t window =
      f.json().contains("sliding_window") ? f.get_or<int64_t>("sliding_window", 0) : int64_t{4096};
  if (d.sliding_pattern <= 0)
    fail(f.origin(), ": field \"sliding_window_pattern\" is ", d.sliding_pattern,
         ", must be positive");
  check_layer_count(ckpt, f, c.num_layers);
  c.layer_windows.assign(static_cast<size_t>(c.num_layers), 0);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    bool sliding = (i + 1) % d.sliding_pattern != 0;
    if (f.has("layer_types")) {
      const Json& types = f.at("layer_types");
      if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers)
        fail(f.origin(), ": field \"layer_types\" must list ", c.num_layers, " layer types");
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements full_attention and sliding_attention");
      sliding = types[i] == "sliding_attention";
    }
    if (sliding && window <= 0)
      fail(f.origin(), ": layer ", i, " is sliding_attention but field \"sliding_window\" is ",
           f.json().at("sliding_window").dump());
    if (sliding) c.layer_windows[i] = window;
  }
  return c;
}

namespace {

// transformers Gemma2Model / Gemma2DecoderLayer: x + post_norm(attn(norm(x))), then
// x + post_norm(mlp(norm(x))).
class Gemma2Model : public LayerStack {
 public:
  Gemma2Model(const Checkpoint& ckpt, Gemma2Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    for (const RopeConfig& r : cfg_.ropes) ropes_.emplace_back(r);
    const int64_t h = cfg_.hidden_size;
    // Gemma2TextScaledWordEmbedding: a float32 sqrt(hidden_size).
    embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(h)));
    // Gemma2RMSNorm: x / rms(x) * (1 + weight).
    const Norm rms = final_norm_ = Norm::rms(cfg_.rms_norm_eps, 1.0f);
    load(ckpt, opts, cfg_, [&](Weights& w, int64_t i, const std::string& p) {
      DecoderLayer l{.spec = cfg_.attention, .act = cfg_.act};
      l.spec.window = cfg_.layer_windows.at(i);
      // One table per rotary kind (Gemma3: local and global layers differ).
      if (!cfg_.layer_rope.empty()) l.rope = static_cast<size_t>(cfg_.layer_rope.at(i));
      l.load_norms(w, p, rms, h,
                   {.attn_norm = "input_layernorm.",
                    .attn_post_norm = "post_attention_layernorm.",
                    .mlp_norm = "pre_feedforward_layernorm.",
                    .mlp_post_norm = "post_feedforward_layernorm."});
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg_.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }

 protected:
  // Gemma2ForCausalLM: final_logit_softcapping.
  graph::Value head(graph::Builder& g, graph::Value x) const override {
    graph::Value logits = Decoder::head(g, x);
    return cfg_.final_softcap > 0 ? g.softcap(logits, cfg_.final_softcap) : logits;
  }

 private:
  Gemma2Config cfg_;
};

}  // namespace

std::unique_ptr<Model> build_gemma2_decoder(const Checkpoint& ckpt, Gemma2Config cfg,
                                            const ModelOptions& opts) {
  if (cfg.ropes.empty()) fail("internal: ", cfg.architecture, ": no rotary config");
  for (int r : cfg.layer_rope)
    if (r < 0 || r >= static_cast<int>(cfg.ropes.size()))
      fail("internal: ", cfg.architecture, ": layer rotary index ", r, " out of range");
  return std::make_unique<Gemma2Model>(ckpt, std::move(cfg), opts);
}

std::unique_ptr<Model> load_gemma2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Gemma2Config defaults; layer_types: sliding on even layers, full on odd ones.
  Gemma2Config c = read_gemma2_config(ckpt, {.vocab_size = 256000,
                                             .hidden_size = 2304,
                                             .intermediate_size = 9216,
                                             .num_layers = 26,
                                             .heads = 8,
                                             .kv_heads = 4,
                                             .max_position_embeddings = 8192,
                                             .final_softcap = 30.0f,
                                             .attn_softcap = 50.0f,
                                             .sliding_pattern = 2});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.ropes = {read_rope_config(f, c.attention.head_dim, c.max_position_embeddings)};
  return build_gemma2_decoder(ckpt, std::move(c), opts);
}

}  // namespace lathe
