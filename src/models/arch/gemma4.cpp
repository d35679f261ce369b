// Gemma4ForCausalLM: transformers/models/gemma4 (Gemma4TextConfig in configuration_gemma4.py,
// Gemma4TextModel in modeling_gemma4.py). Gemma's scaled embedding and sandwich block, with
// RMSNorms that scale by the weight itself (not 1 + weight), attention unscaled (scaling 1.0)
// over q/k RMS-normed per head and values RMS-normed without a weight, sliding and full layers
// of their own head size and kv heads (global_head_dim, num_global_key_value_heads or
// per_layer_config), full layers' values equal to their keys' projection (attention_k_eq_v),
// "proportional" rotary on full layers, per-layer embeddings (PLE) added by a gated projection
// after each layer, a learned layer_scalar, the last num_kv_shared_layers layers reading the
// keys and values of the last earlier layer of their type instead of their own, and with
// enable_moe_block experts beside each layer's MLP. Gemma4ForConditionalGeneration's text model
// is the same model read from text_config.
#include <cmath>
#include <optional>

#include "core/error.h"
#include "models/arch/gemma_common.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/moe.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct Gemma4Layer : GemmaAttentionLayer {
  int64_t intermediate = 0;
  int rope = 0;  // index into Gemma4Config::ropes
};

struct Gemma4Config {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, heads = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = true;
  graph::Activation act = graph::Activation::GeluTanh;
  float final_softcap = 0;                         // 0: none
  int64_t per_layer_dim = 0, per_layer_vocab = 0;  // hidden_size_per_layer_input (0: no PLE)
  // enable_moe_block: beside every layer's MLP, num_experts experts of which the router picks
  // top_k_experts (softmax, top-k renormalised, times per_expert_scale).
  std::optional<MoeSpec> moe;
  std::vector<Gemma4Layer> layers;
  std::vector<RopeConfig> ropes;  // those of sliding_attention and full_attention layers
  // Gemma4ForConditionalGeneration: the language model's tensors sit under
  // model.language_model.; its vision and audio towers and their embedders are not loaded.
  std::string prefix = "model.";
  std::vector<std::string> ignored_prefixes;
};

// The layer types as Gemma4TextConfig.__post_init__ sets them: five sliding layers to one full
// by default, and the last layer always full.
std::vector<bool> read_sliding(const JsonFields& f, int64_t num_layers) {
  std::vector<bool> sliding(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) sliding[i] = (i + 1) % 6 != 0;
  if (f.has("layer_types")) {
    const Json& types = f.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != num_layers)
      fail(f.origin(), ": field \"layer_types\" must list ", num_layers, " layer types");
    for (int64_t i = 0; i < num_layers; ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements full_attention and sliding_attention");
      sliding[i] = types[i] == "sliding_attention";
    }
  }
  sliding.back() = false;  // "Last layer must use `full_attention`": transformers forces it
  return sliding;
}

// Each layer's head_dim and num_key_value_heads: per_layer_config where config.json has it,
// else full layers take global_head_dim (512) and, with attention_k_eq_v,
// num_global_key_value_heads.
void read_layer_heads(const JsonFields& f, Gemma4Config& c, int64_t head_dim, int64_t kv_heads,
                      bool k_eq_v) {
  for (Gemma4Layer& l : c.layers) {
    l.head_dim = head_dim;
    l.kv_heads = kv_heads;
  }
  if (f.has("per_layer_config")) {
    const Json& plc = f.at("per_layer_config");
    if (!plc.is_object()) fail(f.origin(), ": field \"per_layer_config\" must be an object");
    for (const auto& [key, overrides] : plc.items()) {
      int64_t i = -1;
      try {
        size_t used = 0;
        i = std::stoll(key, &used);
        if (used != key.size()) i = -1;
      } catch (const std::exception&) {
      }
      if (i < 0 || i >= c.num_layers || !overrides.is_object())
        fail(f.origin(), ": per_layer_config key \"", key,
             "\" must be a layer index below num_hidden_layers, holding an object");
      JsonFields o(overrides, f.origin() + ": per_layer_config." + key);
      for (const auto& [field, value] : overrides.items())
        if (field != "head_dim" && field != "num_key_value_heads")
          fail(o.origin(), ": field \"", field,
               "\" is overridden per layer; lathe implements head_dim and num_key_value_heads");
      c.layers[i].head_dim = o.get_or<int64_t>("head_dim", head_dim);
      c.layers[i].kv_heads = o.get_or<int64_t>("num_key_value_heads", kv_heads);
    }
    return;
  }
  const int64_t global_head_dim = f.get_or<int64_t>("global_head_dim", 512);
  const std::optional<int64_t> global_kv = f.get_optional<int64_t>("num_global_key_value_heads");
  for (Gemma4Layer& l : c.layers) {
    if (l.sliding) continue;
    l.head_dim = global_head_dim;
    if (k_eq_v && global_kv) l.kv_heads = *global_kv;
  }
}

// rope_parameters, keyed by layer type, with Gemma4TextConfig's defaults: default rotary
// (theta 1e4) on sliding layers, proportional (partial_rotary_factor 0.25, theta 1e6) on full
// ones. apply_rotary_pos_emb rotates the whole head.
void read_ropes(const JsonFields& f, Gemma4Config& c) {
  Json params = {
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
      {"full_attention",
       {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}}};
  if (f.has("rope_parameters")) params = f.at("rope_parameters");
  if (!params.is_object())
    fail(f.origin(),
         ": field \"rope_parameters\" must be keyed by layer type "
         "(full_attention, sliding_attention)");
  for (int type = 0; type < 2; ++type) {
    const char* name = type == 0 ? "sliding_attention" : "full_attention";
    const Gemma4Layer* first = nullptr;
    for (const Gemma4Layer& l : c.layers)
      if (l.sliding == (type == 0)) {
        if (first && (l.head_dim != first->head_dim))
          fail(f.origin(), ": the ", name,
               " layers differ in head_dim, which their one rotary table cannot serve");
        if (!first) first = &l;
      }
    if (!first) continue;
    if (!params.contains(name) || !params[name].is_object())
      fail(f.origin(), ": field \"rope_parameters\" has no object for ", name, " layers");
    const Json cfg = {{"rope_parameters", params[name]}};
    const std::string origin = f.origin() + ": rope_parameters." + name;
    RopeConfig r =
        read_rope_config(JsonFields(cfg, origin), first->head_dim, c.max_position_embeddings);
    if (r.kind != RopeKind::Proportional) rotate_whole_head(r, origin, c.architecture);
    for (Gemma4Layer& l : c.layers)
      if (l.sliding == (type == 0)) l.rope = static_cast<int>(c.ropes.size());
    c.ropes.push_back(r);
  }
}

Gemma4Config read_gemma4_config(const Checkpoint& ckpt, const JsonFields& f) {
  Gemma4Config c;
  c.architecture = ckpt.architecture();
  // Gemma4TextConfig defaults.
  c.vocab_size = f.get_or<int64_t>("vocab_size", 262144);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 2304);
  const int64_t intermediate = f.get_or<int64_t>("intermediate_size", 9216);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 30);
  c.heads = f.get_or<int64_t>("num_attention_heads", 8);
  const int64_t kv_heads = f.get_or<int64_t>("num_key_value_heads", 4);
  const int64_t head_dim = f.get_or<int64_t>("head_dim", 256);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 131072);
  c.rms_norm_eps = static_cast<float>(f.get_or<double>("rms_norm_eps", 1e-6));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", true);
  c.act = read_activation(f, "hidden_activation", "gelu_pytorch_tanh", c.architecture);
  c.final_softcap = read_nullable_float(f, "final_logit_softcapping", 0);
  c.per_layer_dim = f.get_or<int64_t>("hidden_size_per_layer_input", 256);
  c.per_layer_vocab = f.get_or<int64_t>("vocab_size_per_layer_input", 262144);
  const int64_t window = f.get_or<int64_t>("sliding_window", 512);
  const bool k_eq_v = f.get_or<bool>("attention_k_eq_v", false);
  const bool double_wide = f.get_or<bool>("use_double_wide_mlp", false);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", intermediate},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", c.heads},
                  {"num_key_value_heads", kv_heads},
                  {"head_dim", head_dim},
                  {"max_position_embeddings", c.max_position_embeddings},
                  {"sliding_window", window}});
  if (c.per_layer_dim < 0 || c.per_layer_dim > (int64_t{1} << 20))
    fail(f.origin(), ": field \"hidden_size_per_layer_input\" is ", c.per_layer_dim,
         ", out of range");
  if (c.per_layer_dim > 0) check_sizes(f, {{"vocab_size_per_layer_input", c.per_layer_vocab}});

  // Fields that change the computation in ways lathe does not implement.
  // "vision" lets image tokens attend both ways within their image (Gemma4Model's mask): text
  // alone stays causal. "all" makes every layer bidirectional.
  if (f.has("use_bidirectional_attention") && f.at("use_bidirectional_attention") != Json("vision"))
    fail(f.origin(), ": field \"use_bidirectional_attention\" is ",
         f.at("use_bidirectional_attention").dump(), "; lathe implements causal ", c.architecture,
         " (null, or \"vision\" for text)");
  if (f.get_or<bool>("attention_bias", false))
    fail(f.origin(), ": field \"attention_bias\" is true; lathe implements ", c.architecture,
         " without attention biases");
  if (f.get_or<bool>("enable_moe_block", false)) {
    for (const char* field : {"num_experts", "top_k_experts", "moe_intermediate_size"})
      if (!f.has(field))
        fail(f.origin(), ": field \"", field, "\" is missing (enable_moe_block is true)");
    c.moe = MoeSpec{.experts = f.get<int64_t>("num_experts"),
                    .top_k = f.get<int64_t>("top_k_experts"),
                    .inter = f.get<int64_t>("moe_intermediate_size"),
                    .routing = graph::Routing::SoftmaxTopK,
                    .norm_topk = true,
                    .act = c.act};
    check_sizes(f, {{"num_experts", c.moe->experts},
                    {"top_k_experts", c.moe->top_k},
                    {"moe_intermediate_size", c.moe->inter}});
    if (c.moe->top_k > c.moe->experts)
      fail(f.origin(), ": field \"top_k_experts\" is ", c.moe->top_k, ", more than the ",
           c.moe->experts, " experts (\"num_experts\")");
  }

  check_layer_count(ckpt, f, c.num_layers);
  const std::vector<bool> sliding = read_sliding(f, c.num_layers);
  c.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    c.layers[i].sliding = sliding[i];
    c.layers[i].window = sliding[i] ? window : 0;
    c.layers[i].k_eq_v = k_eq_v && !sliding[i];
  }
  read_layer_heads(f, c, head_dim, kv_heads, k_eq_v);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const Gemma4Layer& l = c.layers[i];
    if (l.head_dim <= 0 || l.head_dim > 65536 || l.head_dim % 2 != 0 || l.kv_heads <= 0 ||
        c.heads % l.kv_heads != 0)
      fail(f.origin(), ": layer ", i, " has head_dim ", l.head_dim, " and ", l.kv_heads,
           " key-value heads for ", c.heads,
           " attention heads (need an even head_dim and heads a multiple of kv heads)");
  }
  read_kv_sharing(f, c.layers);
  // Gemma4TextMLP: KV-shared layers are twice as wide with use_double_wide_mlp.
  for (Gemma4Layer& l : c.layers)
    l.intermediate = intermediate * (double_wide && l.kv_shared ? 2 : 1);
  read_ropes(f, c);
  return c;
}

// transformers Gemma4TextModel / Gemma4TextDecoderLayer.
class Gemma4Model : public GraphModel {
 public:
  Gemma4Model(const Checkpoint& ckpt, Gemma4Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    for (const RopeConfig& r : cfg_.ropes) ropes_.emplace_back(r);
    Weights w(ckpt, opts.dtype, !opts.dequantize_fp8);
    const int64_t skipped = w.ignore_prefixes(cfg_.ignored_prefixes);
    const int64_t h = cfg_.hidden_size, n_layers = cfg_.num_layers, pl = cfg_.per_layer_dim;
    const std::string& m = cfg_.prefix;
    embed_ = w.matrix(m + "embed_tokens.weight", {cfg_.vocab_size, h});
    // Gemma4TextScaledWordEmbedding: a float32 sqrt(hidden_size).
    embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(h)));
    if (pl > 0) ple_ = load_per_layer_embeddings(w, m, cfg_.per_layer_vocab, n_layers, pl, h);
    for (int64_t i = 0; i < n_layers; ++i) {
      const Gemma4Layer& c = cfg_.layers[i];
      const std::string p = cat(m, "layers.", i, ".");
      const std::string a = p + "self_attn.";
      Layer l;
      l.attn_norm = w.vector(p + "input_layernorm.weight", {h});
      l.attn = load_gemma_attention(w, a, c, cfg_.heads, h);
      l.attn_post_norm = w.vector(p + "post_attention_layernorm.weight", {h});
      l.mlp_norm = w.vector(p + "pre_feedforward_layernorm.weight", {h});
      l.mlp = load_gated_mlp(w, p + "mlp.", h, c.intermediate);
      l.mlp_post_norm = w.vector(p + "post_feedforward_layernorm.weight", {h});
      if (cfg_.moe) {
        l.moe = load_moe(w, p, h, *cfg_.moe,
                         {.router = "router.proj.weight",
                          .gate_up = "experts.gate_up_proj",
                          .down_fused = "experts.down_proj"});
        l.router_scale = w.vector(p + "router.scale", {h});
        l.per_expert_scale = w.vector(p + "router.per_expert_scale", {cfg_.moe->experts});
        l.mlp_post_norm_1 = w.vector(p + "post_feedforward_layernorm_1.weight", {h});
        l.experts_norm = w.vector(p + "pre_feedforward_layernorm_2.weight", {h});
        l.experts_post_norm = w.vector(p + "post_feedforward_layernorm_2.weight", {h});
      }
      if (pl > 0) l.per_layer = load_per_layer_input_gate(w, p, h, pl);
      // A buffer of one value, read once here (the step multiplies by it).
      l.layer_scalar = w.vector(p + "layer_scalar", {1}).data<float>()[0];
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector(m + "norm.weight", {h});
    lm_head_ = load_lm_head(w, cfg_.tie_word_embeddings, embed_, cfg_.vocab_size, h);
    w.finish(cfg_.architecture);

    info_.architecture = cfg_.architecture;
    info_.vocab_size = cfg_.vocab_size;
    info_.hidden_size = h;
    info_.num_layers = n_layers;
    info_.kv_heads = cfg_.layers.front().kv_heads;
    info_.head_dim = cfg_.layers.front().head_dim;
    info_.max_position_embeddings = cfg_.max_position_embeddings;
    info_.weight_dtype = w.matrix_dtype();
    if (!cfg_.ignored_prefixes.empty()) {
      info_.runs = cat("the text model (", m, "); not loaded: ", skipped,
                       " vision and audio tensors (model.vision_tower., model.embed_vision., "
                       "model.audio_tower., model.embed_audio.)");
    }
  }

  // KV per layer at its own size (a ring on sliding layers); KV-shared layers keep nothing.
  std::vector<LayerStateSpec> layer_states() const override {
    return gemma_layer_states({cfg_.layers.begin(), cfg_.layers.end()});
  }

  // Gemma4TextModel.forward, then Gemma4ForCausalLM's head.
  graph::Value build(graph::Builder& g, const StepInputs& in) const override {
    std::vector<graph::Value> tables;
    for (const Rope& r : ropes_) tables.push_back(g.rope_tables(r, in.positions));
    graph::Value x = g.embedding(g.weight(embed_), in.tokens);
    x = g.name(g.scale(x, embed_scale_), "embed");
    const graph::Value per_layer =
        cfg_.per_layer_dim > 0 ? per_layer_inputs(g, x, in.tokens, ple_, cfg_.rms_norm_eps) : x;
    for (int64_t i = 0; i < cfg_.num_layers; ++i)
      x = g.name(layer(g, i, x, per_layer, tables), cat("layer.", i, ".out"));
    x = g.name(norm(g, g.rows(x, in.logit_rows), final_norm_), "final_norm");
    // Gemma4ForCausalLM: final_logit_softcapping.
    graph::Value logits = blocks::linear(g, x, lm_head_);
    if (cfg_.final_softcap > 0) logits = g.softcap(logits, cfg_.final_softcap);
    return g.name(logits, "logits");
  }

 private:
  // Gemma4TextDecoderLayer: x + post_norm(attn(norm(x))), x + post_norm(mlp(norm(x))), then
  // with PLE x + norm(proj(act(gate(x)) * per_layer_input)), all times layer_scalar.
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x, graph::Value per_layer,
                     const std::vector<graph::Value>& tables) const {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = cat("layer.", i, ".");
    graph::Value a = g.name(norm(g, x, l.attn_norm), p + "attn_norm");
    a = gemma_attention(g, a, cfg_.layers[i], l.attn, cfg_.heads, cfg_.rms_norm_eps,
                        tables[static_cast<size_t>(cfg_.layers[i].rope)], p);
    x = g.add(x, g.name(norm(g, a, l.attn_post_norm), p + "post_attn_norm"));
    graph::Value m = g.name(norm(g, x, l.mlp_norm), p + "mlp_norm");
    m = blocks::gated_mlp(g, m, l.mlp, cfg_.act, p);
    if (cfg_.moe) m = g.add(norm(g, m, l.mlp_post_norm_1), experts(g, i, x, p));
    x = g.add(x, g.name(norm(g, m, l.mlp_post_norm), p + "post_mlp_norm"));
    if (cfg_.per_layer_dim > 0) {
      const int64_t pl = cfg_.per_layer_dim;
      const graph::Value h = per_layer_input_gate(g, x, g.slice(per_layer, i * pl, pl), l.per_layer,
                                                  cfg_.act, cfg_.rms_norm_eps);
      x = g.add(x, g.name(h, p + "per_layer_out"));
    }
    return l.layer_scalar != 1.0f ? g.scale(x, l.layer_scalar) : x;
  }

  // The enable_moe_block branch of Gemma4TextDecoderLayer, on the MLP's input x (before its
  // norm): Gemma4TextRouter (unweighted RMSNorm, times scale and hidden_size^-0.5, proj,
  // softmax, top-k renormalised, times per_expert_scale), then Gemma4TextExperts on
  // pre_feedforward_layernorm_2(x), normed by post_feedforward_layernorm_2.
  graph::Value experts(graph::Builder& g, int64_t i, graph::Value x, const std::string& p) const {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const MoeSpec& s = *cfg_.moe;
    graph::Value r =
        g.scale(norm(g, x, l.router_scale),
                static_cast<float>(std::pow(static_cast<double>(cfg_.hidden_size), -0.5)));
    const graph::Value route =
        g.name(g.route(blocks::linear(g, r, l.moe.router, {}, graph::Quantize::Never),
                       {.routing = s.routing, .top_k = s.top_k, .norm_topk = true}, {},
                       g.weight(l.per_expert_scale)),
               p + "route");
    std::vector<graph::Builder::Expert> ex;
    for (const GatedMlpWeights& e : l.moe.experts)
      ex.push_back({g.weight(e.gate), g.weight(e.up), g.weight(e.down)});
    graph::Value out = g.experts(norm(g, x, l.experts_norm), route, ex, s.act);
    return g.name(norm(g, out, l.experts_post_norm), p + "experts_out");
  }

  // Gemma4RMSNorm: x * (mean(x^2) + eps)^-0.5 * weight.
  graph::Value norm(graph::Builder& g, graph::Value x, const Tensor& weight) const {
    return blocks::rms_norm(g, x, weight, cfg_.rms_norm_eps, 0.0f);
  }

  struct Layer {
    Tensor attn_norm, attn_post_norm, mlp_norm, mlp_post_norm;
    GemmaAttentionWeights attn;
    GatedMlpWeights mlp;
    PerLayerInputGate per_layer;  // with PLE
    MoeWeights moe;               // with enable_moe_block: router.proj and the experts
    Tensor router_scale, per_expert_scale, mlp_post_norm_1, experts_norm, experts_post_norm;
    float layer_scalar = 1;
  };
  Gemma4Config cfg_;
  std::vector<Rope> ropes_;
  Tensor embed_, lm_head_, final_norm_;
  float embed_scale_ = 1;
  PerLayerEmbeddings ple_;  // with PLE
  std::vector<Layer> layers_;
};

}  // namespace

// Gemma4ForCausalLM reads config.json; Gemma4ForConditionalGeneration (Gemma4Config) its
// text_config, with tie_word_embeddings at the top level.
std::unique_ptr<Model> load_gemma4(const Checkpoint& ckpt, const ModelOptions& opts) {
  const JsonFields top(ckpt.config(), ckpt.config_path());
  if (!top.has("text_config"))
    return std::make_unique<Gemma4Model>(ckpt, read_gemma4_config(ckpt, top), opts);
  if (!top.at("text_config").is_object())
    fail(top.origin(), ": field \"text_config\" must be an object");
  const JsonFields text(top.at("text_config"), ckpt.config_path() + ": text_config");
  Gemma4Config c = read_gemma4_config(ckpt, text);
  c.tie_word_embeddings = top.get_or<bool>("tie_word_embeddings", true);
  c.prefix = "model.language_model.";
  c.ignored_prefixes = {"model.vision_tower.", "model.embed_vision.", "model.audio_tower.",
                        "model.embed_audio."};
  return std::make_unique<Gemma4Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
