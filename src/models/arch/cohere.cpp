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
class CohereModel : public Decoder {
 public:
  CohereModel(const Checkpoint& ckpt, CohereConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const LlamaFamilyConfig& b = cfg_.base;
    const AttentionSpec& s = b.attention;
    ropes_.emplace_back(b.rope);
    const int64_t h = b.hidden_size;
    // CohereLayerNorm: no bias.
    const Norm ln = final_norm_ = Norm::layer(cfg_.layer_norm_eps, {.bias = false});
    load(ckpt, opts, b, [&](Weights& w, int64_t i, const std::string& p) {
      Layer l;
      l.spec = layer_attention(b, i);
      l.norm = ln.load(w, p + "input_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", s);
      if (s.qk_norm == QkNorm::LayerPerHead) {  // CohereLayerNorm((heads, head_dim)): per head
        l.attn.q_norm = w.vector(p + "self_attn.q_norm.weight", {s.heads, s.head_dim});
        l.attn.k_norm = w.vector(p + "self_attn.k_norm.weight", {s.kv_heads, s.head_dim});
      }
      l.mlp = load_gated_mlp(w, p + "mlp.", h, b.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }

  std::vector<LayerStateSpec> layer_states() const override {
    return blocks::kv_layer_states(cfg_.base.attention, cfg_.base.layer_windows);
  }

 protected:
  // CohereDecoderLayer: x + attn(ln(x)) + mlp(ln(x)).
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    const graph::Value normed = g.name(blocks::norm(g, x, l.norm), p + "attn_norm");
    graph::Value a = blocks::self_attention(g, normed, l.attn, l.spec, in.attention(i), p);
    graph::Value m = blocks::gated_mlp(g, normed, l.mlp, cfg_.act, p);
    // residual + hidden_states_attention + hidden_states_mlp, added in that order.
    return g.add(g.add(x, a), m);
  }

  // CohereForCausalLM: logits * logit_scale.
  graph::Value head(graph::Builder& g, graph::Value x) const override {
    return g.scale(Decoder::head(g, x), cfg_.logit_scale);
  }

 private:
  struct Layer {
    AttentionSpec spec;
    Norm norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  CohereConfig cfg_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> build_cohere_decoder(const Checkpoint& ckpt, CohereConfig cfg,
                                            const ModelOptions& opts) {
  return std::make_unique<CohereModel>(ckpt, std::move(cfg), opts);
}

std::unique_ptr<Model> load_cohere(const Checkpoint& ckpt, const ModelOptions& opts) {
  // CohereConfig defaults.
  CohereConfig c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 256000,
                                           .hidden_size = 8192,
                                           .intermediate_size = 22528,
                                           .num_layers = 40,
                                           .heads = 64,
                                           .max_position_embeddings = 8192,
                                           .tie_word_embeddings = true,
                                           .hidden_act = nullptr,
                                           .rope_theta = 500000.0});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.act = read_activation(f, "hidden_act", "silu", c.base.architecture);
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_eps", 1e-5));
  c.logit_scale = static_cast<float>(f.get_or<double>("logit_scale", 0.0625));
  AttentionSpec& a = c.base.attention;
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  a.rope_layout = graph::RopeLayout::Interleaved;  // Cohere's rotate_half pairs neighbours
  if (f.get_or<bool>("use_qk_norm", false)) {
    a.qk_norm = QkNorm::LayerPerHead;
    a.norm_eps = c.layer_norm_eps;
  }
  // CohereRotaryEmbedding's default kind rotates the whole head whatever
  // partial_rotary_factor says; the scaled kinds honour it.
  if (c.base.rope.kind == RopeKind::Default) c.base.rope.rot_dim = a.head_dim;
  return build_cohere_decoder(ckpt, std::move(c), opts);
}

}  // namespace lathe
