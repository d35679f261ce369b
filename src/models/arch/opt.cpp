// OPTForCausalLM: transformers/models/opt (configuration_opt.py, modeling_opt.py). Learned
// absolute positions at an offset of 2, LayerNorm blocks that are pre-norm or post-norm
// (do_layer_norm_before), multi-head attention with out_proj, an ungated MLP fc2(act(fc1(x))),
// one enable_bias switch for every linear, and project_in / project_out when the embeddings
// are narrower than the decoder (word_embed_proj_dim).
#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct OptConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, ffn_dim = 0, num_layers = 0;
  int64_t max_position_embeddings = 0, word_embed_proj_dim = 0;
  bool do_layer_norm_before = true, final_layer_norm = true;
  bool enable_bias = true, layer_norm_affine = true, tie_word_embeddings = true;
  graph::Activation act = graph::Activation::Relu;
  AttentionSpec attention;
};

// OPTLearnedPositionalEmbedding looks up position + 2.
constexpr int64_t kPositionOffset = 2;
// OPT's nn.LayerNorm keeps torch's default eps.
constexpr float kLayerNormEps = 1e-5f;

class OptModel : public Decoder {
 public:
  OptModel(const Checkpoint& ckpt, OptConfig cfg, const ModelOptions& opts) : cfg_(std::move(cfg)) {
    Weights w(ckpt, opts.dtype, !opts.dequantize_fp8);
    const int64_t h = cfg_.hidden_size, proj = cfg_.word_embed_proj_dim, ffn = cfg_.ffn_dim;
    const bool bias = cfg_.enable_bias;
    const std::string d =
        base_model_prefix(ckpt, "model.", "decoder.embed_tokens.weight") + "decoder.";
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

 protected:
  // OPTDecoder: project_in(embed_tokens(ids)) + embed_positions(positions + 2).
  graph::Value embed(graph::Builder& g, const StepInputs& in) const override {
    graph::Value x = Decoder::embed(g, in);
    if (project_in_.defined()) x = blocks::linear(g, x, project_in_);
    return g.add(x, g.embedding(g.weight(positions_), in.positions, kPositionOffset));
  }

  // OPTDecoderLayer: pre-norm x + attn(ln(x)), or post-norm ln(x + attn(x)); the same around
  // the MLP.
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs&) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = cat("layer.", i, ".");
    const bool pre = cfg_.do_layer_norm_before;
    auto ln = [&](graph::Value v, const Norm& n, const std::string& name) {
      return g.name(blocks::norm(g, v, n), p + name);
    };
    graph::Value a = pre ? ln(x, l.attn_norm, "attn_norm") : x;
    x = g.add(x, blocks::self_attention(g, a, l.attn, cfg_.attention,
                                        {.rope_tables = {}, .layer = i}, p));
    if (!pre) x = ln(x, l.attn_norm, "attn_norm");
    graph::Value m = pre ? ln(x, l.mlp_norm, "mlp_norm") : x;
    x = g.add(x, blocks::gated_mlp(g, m, l.mlp, cfg_.act, p));
    return pre ? x : ln(x, l.mlp_norm, "mlp_norm");
  }

  // OPTDecoder: final_layer_norm, then project_out.
  graph::Value final_norm(graph::Builder& g, graph::Value x) const override {
    if (cfg_.final_layer_norm) x = blocks::norm(g, x, final_norm_);
    return project_out_.defined() ? blocks::linear(g, x, project_out_) : x;
  }

 private:
  // layer_norm_elementwise_affine false: LayerNorm without weight or bias.
  Norm norm(Weights& w, const std::string& prefix) const {
    const bool affine = cfg_.layer_norm_affine;
    return Norm::layer(kLayerNormEps, {.weight = affine, .bias = affine})
        .load(w, prefix, cfg_.hidden_size);
  }

  struct Layer {
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  OptConfig cfg_;
  Tensor positions_, project_in_, project_out_;
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
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"ffn_dim", c.ffn_dim},
                  {"num_hidden_layers", c.num_layers},
                  {"word_embed_proj_dim", c.word_embed_proj_dim},
                  {"max_position_embeddings", c.max_position_embeddings}});
  return std::make_unique<OptModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
