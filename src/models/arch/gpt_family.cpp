#include "models/arch/gpt_family.h"

#include <cmath>

#include "core/error.h"
#include "models/decoder.h"

namespace lathe {
namespace {

class GptFamilyModel : public Decoder {
 public:
  GptFamilyModel(const Checkpoint& ckpt, GptFamilyConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const std::string base = base_model_prefix(ckpt, "transformer.", "wte.weight");
    const int64_t h = cfg_.hidden_size, inner = cfg_.inner_size;
    const AttentionSpec& s = cfg_.attention;
    const int64_t q_out = s.heads * s.head_dim, qkv_out = q_out + 2 * s.kv_heads * s.head_dim;
    const Norm ln = final_norm_ = Norm::layer(cfg_.layer_norm_eps);
    load(
        ckpt, opts, cfg_,
        [&](Weights& w, int64_t i, const std::string& p) {
          // Linear weights [out, in]; GPT-2's Conv1D stores them [in, out].
          const auto linear = [&](const std::string& name, int64_t in, int64_t out) {
            return cfg_.conv1d ? load_conv1d(w, name, in, out) : w.matrix(name, {out, in});
          };
          Layer l;
          l.spec = s;
          l.spec.scale = cfg_.layer_scale.at(i);
          l.attn_norm = ln.load(w, p + "ln_1.", h);
          const std::string qkv = p + "attn.c_attn.";
          FusedQkv m = split_fused_qkv(w, qkv + "weight", linear(qkv + "weight", h, qkv_out), s,
                                       cfg_.qkv_groups);
          FusedQkv b = split_fused_qkv(w, qkv + "bias", w.vector(qkv + "bias", {qkv_out}), s,
                                       cfg_.qkv_groups);
          l.attn.q = m.q, l.attn.k = m.k, l.attn.v = m.v;
          l.attn.q_bias = b.q, l.attn.k_bias = b.k, l.attn.v_bias = b.v;
          l.attn.o = linear(p + "attn.c_proj.weight", q_out, h);
          l.attn.o_bias = w.vector(p + "attn.c_proj.bias", {h});
          l.mlp_norm = ln.load(w, p + "ln_2.", h);
          l.mlp.up = linear(p + "mlp.c_fc.weight", h, inner);
          l.mlp.up_bias = w.vector(p + "mlp.c_fc.bias", {inner});
          l.mlp.down = linear(p + "mlp.c_proj.weight", inner, h);
          l.mlp.down_bias = w.vector(p + "mlp.c_proj.bias", {h});
          layers_.push_back(std::move(l));
        },
        {.embed = base + "wte.weight", .layers = base + "h.", .final_norm = base + "ln_f."},
        [&](Weights& w) {
          positions_ = w.matrix(base + "wpe.weight", {cfg_.max_position_embeddings, h});
          // The original GPT-2 checkpoints name the base model's tensors without "transformer."
          // and carry the causal-mask buffers attn.bias / attn.masked_bias, which transformers
          // ignores.
          w.ignore_if([](const std::string& n) {
            return n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias");
          });
        });
  }

 protected:
  // GPT2Model: wte(ids) + wpe(positions).
  graph::Value embed(graph::Builder& g, const StepInputs& in) const override {
    return g.add(Decoder::embed(g, in), g.embedding(g.weight(positions_), in.positions));
  }

  // GPT2Block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs&) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    x = g.add(x, blocks::self_attention(g, a, l.attn, l.spec, {.rope_tables = {}, .layer = i}, p));
    graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, blocks::gated_mlp(g, m, l.mlp, cfg_.act, p));
  }

 private:
  struct Layer {
    AttentionSpec spec;
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  GptFamilyConfig cfg_;
  Tensor positions_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> build_gpt_family(const Checkpoint& ckpt, const GptFamilyConfig& cfg,
                                        const ModelOptions& opts) {
  return std::make_unique<GptFamilyModel>(ckpt, cfg, opts);
}

GptFamilyConfig read_gpt_family_config(const Checkpoint& ckpt, const char* act) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  GptFamilyConfig c;
  c.architecture = ckpt.architecture();
  // GPT2Config / GPTBigCodeConfig defaults.
  c.vocab_size = f.get_or<int64_t>("vocab_size", 50257);
  c.hidden_size = read_int_alias(f, "n_embd", "hidden_size", 768);
  c.num_layers = read_int_alias(f, "n_layer", "num_hidden_layers", 12);
  c.max_position_embeddings = read_int_alias(f, "n_positions", "max_position_embeddings", 1024);
  c.inner_size = f.get_or<int64_t>("n_inner", 4 * c.hidden_size);  // null: 4 * n_embd
  c.layer_norm_eps = static_cast<float>(f.get_or<double>("layer_norm_epsilon", 1e-5));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", true);
  c.act = read_activation(f, "activation_function", act, c.architecture);
  if (f.get_or<bool>("add_cross_attention", false))
    fail(f.origin(), ": field \"add_cross_attention\" is true; lathe implements ", c.architecture,
         " as a decoder without cross-attention");

  AttentionSpec& a = c.attention;
  a.hidden = c.hidden_size;
  a.heads = read_int_alias(f, "n_head", "num_attention_heads", 12);
  if (a.heads <= 0 || c.hidden_size <= 0 || c.hidden_size % a.heads != 0)
    fail(f.origin(), ": n_embd ", c.hidden_size, " is not a positive multiple of n_head ", a.heads);
  a.kv_heads = a.heads;
  a.head_dim = c.hidden_size / a.heads;
  a.qkv_bias = a.o_bias = true;
  a.rope = false;
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"n_inner", c.inner_size},
                  {"n_layer", c.num_layers},
                  {"n_positions", c.max_position_embeddings}});
  // scale_attn_weights false: raw dot products (scale 1).
  const bool scaled = f.get_or<bool>("scale_attn_weights", true);
  const double scale = scaled ? 1.0 / std::sqrt(static_cast<double>(a.head_dim)) : 1.0;
  c.layer_scale.assign(static_cast<size_t>(c.num_layers), static_cast<float>(scale));
  return c;
}

}  // namespace lathe
