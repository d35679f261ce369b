// CohereForCausalLM: transformers/models/cohere (configuration_cohere.py, modeling_cohere.py).
// One bias-free LayerNorm (CohereLayerNorm) feeds attention and MLP in parallel
// (x + attn(ln(x)) + mlp(ln(x))); rotary pairs are interleaved; q and k optionally get
// per-head LayerNorms with a weight for each head (use_qk_norm); a gated MLP; logits are
// multiplied by logit_scale.
#include "models/arch/cohere.h"

#include "core/error.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

// transformers CohereModel / CohereDecoderLayer (and Cohere2's, with a window and rotary per
// layer).
class CohereModel : public LayerStack {
 public:
  CohereModel(const Checkpoint& ckpt, const CohereConfig& cfg, const ModelOptions& opts)
      : logit_scale_(cfg.logit_scale) {
    const LlamaFamilyConfig& b = cfg.base;
    const AttentionSpec& s = b.attention;
    ropes_.emplace_back(b.rope);
    const int64_t h = b.hidden_size;
    // CohereLayerNorm: no bias.
    const Norm ln = final_norm_ = Norm::layer(cfg.layer_norm_eps, {.bias = false});
    load(ckpt, opts, b, [&](Weights& w, int64_t i, const std::string& p) {
      DecoderLayer l{.spec = layer_attention(b, i), .act = cfg.act};
      l.load_norms(w, p, ln, h, {.attn_norm = "input_layernorm."});
      l.attn = load_attention(w, p + "self_attn.", s);
      if (s.qk_norm == QkNorm::LayerPerHead) {  // CohereLayerNorm((heads, head_dim)): per head
        l.attn.q_norm = w.vector(p + "self_attn.q_norm.weight", {s.heads, s.head_dim});
        l.attn.k_norm = w.vector(p + "self_attn.k_norm.weight", {s.kv_heads, s.head_dim});
      }
      l.mlp = load_gated_mlp(w, p + "mlp.", h, b.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }

 protected:
  // CohereDecoderLayer: x + attn(ln(x)) + mlp(ln(x)), added in that order (not as
  // DecoderLayer's parallel x + (attn + mlp)).
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const DecoderLayer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    const graph::Value normed = g.name(blocks::norm(g, x, *l.attn_norm), p + "attn_norm");
    graph::Value a = blocks::self_attention(g, normed, l.attn, l.spec, in.attention(i), p);
    graph::Value m = blocks::gated_mlp(g, normed, l.mlp, l.act, p);
    return g.add(g.add(x, a), m);
  }

  // CohereForCausalLM: logits * logit_scale.
  graph::Value head(graph::Builder& g, graph::Value x) const override {
    return g.scale(Decoder::head(g, x), logit_scale_);
  }

 private:
  float logit_scale_;
};

}  // namespace

std::unique_ptr<Model> build_cohere_decoder(const Checkpoint& ckpt, const CohereConfig& cfg,
                                            const ModelOptions& opts) {
  return std::make_unique<CohereModel>(ckpt, cfg, opts);
}

CohereConfig read_cohere_config(const Checkpoint& ckpt, const JsonFields& f, double rope_theta) {
  CohereConfig c;
  c.base = read_llama_family_config(ckpt, f,
                                    {.vocab_size = 256000,
                                     .hidden_size = 8192,
                                     .intermediate_size = 22528,
                                     .num_layers = 40,
                                     .heads = 64,
                                     .max_position_embeddings = 8192,
                                     .tie_word_embeddings = true,
                                     .hidden_act = nullptr,
                                     .rope_theta = rope_theta});
  c.act = read_activation(f, "hidden_act", "silu", c.base.architecture);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_eps", 1e-5));
  c.logit_scale = static_cast<float>(f.get_or<double>("logit_scale", 0.0625));
  AttentionSpec& a = c.base.attention;
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  a.rope_layout = graph::RopeLayout::Interleaved;  // Cohere's rotate_half pairs neighbours
  return c;
}

std::unique_ptr<Model> load_cohere(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // CohereConfig defaults.
  CohereConfig c = read_cohere_config(ckpt, f, 500000.0);
  AttentionSpec& a = c.base.attention;
  if (f.get_or<bool>("use_qk_norm", false)) {
    a.qk_norm = QkNorm::LayerPerHead;
    a.norm_eps = c.layer_norm_eps;
  }
  // CohereRotaryEmbedding's default kind rotates the whole head whatever
  // partial_rotary_factor says; the scaled kinds honour it.
  if (c.base.rope.kind == RopeKind::Default) c.base.rope.rot_dim = a.head_dim;
  return build_cohere_decoder(ckpt, c, opts);
}

}  // namespace lathe
