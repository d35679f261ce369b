// Llama4ForCausalLM: transformers/models/llama4 (configuration_llama4.py Llama4TextConfig,
// modeling_llama4.py Llama4TextModel), the text model of Llama4ForConditionalGeneration too.
// Llama's pre-norm block with:
//  - rotary layers (no_rope_layers[i] = 1) rotating interleaved pairs (apply_rotary_emb's complex
//    product), then the queries and keys L2-normed without a weight (use_qk_norm), attending
//    within chunks of attention_chunk_size positions (layer_types "chunked_attention");
//  - NoPE layers (no_rope_layers[i] = 0, every no_rope_layer_interval-th by default) with full
//    attention and queries scaled by position (attn_temperature_tuning, floor_scale,
//    attn_scale);
//  - feed-forwards that are a dense MLP of intermediate_size_mlp or, on moe_layers (every
//    interleave_moe_layer_step-th by default), Llama4TextMoe: a router whose top-k logits'
//    sigmoids scale each chosen expert's input, plus a shared expert of intermediate_size.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

// Llama4TextConfig's fields beyond the Llama family's.
struct Llama4Config {
  LlamaFamilyConfig base;        // sizes, attention, rope; layer_windows: the chunk of each layer
  int64_t dense_inter = 0;       // intermediate_size_mlp
  std::vector<bool> layer_rope;  // no_rope_layers
  bool qk_norm = true;           // use_qk_norm (on the rotary layers)
  std::optional<RopeConfig> temperature;  // attn_temperature_tuning (on the NoPE layers)
  MoeSpec moe;
  std::vector<bool> layer_moe;  // moe_layers
};

// Llama4TextExperts' tensors, multiplied as x @ W: gate_up_proj [experts, hidden, 2 * inter]
// (gate in the first inter columns, up in the rest, as gate_up.chunk(2, dim=-1)) and down_proj
// [experts, inter, hidden]; each expert's matrices transposed once into the [out, in] rows the
// Linear kernels take.
std::vector<GatedMlpWeights> load_experts(Weights& w, const std::string& p, int64_t hidden,
                                          const MoeSpec& s) {
  const Tensor gate_up = w.matrix(p + "gate_up_proj", {s.experts, hidden, 2 * s.inter});
  const Tensor down = w.matrix(p + "down_proj", {s.experts, s.inter, hidden});
  std::vector<GatedMlpWeights> experts;
  for (int64_t e = 0; e < s.experts; ++e) {
    const Tensor gu = transpose_matrix(gate_up.rows(e, 1).reshape({hidden, 2 * s.inter}));
    experts.push_back({.gate = matrix_rows(gu, 0, s.inter),
                       .up = matrix_rows(gu, s.inter, s.inter),
                       .down = transpose_matrix(down.rows(e, 1).reshape({s.inter, hidden}))});
  }
  return experts;
}

// transformers Llama4TextModel / Llama4TextDecoderLayer: x + attn(norm(x)), then
// x + feed_forward(norm(x)).
class Llama4Model : public Decoder {
 public:
  Llama4Model(const Checkpoint& ckpt, Llama4Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const LlamaFamilyConfig& c = cfg_.base;
    ropes_.emplace_back(c.rope);
    if (cfg_.temperature) ropes_.emplace_back(*cfg_.temperature);
    const int64_t h = c.hidden_size;
    // Llama4TextL2Norm is RMSNorm without a weight: a weight of ones (times 1 is exact).
    unit_norm_ = Tensor::zeros(DType::F32, {c.attention.head_dim});
    for (int64_t d = 0; d < c.attention.head_dim; ++d) unit_norm_.mut<float>()[d] = 1.0f;
    const Norm rms = final_norm_ = rms_norm_of(c);
    load(ckpt, opts, c, [&](Weights& w, int64_t i, const std::string& p) {
      Layer l;
      l.attn_norm = rms.load(w, p + "input_layernorm.", h);
      l.attn = load_attention(w, p + "self_attn.", c.attention);
      l.mlp_norm = rms.load(w, p + "post_attention_layernorm.", h);
      if (cfg_.layer_moe.at(i)) {
        const std::string f = p + "feed_forward.";
        MoeWeights m;
        m.router = w.matrix(f + "router.weight", {cfg_.moe.experts, h});
        m.experts = load_experts(w, f + "experts.", h, cfg_.moe);
        m.shared = load_gated_mlp(w, f + "shared_expert.", h, cfg_.moe.shared_inter);
        l.moe = std::move(m);
      } else {
        l.mlp = load_gated_mlp(w, p + "feed_forward.", h, cfg_.dense_inter);
      }
      layers_.push_back(std::move(l));
    });
  }

  // Chunked layers keep a ring of their chunk (transformers' DynamicSlidingWindowLayer of
  // attention_chunk_size), the others every position.
  std::vector<LayerStateSpec> layer_states() const override {
    return blocks::kv_layer_states(cfg_.base.attention, cfg_.base.layer_windows);
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    x = g.add(x, attention(g, i, a, l.attn, in, p));
    graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, l.moe ? blocks::moe(g, m, *l.moe, cfg_.moe, p)
                          : blocks::gated_mlp(g, m, l.mlp, cfg_.base.mlp_act, p));
  }

 private:
  // Llama4TextAttention: rotary then the L2 q/k norm on rotary layers, the temperature on NoPE
  // ones (the queries times their position's scale: a schedule that rotates nothing), then
  // chunked or full causal attention.
  graph::Value attention(graph::Builder& g, int64_t i, graph::Value x, const AttentionWeights& w,
                         const LayerInputs& in, const std::string& p) const {
    const AttentionSpec& s = cfg_.base.attention;
    const int64_t n = g.dim(x, 0);
    graph::Value q = g.reshape(blocks::linear(g, x, w.q, w.q_bias), {n, s.heads, s.head_dim});
    graph::Value k = g.reshape(blocks::linear(g, x, w.k, w.k_bias), {n, s.kv_heads, s.head_dim});
    graph::Value v = g.reshape(blocks::linear(g, x, w.v, w.v_bias), {n, s.kv_heads, s.head_dim});
    if (cfg_.layer_rope.at(i)) {
      q = g.rope(q, in.rope_tables[0], graph::RopeLayout::Interleaved);
      k = g.rope(k, in.rope_tables[0], graph::RopeLayout::Interleaved);
      if (cfg_.qk_norm) {
        q = blocks::rms_norm(g, q, unit_norm_, cfg_.base.rms_norm_eps);
        k = blocks::rms_norm(g, k, unit_norm_, cfg_.base.rms_norm_eps);
      }
    } else if (cfg_.temperature) {
      q = g.rope(q, in.rope_tables[1], graph::RopeLayout::Interleaved);
    }
    g.name(q, p + "q");
    g.name(k, p + "k");
    g.name(v, p + "v");
    graph::Value out = g.attention(q, k, v,
                                   {.layer = i,
                                    .scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim)),
                                    .chunk = cfg_.base.layer_windows.at(i)});
    g.name(out, p + "attn");
    out = blocks::linear(g, g.reshape(out, {n, s.heads * s.head_dim}), w.o, w.o_bias);
    return g.name(out, p + "attn_out");
  }

  struct Layer {
    Norm attn_norm, mlp_norm;
    AttentionWeights attn;
    GatedMlpWeights mlp;
    std::optional<MoeWeights> moe;  // instead of mlp on moe_layers
  };
  Llama4Config cfg_;
  Tensor unit_norm_;
  std::vector<Layer> layers_;
};

// A per-layer list of config.json (no_rope_layers, moe_layers), checked.
std::vector<int64_t> read_layer_list(const JsonFields& f, const char* field) {
  const Json& list = f.at(field);
  if (!list.is_array()) fail(f.origin(), ": field \"", field, "\" must be a list of integers");
  std::vector<int64_t> out;
  for (const Json& v : list) {
    if (!v.is_number_integer())
      fail(f.origin(), ": field \"", field, "\" holds ", v.dump(), ", not an integer");
    out.push_back(v.get<int64_t>());
  }
  return out;
}

}  // namespace

std::unique_ptr<Model> load_llama4(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Llama4TextConfig defaults.
  Llama4Config c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 202048,
                                           .hidden_size = 5120,
                                           .intermediate_size = 8192,
                                           .num_layers = 48,
                                           .heads = 40,
                                           .kv_heads = 8,
                                           .head_dim = 128,
                                           .max_position_embeddings = 131072,
                                           .rope_theta = 500000.0,
                                           .rms_norm_eps = 1e-5});
  LlamaFamilyConfig& b = c.base;
  JsonFields f(ckpt.config(), ckpt.config_path());
  const int64_t layers = b.num_layers;
  AttentionSpec& a = b.attention;
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  if (a.head_dim % 2 != 0)
    fail(f.origin(), ": field \"head_dim\" is ", a.head_dim,
         "; Llama 4's rotary pairs the head's dims, so it must be even");
  rotate_whole_head(b.rope, f.origin(), b.architecture);  // apply_rotary_emb rotates it all
  c.dense_inter = f.get_or<int64_t>("intermediate_size_mlp", 16384);
  check_sizes(f, {{"intermediate_size_mlp", c.dense_inter}});
  c.qk_norm = f.get_or<bool>("use_qk_norm", true);

  // Llama4TextConfig.__post_init__: no_rope_layers (1: rotary) when given and not empty, else
  // a NoPE layer every no_rope_layer_interval-th.
  std::vector<int64_t> rope;
  if (f.has("no_rope_layers")) rope = read_layer_list(f, "no_rope_layers");
  if (rope.empty()) {
    const int64_t interval = f.get_or<int64_t>("no_rope_layer_interval", 4);
    if (interval <= 0)
      fail(f.origin(), ": field \"no_rope_layer_interval\" is ", interval, ", must be positive");
    for (int64_t i = 0; i < layers; ++i) rope.push_back((i + 1) % interval != 0 ? 1 : 0);
  }
  if (static_cast<int64_t>(rope.size()) < layers)
    fail(f.origin(), ": field \"no_rope_layers\" lists ", rope.size(), " layers of ", layers);
  for (int64_t i = 0; i < layers; ++i) c.layer_rope.push_back(rope[static_cast<size_t>(i)] != 0);

  // layer_types: given, or "chunked_attention" on the rotary layers when attention_chunk_size
  // is set (not null), else "full_attention". Chunked layers keep their chunk in layer_windows.
  int64_t chunk = 0;
  if (f.has("attention_chunk_size")) {
    chunk = f.get<int64_t>("attention_chunk_size");
    check_sizes(f, {{"attention_chunk_size", chunk}});
  } else if (!f.json().contains("attention_chunk_size")) {
    chunk = 8192;
  }
  for (int64_t i = 0; i < layers; ++i) {
    bool chunked = c.layer_rope[static_cast<size_t>(i)] && chunk > 0;
    if (f.has("layer_types")) {
      const Json& types = f.at("layer_types");
      if (!types.is_array() || static_cast<int64_t>(types.size()) != layers)
        fail(f.origin(), ": field \"layer_types\" must list ", layers, " layer types");
      if (types[i] != "chunked_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements chunked_attention and full_attention");
      chunked = types[i] == "chunked_attention";
      if (chunked && chunk == 0)
        fail(f.origin(), ": layer ", i,
             " is chunked_attention but field \"attention_chunk_size\" is null");
    }
    b.layer_windows[static_cast<size_t>(i)] = chunked ? chunk : 0;
  }

  // attn_temperature_tuning: the NoPE layers' queries times
  // log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1.
  const bool nope =
      std::find(c.layer_rope.begin(), c.layer_rope.end(), false) != c.layer_rope.end();
  // Early Llama 4 configs say 4 (an int; the modeling code only tests it for truth).
  bool tuning = true;
  if (f.has("attn_temperature_tuning")) {
    const Json& t = f.at("attn_temperature_tuning");
    if (!t.is_boolean() && !t.is_number())
      fail(f.origin(), ": field \"attn_temperature_tuning\" is ", t.dump(), ", not a boolean");
    tuning = t.is_boolean() ? t.get<bool>() : t.get<double>() != 0;
  }
  if (tuning && nope) {
    const int64_t floor_scale = f.get_or<int64_t>("floor_scale", 8192);
    check_sizes(f, {{"floor_scale", floor_scale}});
    RopeConfig t;  // rotates no pair: cos 1 and sin 0, times the scale
    t.kind = RopeKind::Proportional;
    t.head_dim = t.rot_dim = a.head_dim;
    t.rotated_pairs = 0;
    t.temperature_attn_scale = f.get_or<double>("attn_scale", 0.1);
    t.temperature_floor_scale = floor_scale;
    if (t.temperature_attn_scale != 0) c.temperature = t;
  }

  // Llama4TextMoe on moe_layers (else every interleave_moe_layer_step-th layer, from
  // step - 1): num_local_experts experts of intermediate_size, top num_experts_per_tok by
  // logit, each weighted by its sigmoid on its input, beside a shared expert of the same size.
  c.moe = MoeSpec{.experts = f.get_or<int64_t>("num_local_experts", 16),
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 1),
                  .inter = b.intermediate_size,
                  .routing = graph::Routing::TopKSigmoid,
                  .act = b.mlp_act,
                  .shared_inter = b.intermediate_size,
                  .scale_inputs = true};
  check_moe_spec(ckpt, f, c.moe, {"num_local_experts", "num_experts_per_tok", "intermediate_size"});
  c.layer_moe.assign(static_cast<size_t>(layers), false);
  if (f.has("moe_layers")) {
    for (int64_t l : read_layer_list(f, "moe_layers")) {
      if (l < 0 || l >= layers)
        fail(f.origin(), ": field \"moe_layers\" holds ", l, ", not a layer of ", layers);
      c.layer_moe[static_cast<size_t>(l)] = true;
    }
  } else {
    const int64_t step = f.get_or<int64_t>("interleave_moe_layer_step", 1);
    if (step <= 0)
      fail(f.origin(), ": field \"interleave_moe_layer_step\" is ", step, ", must be positive");
    for (int64_t l = step - 1; l < layers; l += step) c.layer_moe[static_cast<size_t>(l)] = true;
  }
  return std::make_unique<Llama4Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
