// GraniteMoeHybridForCausalLM: transformers/models/granitemoehybrid (GraniteMoeHybridConfig in
// configuration_granitemoehybrid.py, GraniteMoeHybridModel in modeling_granitemoehybrid.py).
// Granite's multipliers on a decoder whose layers are Mamba2 mixers or attention (layer_types,
// "mamba" the legacy name of "linear_attention"), each followed by a mixture of experts (top-k
// logits, softmax over those, experts in 3-D tensors) plus a shared SwiGLU MLP, or by the
// shared MLP alone when num_local_experts is 0. Rotary only with position_embedding_type "rope"
// (Granite 4.0-H's "nope": none).
#include "core/error.h"
#include "models/arch/granite.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/mamba2_mixer.h"
#include "models/moe.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct GraniteMoeHybridConfig {
  LlamaFamilyConfig base;         // attention, multipliers, rotary, sizes
  std::vector<bool> layer_mamba;  // layer_types[i] is a Mamba2 layer
  Mamba2MixerSpec mamba;
  int64_t shared_inter = 0;  // shared_intermediate_size
};

// GraniteMoeHybridDecoderLayer: x + mixer(input_layernorm(x)) * residual_multiplier, then
// x + (experts(m) + shared_mlp(m)) * residual_multiplier with m = post_attention_layernorm(x).
class GraniteMoeHybridModel : public Decoder {
 public:
  GraniteMoeHybridModel(const Checkpoint& ckpt, GraniteMoeHybridConfig cfg,
                        const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const LlamaFamilyConfig& c = cfg_.base;
    if (c.attention.rope) ropes_.emplace_back(c.rope);
    embed_scale_ = c.embed_multiplier;
    const int64_t h = c.hidden_size, si = cfg_.shared_inter;
    const Norm rms = final_norm_ = rms_norm_of(c);
    load(ckpt, opts, c, [&](Weights& w, int64_t i, const std::string& p) {
      Layer l;
      l.attn_norm = rms.load(w, p + "input_layernorm.", h);
      if (cfg_.layer_mamba[static_cast<size_t>(i)])
        l.mamba = load_mamba2_mixer(w, p + "mamba.", cfg_.mamba);
      else
        l.attn = load_attention(w, p + "self_attn.", c.attention);
      l.mlp_norm = rms.load(w, p + "post_attention_layernorm.", h);
      if (c.moe) l.moe = load_moe(w, p + "block_sparse_moe.", h, *c.moe, c.moe_names);
      // GraniteMoeHybridMLP: input_linear [2 * shared, hidden] (gate rows, then up rows).
      const Tensor in = w.matrix(p + "shared_mlp.input_linear.weight", {2 * si, h});
      l.shared = {.gate = matrix_rows(in, 0, si),
                  .up = matrix_rows(in, si, si),
                  .down = w.matrix(p + "shared_mlp.output_linear.weight", {h, si})};
      layers_.push_back(std::move(l));
    });
  }

  std::vector<LayerStateSpec> layer_states() const override {
    std::vector<LayerStateSpec> out =
        blocks::kv_layer_states(cfg_.base.attention, cfg_.base.layer_windows);
    for (size_t i = 0; i < out.size(); ++i)
      if (cfg_.layer_mamba[i]) out[i] = mamba2_mixer_state(cfg_.mamba);
    return out;
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const LlamaFamilyConfig& c = cfg_.base;
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    a = cfg_.layer_mamba[static_cast<size_t>(i)]
            ? blocks::mamba2_mixer(g, a, l.mamba, cfg_.mamba, i, p)
            : blocks::self_attention(
                  g, a, l.attn, c.attention,
                  {.rope_tables = c.attention.rope ? in.rope_tables[0] : graph::Value{},
                   .layer = i},
                  p);
    x = add_residual(g, x, a);
    const graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    // The experts' output alone is "<prefix>mlp_out", as transformers' block_sparse_moe.
    graph::Value f = blocks::feed_forward(g, m, l.shared, c.mlp_act);
    if (l.moe) f = g.add(blocks::moe(g, m, *l.moe, *c.moe, p), f);
    return add_residual(g, x, f);
  }

  // GraniteMoeHybridForCausalLM: logits / logits_scaling.
  graph::Value head(graph::Builder& g, graph::Value x) const override {
    const graph::Value logits = Decoder::head(g, x);
    return cfg_.base.logits_divisor != 1 ? g.divide(logits, cfg_.base.logits_divisor) : logits;
  }

 private:
  graph::Value add_residual(graph::Builder& g, graph::Value x, graph::Value branch) const {
    const float r = cfg_.base.residual_multiplier;
    return g.add(x, r != 1 ? g.scale(branch, r) : branch);
  }

  struct Layer {
    Norm attn_norm, mlp_norm;
    Mamba2MixerWeights mamba;  // Mamba2 layers
    AttentionWeights attn;     // attention layers
    std::optional<MoeWeights> moe;
    GatedMlpWeights shared;
  };
  GraniteMoeHybridConfig cfg_;
  std::vector<Layer> layers_;
};

// layer_types (or layers_block_type, its attribute name): "mamba" / "linear_attention" runs
// the Mamba2 mixer, anything else attention, as GraniteMoeHybridDecoderLayer decides; absent,
// every layer is a Mamba2 one (GraniteMoeHybridConfig.__post_init__). Types outside
// transformers' legacy names and the two it builds are errors.
std::vector<bool> read_layer_mamba(const JsonFields& f, int64_t n) {
  const char* field = f.has("layer_types") ? "layer_types" : "layers_block_type";
  if (!f.has(field)) return std::vector<bool>(static_cast<size_t>(n), true);
  const Json& types = f.at(field);
  if (!types.is_array() || static_cast<int64_t>(types.size()) != n)
    fail(f.origin(), ": field \"", field, "\" must list ", n, " layer types");
  std::vector<bool> mamba;
  for (int64_t i = 0; i < n; ++i) {
    const Json& t = types[i];
    const bool m = t == "mamba" || t == "linear_attention";
    if (!m && t != "attention" && t != "full_attention")
      fail(f.origin(), ": ", field, "[", i, "] is ", t.dump(),
           "; lathe implements mamba (linear_attention) and attention (full_attention)");
    mamba.push_back(m);
  }
  return mamba;
}

}  // namespace

std::unique_ptr<Model> load_granitemoehybrid(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // GraniteMoeHybridConfig defaults.
  GraniteMoeHybridConfig c;
  c.base = read_llama_family_config(ckpt, f, {});
  LlamaFamilyConfig& b = c.base;
  read_granite_multipliers(f, b);
  const Json pos = f.has("position_embedding_type") ? f.at("position_embedding_type") : Json();
  // GraniteMoeHybridModel builds rotary only for "rope"; Granite 4.0-H checkpoints say "nope".
  if (!pos.is_null() && pos != "rope" && pos != "nope")
    fail(f.origin(), ": field \"position_embedding_type\" is ", pos.dump(),
         "; GraniteMoeHybrid builds rotary for \"rope\" and none for \"nope\" or null");
  b.attention.rope = pos == "rope";
  c.layer_mamba = read_layer_mamba(f, b.num_layers);

  const int64_t experts = f.get_or<int64_t>("num_local_experts", 8);
  if (experts < 0) fail(f.origin(), ": field \"num_local_experts\" is ", experts, ", out of range");
  if (experts > 0) {
    b.moe = MoeSpec{.experts = experts,
                    .top_k = f.get_or<int64_t>("num_experts_per_tok", 2),
                    .inter = b.intermediate_size,
                    .routing = graph::Routing::TopKSoftmax,
                    .act = b.mlp_act};
    b.moe_names = {.router = "router.layer.weight",
                   .gate_up = "input_linear.weight",
                   .down_fused = "output_linear.weight"};
    check_moe_spec(ckpt, f, *b.moe,
                   {"num_local_experts", "num_experts_per_tok", "intermediate_size"});
  }
  c.shared_inter = f.get_or<int64_t>("shared_intermediate_size", 1024);
  check_sizes(f, {{"shared_intermediate_size", c.shared_inter}});

  Mamba2MixerSpec& m = c.mamba;
  m.hidden = b.hidden_size;
  m.heads = f.get_or<int64_t>("mamba_n_heads", 128);
  m.n_groups = f.get_or<int64_t>("mamba_n_groups", 1);
  m.state_size = f.get_or<int64_t>("mamba_d_state", 256);
  m.conv_kernel = f.get_or<int64_t>("mamba_d_conv", 4);
  const int64_t expand = f.get_or<int64_t>("mamba_expand", 2);
  check_sizes(f, {{"mamba_expand", expand}, {"mamba_n_heads", m.heads}});
  const int64_t inter = expand * b.hidden_size;
  // GraniteMoeHybridConfig: mamba_d_head "auto" is mamba_expand * hidden_size / mamba_n_heads.
  const bool auto_head = !f.has("mamba_d_head") || f.at("mamba_d_head") == "auto";
  m.head_dim = auto_head ? inter / m.heads : f.get<int64_t>("mamba_d_head");
  // GraniteMoeHybridConfig.validate_architecture.
  if (inter % m.heads != 0)
    fail(f.origin(), ": mamba_n_heads ", m.heads, " must divide mamba_expand * hidden_size (",
         inter, ")");
  if (m.head_dim * m.heads != inter)
    fail(f.origin(), ": mamba_d_head * mamba_n_heads (", m.head_dim * m.heads,
         ") must equal mamba_expand * hidden_size (", inter, ")");
  m.eps = b.rms_norm_eps;
  m.in_bias = m.out_bias = f.get_or<bool>("mamba_proj_bias", false);
  m.use_conv_bias = f.get_or<bool>("mamba_conv_bias", true);
  m.act = b.mlp_act;
  check_mamba2_mixer_spec(
      f, m, {"mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv"});
  read_time_step_limit(f, m);
  return std::make_unique<GraniteMoeHybridModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
