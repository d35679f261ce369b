// Glm4ForCausalLM: transformers/models/glm4 (configuration_glm4.py, modeling_glm4.py).
// A sandwich block of RMSNorms: x + post_self_attn_norm(attn(norm(x))), then
// x + post_mlp_norm(mlp(norm(x))); q/k/v biases (attention_bias) without an output bias;
// rotary on the first half of each head (partial_rotary_factor 0.5) as interleaved pairs
// (Glm4's apply_rotary_pos_emb repeats each of the first rot/2 frequencies for a pair); a
// fused gate_up_proj split once at load.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

// transformers Glm4Model / Glm4DecoderLayer.
class Glm4Model : public Decoder {
 public:
  Glm4Model(const Checkpoint& ckpt, LlamaFamilyConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    ropes_.emplace_back(cfg_.rope);
    const int64_t h = cfg_.hidden_size, inter = cfg_.intermediate_size;
    const Norm rms = final_norm_ = rms_norm_of(cfg_);
    load(ckpt, opts, cfg_, [&](Weights& w, int64_t, const std::string& p) {
      Layer l;
      l.attn_norm = rms.load(w, p + "input_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", cfg_.attention);
      l.attn_post_norm = rms.load(w, p + "post_self_attn_layernorm.", h);
      l.mlp_norm = rms.load(w, p + "post_attention_layernorm.", h);
      // Glm4MLP: gate, up = gate_up_proj(x).chunk(2).
      l.mlp = load_fused_gate_up_mlp(w, p + "mlp.", h, inter);
      l.mlp_post_norm = rms.load(w, p + "post_mlp_layernorm.", h);
      layers_.push_back(std::move(l));
    });
  }

 protected:
  // Glm4DecoderLayer: each branch normed before and after.
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    a = blocks::self_attention(g, a, l.attn, cfg_.attention, in.attention(i), p);
    x = g.add(x, g.name(blocks::norm(g, a, l.attn_post_norm), p + "post_attn_norm"));
    graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    m = blocks::gated_mlp(g, m, l.mlp, cfg_.mlp_act, p);
    return g.add(x, g.name(blocks::norm(g, m, l.mlp_post_norm), p + "post_mlp_norm"));
  }

 private:
  struct Layer {
    Norm attn_norm, attn_post_norm, mlp_norm, mlp_post_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  LlamaFamilyConfig cfg_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_glm4(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Glm4Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151552,
                                                        .intermediate_size = 13696,
                                                        .num_layers = 40,
                                                        .kv_heads = 2,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 131072,
                                                        .hidden_act = nullptr,
                                                        .rms_norm_eps = 1.5625e-07});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.mlp_act = read_activation(f, "hidden_act", "silu", c.architecture);
  c.attention.qkv_bias = f.get_or<bool>("attention_bias", true);
  c.attention.o_bias = false;
  c.attention.rope_layout = graph::RopeLayout::Interleaved;
  // Glm4Config's partial_rotary_factor defaults to 0.5 rather than 1.
  c.rope = read_rope_config(f, c.attention.head_dim, c.max_position_embeddings, 10000.0, 0.5);
  return std::make_unique<Glm4Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
