// Glm4ForCausalLM: transformers/models/glm4 (configuration_glm4.py, modeling_glm4.py).
// A sandwich block of RMSNorms: x + post_self_attn_norm(attn(norm(x))), then
// x + post_mlp_norm(mlp(norm(x))); q/k/v biases (attention_bias) without an output bias;
// rotary on the first half of each head (partial_rotary_factor 0.5) as interleaved pairs
// (Glm4's apply_rotary_pos_emb repeats each of the first rot/2 frequencies for a pair); a
// fused gate_up_proj split once at load.
#include "core/error.h"
#include "models/llama_family.h"
#include "models/registry.h"

namespace lathe {
namespace {

class Glm4Model : public Model {
 public:
  Glm4Model(const Checkpoint& ckpt, LlamaFamilyConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)), rope_(cfg_.rope) {
    Weights w(ckpt, opts.dtype);
    const int64_t h = cfg_.hidden_size, inter = cfg_.intermediate_size;
    embed_ = w.matrix("model.embed_tokens.weight", {cfg_.vocab_size, h});
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
      const std::string p = cat("model.layers.", i, ".");
      Layer l;
      l.attn_norm = w.vector(p + "input_layernorm.weight", {h});
      l.attn = load_attention(w, p + "self_attn.", cfg_.attention);
      l.attn_post_norm = w.vector(p + "post_self_attn_layernorm.weight", {h});
      l.mlp_norm = w.vector(p + "post_attention_layernorm.weight", {h});
      // Glm4MLP: gate, up = gate_up_proj(x).chunk(2).
      const Tensor gate_up = w.matrix(p + "mlp.gate_up_proj.weight", {2 * inter, h});
      l.mlp.gate = matrix_rows(gate_up, 0, inter);
      l.mlp.up = matrix_rows(gate_up, inter, inter);
      l.mlp.down = w.matrix(p + "mlp.down_proj.weight", {h, inter});
      l.mlp_post_norm = w.vector(p + "post_mlp_layernorm.weight", {h});
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector("model.norm.weight", {h});
    lm_head_ = load_lm_head(w, cfg_.tie_word_embeddings, embed_, cfg_.vocab_size, h);
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
    const float eps = cfg_.rms_norm_eps;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      // Glm4DecoderLayer: each branch normed before and after.
      Tensor a = self_attention(ctx, ops::rms_norm(x, l.attn_norm, eps), l.attn, cfg_.attention,
                                cos, sin, cache.layers[i], pos0);
      ops::add_inplace(x, ops::rms_norm(a, l.attn_post_norm, eps));
      Tensor m = gated_mlp(ctx, ops::rms_norm(x, l.mlp_norm, eps), l.mlp, cfg_.mlp_act);
      ops::add_inplace(x, ops::rms_norm(m, l.mlp_post_norm, eps));
      record(trace, cat("layer.", i, ".out"), x);
    }
    cache.length = pos0 + n;
    Tensor normed = ops::rms_norm(all_logits ? x : last_row(x), final_norm_, eps);
    record(trace, "final_norm", normed);
    return ops::linear(ctx, normed, lm_head_);
  }

 private:
  struct Layer {
    Tensor attn_norm, attn_post_norm, mlp_norm, mlp_post_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  LlamaFamilyConfig cfg_;
  Rope rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_glm4(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Glm4Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151552,
                                                        .hidden_size = 4096,
                                                        .intermediate_size = 13696,
                                                        .num_layers = 40,
                                                        .heads = 32,
                                                        .kv_heads = 2,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 131072,
                                                        .tie_word_embeddings = false,
                                                        .hidden_act = nullptr,
                                                        .rms_norm_eps = 1.5625e-07});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.mlp_act = read_activation(f, "hidden_act", "silu", c.architecture);
  c.attention.qkv_bias = f.get_or<bool>("attention_bias", true);
  c.attention.o_bias = false;
  c.attention.rope_layout = ops::RopeLayout::Interleaved;
  // Glm4Config's partial_rotary_factor defaults to 0.5 rather than 1.
  c.rope = read_rope_config(f, c.attention.head_dim, c.max_position_embeddings, 10000.0, 0.5);
  return std::make_unique<Glm4Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
