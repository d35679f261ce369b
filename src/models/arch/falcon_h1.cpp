// FalconH1ForCausalLM: transformers/models/falcon_h1 (FalconH1Config in
// configuration_falcon_h1.py, FalconH1Model in modeling_falcon_h1.py). Each layer runs a Mamba2
// mixer and rotary attention side by side on the same normed input, their outputs summed into
// the residual, then a SwiGLU feed-forward; muP multipliers scale the embeddings, the logits,
// the mixer's input and in_proj sections, the keys, both branches' inputs and outputs, and the
// MLP's gate and output. A layer keeps both kinds of state: its attention's keys and values in
// cache layer 2i, its mixer's convolution and SSM state in cache layer 2i + 1.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/mamba2_mixer.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct FalconH1Config {
  LlamaFamilyConfig base;  // attention, rotary, sizes, embedding multiplier
  Mamba2MixerSpec mamba;
  float lm_head_multiplier = 1, attention_in = 1, attention_out = 1, ssm_out = 1;
  float mlp_gate = 1, mlp_down = 1;  // mlp_multipliers
};

// FalconH1DecoderLayer: x + mamba(n) * ssm_out_multiplier +
// attn(n * attention_in_multiplier) * attention_out_multiplier with n = input_layernorm(x),
// then x + feed_forward(pre_ff_layernorm(x)).
class FalconH1Model : public Decoder {
 public:
  FalconH1Model(const Checkpoint& ckpt, FalconH1Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const LlamaFamilyConfig& c = cfg_.base;
    ropes_.emplace_back(c.rope);
    embed_scale_ = c.embed_multiplier;
    const int64_t h = c.hidden_size;
    const Norm rms = final_norm_ = rms_norm_of(c);
    load(ckpt, opts, c,
         [&](Weights& w, int64_t, const std::string& p) {
           layers_.push_back({.attn_norm = rms.load(w, p + "input_layernorm.", h),
                              .mlp_norm = rms.load(w, p + "pre_ff_layernorm.", h),
                              .mamba = load_mamba2_mixer(w, p + "mamba.", cfg_.mamba),
                              .attn = load_attention(w, p + "self_attn.", c.attention),
                              .mlp = load_gated_mlp(w, p + "feed_forward.", h, c.intermediate_size,
                                                    {.bias = c.mlp_bias})});
         },
         {.final_norm = "model.final_layernorm."});
  }

  std::vector<LayerStateSpec> layer_states() const override {
    const std::vector<LayerStateSpec> kv =
        blocks::kv_layer_states(cfg_.base.attention, cfg_.base.layer_windows);
    std::vector<LayerStateSpec> out;
    for (const LayerStateSpec& s : kv) {
      out.push_back(s);
      out.push_back(mamba2_mixer_state(cfg_.mamba));
    }
    return out;
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const FalconH1Config& c = cfg_;
    const std::string p = layer_prefix(i);
    const graph::Value n = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    // The mixer's nodes go under "<prefix>mamba.", the layer's attention under its usual names.
    const graph::Value mamba =
        scaled(g, blocks::mamba2_mixer(g, n, l.mamba, c.mamba, 2 * i + 1, p + "mamba."), c.ssm_out);
    const graph::Value attn =
        scaled(g,
               blocks::self_attention(g, scaled(g, n, c.attention_in), l.attn, c.base.attention,
                                      {.rope_tables = in.rope_tables[0], .layer = 2 * i}, p),
               c.attention_out);
    x = g.add(x, g.add(mamba, attn));
    const graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, g.name(mlp(g, m, l.mlp), p + "mlp_out"));
  }

  // FalconH1ForCausalLM: lm_head(x) * lm_head_multiplier.
  graph::Value head(graph::Builder& g, graph::Value x) const override {
    return scaled(g, Decoder::head(g, x), cfg_.lm_head_multiplier);
  }

 private:
  static graph::Value scaled(graph::Builder& g, graph::Value v, float f) {
    return f != 1 ? g.scale(v, f) : v;
  }
  // FalconH1MLP: down(up(x) * act(gate(x) * gate_multiplier)) * down_multiplier.
  graph::Value mlp(graph::Builder& g, graph::Value x, const GatedMlpWeights& w) const {
    const graph::Value gate = scaled(g, blocks::linear(g, x, w.gate, w.gate_bias), cfg_.mlp_gate);
    const graph::Value up = blocks::linear(g, x, w.up, w.up_bias);
    return scaled(g, blocks::linear(g, g.act_mul(cfg_.base.mlp_act, gate, up), w.down, w.down_bias),
                  cfg_.mlp_down);
  }

  struct Layer {
    Norm attn_norm, mlp_norm;
    Mamba2MixerWeights mamba;
    AttentionWeights attn;
    GatedMlpWeights mlp;
  };
  FalconH1Config cfg_;
  std::vector<Layer> layers_;
};

// A list field of `n` numbers (mlp_multipliers, ssm_multipliers), or ones when absent or null.
std::vector<float> read_multipliers(const JsonFields& f, const char* field, size_t n) {
  if (!f.has(field)) return std::vector<float>(n, 1.0f);
  const Json& v = f.at(field);
  if (!v.is_array() || v.size() != n)
    fail(f.origin(), ": field \"", field, "\" must list ", n, " numbers, got ", v.dump());
  std::vector<float> out;
  for (const Json& j : v) {
    if (!j.is_number()) fail(f.origin(), ": field \"", field, "\" holds ", j.dump());
    out.push_back(j.get<float>());
  }
  return out;
}

}  // namespace

std::unique_ptr<Model> load_falcon_h1(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // FalconH1Config defaults.
  FalconH1Config c;
  c.base = read_llama_family_config(ckpt, f,
                                    {.vocab_size = 128000,
                                     .intermediate_size = 14336,
                                     .kv_heads = 8,
                                     .max_position_embeddings = 8192,
                                     .hidden_act = "silu",
                                     .rms_norm_eps = 1e-5});
  LlamaFamilyConfig& b = c.base;
  b.attention.qkv_bias = b.attention.o_bias = f.get_or<bool>("attention_bias", false);
  auto multiplier = [&](const char* field) {
    return static_cast<float>(f.get_or<double>(field, 1.0));
  };
  b.embed_multiplier = multiplier("embedding_multiplier");
  b.attention.key_scale = multiplier("key_multiplier");
  c.lm_head_multiplier = multiplier("lm_head_multiplier");
  c.attention_in = multiplier("attention_in_multiplier");
  c.attention_out = multiplier("attention_out_multiplier");
  c.ssm_out = multiplier("ssm_out_multiplier");
  const std::vector<float> mlp = read_multipliers(f, "mlp_multipliers", 2);
  c.mlp_gate = mlp[0];
  c.mlp_down = mlp[1];

  Mamba2MixerSpec& m = c.mamba;
  m.hidden = b.hidden_size;
  m.heads = f.get_or<int64_t>("mamba_n_heads", 128);
  m.n_groups = f.get_or<int64_t>("mamba_n_groups", 1);
  m.state_size = f.get_or<int64_t>("mamba_d_state", 256);
  m.conv_kernel = f.get_or<int64_t>("mamba_d_conv", 4);
  const int64_t expand = f.get_or<int64_t>("mamba_expand", 2);
  check_sizes(f, {{"mamba_expand", expand}, {"mamba_n_heads", m.heads}});
  // mamba_d_ssm (default 1024; null: mamba_expand * hidden_size) is the mixer's width.
  const bool explicit_null = f.json().contains("mamba_d_ssm") && !f.has("mamba_d_ssm");
  const int64_t inter =
      explicit_null ? expand * b.hidden_size : f.get_or<int64_t>("mamba_d_ssm", 1024);
  check_sizes(f, {{"mamba_d_ssm", inter}});
  const bool auto_head = !f.has("mamba_d_head") || f.at("mamba_d_head") == "auto";
  m.head_dim = auto_head ? inter / m.heads : f.get<int64_t>("mamba_d_head");
  if (m.head_dim * m.heads != inter)
    fail(f.origin(), ": mamba_d_head * mamba_n_heads (", m.head_dim * m.heads,
         ") must equal the mixer's width mamba_d_ssm (", inter, ")");
  m.eps = b.rms_norm_eps;
  m.in_bias = f.get_or<bool>("mamba_proj_bias", false);
  m.out_bias = f.get_or<bool>("projectors_bias", false);
  m.use_conv_bias = f.get_or<bool>("mamba_conv_bias", true);
  m.act = b.mlp_act;
  m.gated_norm = !f.get_or<bool>("mamba_rms_norm", false)         ? Mamba2GatedNorm::GateOnly
                 : f.get_or<bool>("mamba_norm_before_gate", true) ? Mamba2GatedNorm::NormThenGate
                                                                  : Mamba2GatedNorm::GateThenNorm;
  m.in_scale = multiplier("ssm_in_multiplier");
  const std::vector<float> ssm = read_multipliers(f, "ssm_multipliers", 5);
  std::copy(ssm.begin(), ssm.end(), m.section_scales.begin());
  check_mamba2_mixer_spec(
      f, m, {"mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv"});
  read_time_step_limit(f, m);
  return std::make_unique<FalconH1Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
