// OPTForCausalLM: transformers/models/opt (configuration_opt.py, modeling_opt.py). Learned
// absolute positions at an offset of 2, LayerNorm blocks that are pre-norm or post-norm
// (do_layer_norm_before), multi-head attention with out_proj, an ungated MLP fc2(act(fc1(x))),
// one enable_bias switch for every linear, and project_in / project_out when the embeddings
// are narrower than the decoder (word_embed_proj_dim).
#include "core/error.h"
#include "models/builder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct OptConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, ffn_dim = 0, num_layers = 0;
  int64_t max_position_embeddings = 0, word_embed_proj_dim = 0;
  bool do_layer_norm_before = true, final_layer_norm = true;
  bool enable_bias = true, layer_norm_affine = true, tie_word_embeddings = true;
  ops::Activation act = ops::Activation::Relu;
  AttentionSpec attention;
};

// OPTLearnedPositionalEmbedding looks up position + 2.
constexpr int64_t kPositionOffset = 2;
// OPT's nn.LayerNorm keeps torch's default eps.
constexpr float kLayerNormEps = 1e-5f;

class OptModel : public Model {
 public:
  OptModel(const Checkpoint& ckpt, OptConfig cfg, const ModelOptions& opts) : cfg_(std::move(cfg)) {
    Weights w(ckpt, opts.dtype);
    const int64_t h = cfg_.hidden_size, proj = cfg_.word_embed_proj_dim, ffn = cfg_.ffn_dim;
    const bool bias = cfg_.enable_bias;
    const std::string d =
        base_model_prefix(w, "model.", "decoder.embed_tokens.weight") + "decoder.";
    embed_ = w.matrix(d + "embed_tokens.weight", {cfg_.vocab_size, proj});
    positions_ =
        w.matrix(d + "embed_positions.weight", {cfg_.max_position_embeddings + kPositionOffset, h});
    if (proj != h) {
      project_in_ = w.matrix(d + "project_in.weight", {h, proj});
      project_out_ = w.matrix(d + "project_out.weight", {proj, h});
    }
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
      const std::string p = cat(d, "layers.", i, ".");
      Layer l;
      l.attn_norm = norm(w, p + "self_attn_layer_norm.");
      l.attn.q = w.matrix(p + "self_attn.q_proj.weight", {h, h});
      l.attn.k = w.matrix(p + "self_attn.k_proj.weight", {h, h});
      l.attn.v = w.matrix(p + "self_attn.v_proj.weight", {h, h});
      l.attn.o = w.matrix(p + "self_attn.out_proj.weight", {h, h});
      if (bias) {
        l.attn.q_bias = w.vector(p + "self_attn.q_proj.bias", {h});
        l.attn.k_bias = w.vector(p + "self_attn.k_proj.bias", {h});
        l.attn.v_bias = w.vector(p + "self_attn.v_proj.bias", {h});
        l.attn.o_bias = w.vector(p + "self_attn.out_proj.bias", {h});
      }
      l.mlp_norm = norm(w, p + "final_layer_norm.");
      l.mlp = load_linear_mlp(w, p, "fc1", "fc2", h, ffn, bias);
      layers_.push_back(std::move(l));
    }
    if (cfg_.final_layer_norm) final_norm_ = norm(w, d + "final_layer_norm.");
    lm_head_ = load_lm_head(w, cfg_.tie_word_embeddings, embed_, cfg_.vocab_size, proj);
    w.finish(cfg_.architecture);

    info_ = decoder_info(cfg_, w.matrix_dtype());
  }

  Tensor forward(Context& ctx, std::span<const int32_t> ids, KVCache& cache, bool all_logits,
                 const Trace* trace) const override {
    const int64_t n = static_cast<int64_t>(ids.size()), pos0 = cache.length;
    check_cache_room(cache, n);
    // OPTDecoder: project_in(embed_tokens(ids)) + embed_positions(positions + 2).
    Tensor x = ops::embedding(embed_, ids);
    if (project_in_.defined()) x = ops::linear(ctx, x, project_in_);
    ops::add_inplace(x, learned_positions(positions_, pos0, n, kPositionOffset));
    record(trace, "embed", x);
    const Tensor none;
    const bool pre = cfg_.do_layer_norm_before;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      // OPTDecoderLayer: pre-norm x + attn(ln(x)), or post-norm ln(x + attn(x)); the same
      // around the MLP.
      Tensor a = self_attention(ctx, pre ? layer_norm(x, l.attn_norm, kLayerNormEps) : x, l.attn,
                                cfg_.attention, none, none, cache.layers[i], pos0);
      ops::add_inplace(x, a);
      if (!pre) x = layer_norm(x, l.attn_norm, kLayerNormEps);
      Tensor m =
          gated_mlp(ctx, pre ? layer_norm(x, l.mlp_norm, kLayerNormEps) : x, l.mlp, cfg_.act);
      ops::add_inplace(x, m);
      if (!pre) x = layer_norm(x, l.mlp_norm, kLayerNormEps);
      record(trace, cat("layer.", i, ".out"), x);
    }
    cache.length = pos0 + n;
    Tensor out = all_logits ? x : last_row(x);
    if (cfg_.final_layer_norm) out = layer_norm(out, final_norm_, kLayerNormEps);
    if (project_out_.defined()) out = ops::linear(ctx, out, project_out_);
    record(trace, "final_norm", out);
    return ops::linear(ctx, out, lm_head_);
  }

 private:
  // layer_norm_elementwise_affine false: LayerNorm without weight or bias.
  NormWeights norm(Weights& w, const std::string& prefix) const {
    return load_layer_norm(w, prefix, cfg_.hidden_size, cfg_.layer_norm_affine,
                           cfg_.layer_norm_affine);
  }

  struct Layer {
    NormWeights attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  OptConfig cfg_;
  Tensor embed_, positions_, project_in_, project_out_, lm_head_;
  NormWeights final_norm_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_opt(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // OPTConfig defaults.
  OptConfig c;
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", 50272);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 768);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 12);
  c.ffn_dim = f.get_or<int64_t>("ffn_dim", 3072);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 2048);
  c.word_embed_proj_dim = f.get_or<int64_t>("word_embed_proj_dim", c.hidden_size);
  c.do_layer_norm_before = f.get_or<bool>("do_layer_norm_before", true);
  // OPTDecoder keeps a final LayerNorm only for pre-norm models not marked to remove it.
  c.final_layer_norm = c.do_layer_norm_before && !f.get_or<bool>("_remove_final_layer_norm", false);
  c.enable_bias = f.get_or<bool>("enable_bias", true);
  c.layer_norm_affine = f.get_or<bool>("layer_norm_elementwise_affine", true);
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", true);
  c.act = read_activation(f, "activation_function", "relu", c.architecture);
  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", 12);
  if (a.heads <= 0 || c.hidden_size <= 0 || c.hidden_size % a.heads != 0)
    fail(f.origin(), ": hidden_size ", c.hidden_size,
         " is not a positive multiple of num_attention_heads ", a.heads);
  a.kv_heads = a.heads;
  a.head_dim = c.hidden_size / a.heads;
  a.rope = false;
  for (auto [name, v] : {std::pair{"vocab_size", c.vocab_size},
                         {"ffn_dim", c.ffn_dim},
                         {"num_hidden_layers", c.num_layers},
                         {"word_embed_proj_dim", c.word_embed_proj_dim},
                         {"max_position_embeddings", c.max_position_embeddings}})
    if (v <= 0 || v > (int64_t{1} << 31))
      fail(f.origin(), ": field \"", name, "\" is ", v, ", out of range");
  return std::make_unique<OptModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
