// Lfm2ForCausalLM: transformers/models/lfm2 (Lfm2Config in configuration_lfm2.py, Lfm2Model in
// modeling_lfm2.py). Short gated convolution layers (Lfm2ShortConv) beside full-attention
// layers with per-head q/k RMSNorms, each followed by a SwiGLU feed-forward whose size
// Lfm2MLP adjusts (block_auto_adjust_ff_dim); the final norm is named embedding_norm.
// Lfm2MoeForCausalLM (transformers/models/lfm2_moe) is the same decoder with a mixture of
// experts past the first num_dense_layers layers (Lfm2MoeSparseMoeBlock).
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/moe.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct Lfm2Config {
  LlamaFamilyConfig base;        // attention, rotary, sizes (intermediate_size as adjusted)
  std::vector<bool> layer_conv;  // layer_types[i] == "conv"
  int64_t conv_kernel = 3;       // conv_L_cache
  bool conv_bias = false;
  std::optional<MoeSpec> moe;  // Lfm2Moe: the experts of the layers marked in layer_moe
  std::vector<bool> layer_moe;
};

// Lfm2MoeSparseMoeBlock's tensors as checkpoints publish them: gate (the router), expert_bias,
// experts.<e>.w1 / w3 / w2 (gate, up, down).
const MoeNames kLfm2MoeNames{.router = "gate.weight",
                             .experts = "experts.",
                             .gate = "w1",
                             .up = "w3",
                             .down = "w2",
                             .correction_bias = "expert_bias"};

struct ShortConvWeights {
  Tensor in, in_bias, conv, conv_bias, out, out_bias;
};

// a * b elementwise, exactly, from the ops the graph has: relu(a) b + relu(-a) (-b). For each
// element one of the two products is zero and the other is a * b (negation is exact).
graph::Value product(graph::Builder& g, graph::Value a, graph::Value b) {
  const graph::Value pos = g.act_mul(graph::Activation::Relu, a, b);
  const graph::Value neg = g.act_mul(graph::Activation::Relu, g.scale(a, -1), g.scale(b, -1));
  return g.add(pos, neg);
}

// Lfm2ShortConv: in_proj to B, C, x (chunks of hidden_size); B * x through the depthwise
// causal convolution (its last conv_L_cache - 1 inputs kept as the layer's state); C * conv
// through out_proj. C * conv is named "<prefix>attn", the mixer's output before its
// projection as in the attention blocks.
graph::Value short_conv(graph::Builder& g, graph::Value x, const ShortConvWeights& w,
                        int64_t hidden, int64_t layer, const std::string& prefix) {
  const graph::Value bcx = blocks::linear(g, x, w.in, w.in_bias);
  const graph::Value b = g.slice(bcx, 0, hidden), c = g.slice(bcx, hidden, hidden),
                     v = g.slice(bcx, 2 * hidden, hidden);
  graph::Value y = g.causal_conv(product(g, b, v), g.weight(w.conv), g.weight(w.conv_bias),
                                 {.layer = layer, .slot = 0});
  return blocks::linear(g, g.name(product(g, c, y), prefix + "attn"), w.out, w.out_bias);
}

// Lfm2DecoderLayer: x + operator(operator_norm(x)), then x + feed_forward(ffn_norm(x)), the
// operator being Lfm2Attention or Lfm2ShortConv.
class Lfm2Model : public Decoder {
 public:
  Lfm2Model(const Checkpoint& ckpt, Lfm2Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const LlamaFamilyConfig& c = cfg_.base;
    ropes_.emplace_back(c.rope);
    const int64_t h = c.hidden_size;
    // Lfm2Attention's q/k norms are q_layernorm / k_layernorm, its output projection out_proj.
    AttentionSpec load_spec = c.attention;
    load_spec.qk_norm = QkNorm::None;
    const Norm rms = final_norm_ = rms_norm_of(c);
    load(ckpt, opts, c,
         [&](Weights& w, int64_t i, const std::string& p) {
           Layer l;
           l.operator_norm = rms.load(w, p + "operator_norm.", h);
           if (cfg_.layer_conv[static_cast<size_t>(i)]) {
             const std::string q = p + "conv.";
             ShortConvWeights& s = l.conv;
             s.in = w.matrix(q + "in_proj.weight", {3 * h, h});
             s.conv = w.vector(q + "conv.weight", {h, 1, cfg_.conv_kernel});
             s.out = w.matrix(q + "out_proj.weight", {h, h});
             if (cfg_.conv_bias) {
               s.in_bias = w.vector(q + "in_proj.bias", {3 * h});
               s.conv_bias = w.vector(q + "conv.bias", {h});
               s.out_bias = w.vector(q + "out_proj.bias", {h});
             }
           } else {
             const std::string q = p + "self_attn.";
             l.attn = load_attention(w, q, load_spec, "out_proj");
             l.attn.q_norm = w.vector(q + "q_layernorm.weight", {c.attention.head_dim});
             l.attn.k_norm = w.vector(q + "k_layernorm.weight", {c.attention.head_dim});
           }
           l.ffn_norm = rms.load(w, p + "ffn_norm.", h);
           if (cfg_.moe && cfg_.layer_moe[static_cast<size_t>(i)])
             l.moe = load_moe(w, p + "feed_forward.", h, *cfg_.moe, kLfm2MoeNames);
           else
             // Lfm2MLP: w2(silu(w1(x)) * w3(x)).
             l.mlp = {.gate = w.matrix(p + "feed_forward.w1.weight", {c.intermediate_size, h}),
                      .up = w.matrix(p + "feed_forward.w3.weight", {c.intermediate_size, h}),
                      .down = w.matrix(p + "feed_forward.w2.weight", {h, c.intermediate_size})};
           layers_.push_back(std::move(l));
         },
         {.final_norm = "model.embedding_norm."});
  }

  std::vector<LayerStateSpec> layer_states() const override {
    std::vector<LayerStateSpec> out =
        blocks::kv_layer_states(cfg_.base.attention, cfg_.base.layer_windows);
    for (size_t i = 0; i < out.size(); ++i)
      if (cfg_.layer_conv[i])
        out[i] = {.kind = StateKind::Recurrent,
                  .recurrent = {{cfg_.conv_kernel - 1, cfg_.base.hidden_size}}};
    return out;
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.operator_norm), p + "attn_norm");
    a = cfg_.layer_conv[static_cast<size_t>(i)]
            ? short_conv(g, a, l.conv, cfg_.base.hidden_size, i, p)
            : blocks::self_attention(g, a, l.attn, cfg_.base.attention,
                                     {.rope_tables = in.rope_tables[0], .layer = i}, p);
    x = g.add(x, a);
    graph::Value m = g.name(blocks::norm(g, x, l.ffn_norm), p + "mlp_norm");
    return g.add(x, l.moe ? blocks::moe(g, m, *l.moe, *cfg_.moe, p)
                          : blocks::gated_mlp(g, m, l.mlp, graph::Activation::Silu, p));
  }

  // Lfm2Model.embedding_norm, applied after the last layer.
 private:
  struct Layer {
    Norm operator_norm, ffn_norm;
    ShortConvWeights conv;  // conv layers
    AttentionWeights attn;  // full-attention layers
    GatedMlpWeights mlp;
    std::optional<MoeWeights> moe;  // instead of mlp on the layers that run experts
  };
  Lfm2Config cfg_;
  std::vector<Layer> layers_;
};

// Lfm2Config.__post_init__: layer_types, else "full_attention" on full_attn_idxs (default:
// every layer) and "conv" elsewhere. Lfm2DecoderLayer runs attention on any type but "conv",
// and Lfm2Model masks only "full_attention" and "conv" layers, so others are errors.
std::vector<bool> read_layer_conv(const JsonFields& f, int64_t n) {
  std::vector<bool> conv(static_cast<size_t>(n), false);
  if (f.has("layer_types")) {
    const Json& types = f.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != n)
      fail(f.origin(), ": field \"layer_types\" must list ", n, " layer types");
    for (int64_t i = 0; i < n; ++i) {
      if (types[i] != "conv" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements conv and full_attention");
      conv[static_cast<size_t>(i)] = types[i] == "conv";
    }
  } else if (f.has("full_attn_idxs")) {
    const Json& idxs = f.at("full_attn_idxs");
    if (!idxs.is_array()) fail(f.origin(), ": field \"full_attn_idxs\" must be a list");
    conv.assign(static_cast<size_t>(n), true);
    for (const Json& j : idxs) {
      if (!j.is_number_integer())
        fail(f.origin(), ": field \"full_attn_idxs\" holds ", j.dump(), ", not a layer index");
      const int64_t i = j.get<int64_t>();
      if (i >= 0 && i < n) conv[static_cast<size_t>(i)] = false;  // others name no layer
    }
  }
  return conv;
}

Lfm2Config read_lfm2_config(const Checkpoint& ckpt, const JsonFields& f,
                            const LlamaFamilyDefaults& d, std::vector<bool> layer_conv) {
  Lfm2Config c;
  c.base = read_llama_family_config(ckpt, f, d);
  LlamaFamilyConfig& b = c.base;
  // norm_eps (not rms_norm_eps) for every norm; tie_embedding overrides tie_word_embeddings.
  b.rms_norm_eps = b.attention.norm_eps = static_cast<float>(f.get_or<double>("norm_eps", 1e-5));
  b.tie_word_embeddings = f.get_or<bool>("tie_embedding", b.tie_word_embeddings);
  b.attention.qk_norm = QkNorm::RmsPerHead;
  c.layer_conv = std::move(layer_conv);
  c.conv_kernel = f.get_or<int64_t>("conv_L_cache", 3);
  c.conv_bias = f.get_or<bool>("conv_bias", false);
  if (c.conv_kernel < 1 || c.conv_kernel > 65)
    fail(f.origin(), ": field \"conv_L_cache\" is ", c.conv_kernel,
         "; lathe implements convolutions of 1 to 65 taps");
  return c;
}

// Lfm2MLP's size: int(2 * size / 3), then int(block_ffn_dim_multiplier * size) rounded up to
// block_multiple_of, when block_auto_adjust_ff_dim (the multiplier null: no rounding either).
int64_t read_lfm2_ff_dim(const JsonFields& f, int64_t size) {
  if (!f.get_or<bool>("block_auto_adjust_ff_dim", true)) return size;
  size = static_cast<int64_t>(2.0 * static_cast<double>(size) / 3.0);
  const bool multiplied =
      !f.json().contains("block_ffn_dim_multiplier") || f.has("block_ffn_dim_multiplier");
  if (!multiplied) return size;
  const double multiplier = f.get_or<double>("block_ffn_dim_multiplier", 1.0);
  const int64_t multiple = f.get_or<int64_t>("block_multiple_of", 256);
  check_sizes(f, {{"block_multiple_of", multiple}});
  size = static_cast<int64_t>(multiplier * static_cast<double>(size));
  size = multiple * ((size + multiple - 1) / multiple);
  if (size <= 0 || size > (int64_t{1} << 31))
    fail(f.origin(),
         ": the feed-forward size from intermediate_size, block_ffn_dim_multiplier "
         "and block_multiple_of is ",
         size, ", out of range");
  return size;
}

}  // namespace

std::unique_ptr<Model> load_lfm2(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Lfm2Config defaults; Lfm2MLP always runs silu (hidden_act is not read).
  const LlamaFamilyDefaults d{.vocab_size = 65536,
                              .hidden_size = 2560,
                              .intermediate_size = 12288,
                              .kv_heads = 8,
                              .max_position_embeddings = 128000,
                              .tie_word_embeddings = true,
                              .hidden_act = nullptr,
                              .rope_theta = 1e6,
                              .rms_norm_eps = 1e-5};
  const int64_t n = f.get_or<int64_t>("num_hidden_layers", d.num_layers);
  check_sizes(f, {{"num_hidden_layers", n}});
  Lfm2Config c = read_lfm2_config(ckpt, f, d, read_layer_conv(f, n));
  // Lfm2Config.__post_init__: block_ff_dim overrides intermediate_size.
  const int64_t size = f.get_or<int64_t>("block_ff_dim", c.base.intermediate_size);
  check_sizes(f, {{"block_ff_dim", size}});
  c.base.intermediate_size = read_lfm2_ff_dim(f, size);
  return std::make_unique<Lfm2Model>(ckpt, std::move(c), opts);
}

std::unique_ptr<Model> load_lfm2_moe(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Lfm2MoeConfig defaults. Its layer_types has none (Lfm2MoeDecoderLayer indexes it), and its
  // dense layers use intermediate_size as it is.
  const LlamaFamilyDefaults d{.vocab_size = 65536,
                              .hidden_size = 2048,
                              .intermediate_size = 7168,
                              .kv_heads = 8,
                              .max_position_embeddings = 128000,
                              .tie_word_embeddings = true,
                              .hidden_act = nullptr,
                              .rope_theta = 1e6,
                              .rms_norm_eps = 1e-5};
  const int64_t n = f.get_or<int64_t>("num_hidden_layers", d.num_layers);
  check_sizes(f, {{"num_hidden_layers", n}});
  if (!f.has("layer_types"))
    fail(f.origin(), ": field \"layer_types\" is missing; Lfm2MoeConfig has no default for it");
  Lfm2Config c = read_lfm2_config(ckpt, f, d, read_layer_conv(f, n));
  // Lfm2MoeTopKRouter: sigmoid scores, the top num_experts_per_tok of score + expert_bias
  // (use_expert_bias) in torch.topk's sorted order, weighted by the scores, divided by (their
  // sum + 1e-6) when norm_topk_prob, times routed_scaling_factor.
  c.moe = MoeSpec{.experts = f.get_or<int64_t>("num_experts", 32),
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 4),
                  .inter = f.get_or<int64_t>("moe_intermediate_size", 1792),
                  .routing = graph::Routing::SigmoidTopK,
                  .norm_topk = f.get_or<bool>("norm_topk_prob", true),
                  .norm_eps = 1e-6f,
                  .scale = static_cast<float>(f.get_or<double>("routed_scaling_factor", 1.0)),
                  .correction_bias = f.get_or<bool>("use_expert_bias", true)};
  check_moe_spec(ckpt, f, *c.moe);
  const int64_t dense = f.get_or<int64_t>("num_dense_layers", 2);
  if (dense < 0) fail(f.origin(), ": field \"num_dense_layers\" is ", dense, ", out of range");
  for (int64_t i = 0; i < n; ++i) c.layer_moe.push_back(i >= dense);
  return std::make_unique<Lfm2Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
