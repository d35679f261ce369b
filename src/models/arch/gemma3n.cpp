// Gemma3nForCausalLM: transformers/models/gemma3n (Gemma3nTextConfig in
// configuration_gemma3n.py, Gemma3nTextModel in modeling_gemma3n.py). Gemma's scaled embedding
// and sandwich norms (RMSNorms scaling by the weight itself), the attention, KV sharing and
// per-layer embeddings Gemma4 kept (models/arch/gemma_common.h), and what is Gemma3n's own:
// - AltUp: altup_num_inputs streams of the residual, the embedding and its projections
//   renormalised to its magnitude; each layer predicts every stream from all of them
//   (coefficients from a router over the active stream), runs on the active one, and corrects
//   every stream by its innovation; at the end the streams are projected back, renormalised
//   and averaged;
// - Laurel, a low-rank residual beside the attention;
// - activation sparsity: on layers with a sparsity p, the MLP's gate keeps only what exceeds
//   mean + std * icdf(p) of its row (a Gaussian top-k) before the activation.
// Gemma3nForConditionalGeneration's text model is the same model read from text_config, with
// the ids of its vision and audio vocabularies embedded by their own hard-token embedders.
#include <cmath>

#include "core/error.h"
#include "models/arch/gemma_common.h"
#include "models/blocks.h"
#include "models/engine.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct Gemma3nLayer : GemmaAttentionLayer {
  int64_t intermediate = 0;
  float sparsity = 0;        // activation_sparsity_pattern (0: a dense MLP)
  float std_multiplier = 0;  // Normal(0, 1).icdf(sparsity) in f32, as _gaussian_topk forms it
};

// Gemma3nMultimodalEmbedder of hard tokens: ids [offset, offset + vocab) embedded, RMS-normed,
// projected to the text model's width and RMS-normed without a weight.
struct MultimodalEmbedder {
  std::string prefix;  // model.embed_vision. or model.embed_audio.
  int64_t vocab = 0, offset = 0, hidden = 0;
  float eps = 1e-6f;
  Tensor embedding, norm, projection, post_norm;
};

struct Gemma3nConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, heads = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = true;
  graph::Activation act = graph::Activation::GeluTanh;
  float final_softcap = 0;  // 0: none
  int64_t per_layer_dim = 0, per_layer_vocab = 0;
  int64_t streams = 0, active = 0;  // altup_num_inputs, altup_active_idx
  bool correct_scale = true;        // altup_correct_scale
  int64_t laurel_rank = 0;
  std::vector<Gemma3nLayer> layers;
  std::vector<RopeConfig> ropes;  // {full_attention, sliding_attention}
  // Gemma3nForConditionalGeneration: the language model under model.language_model., the
  // vision and audio vocabularies' embedders beside it; the towers are not loaded.
  std::string prefix = "model.";
  std::vector<MultimodalEmbedder> embedders;
  std::vector<std::string> ignored_prefixes;
};

// torch.distributions.Normal(0, 1).icdf(p) in f32: loc + scale * erfinv(2p - 1) * sqrt(2),
// the inverse error function solved in double by Newton's method on std::erf.
float normal_icdf(float p) {
  const float y = 2.0f * p - 1.0f;
  double x = 0;
  for (int i = 0; i < 100; ++i) {
    const double step = (std::erf(x) - y) / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
    x -= step;
    if (std::abs(step) < 1e-17) break;
  }
  return static_cast<float>(x) * static_cast<float>(std::sqrt(2.0));
}

// Gemma3nTextConfig.__post_init__: intermediate_size is one size or one per layer.
std::vector<int64_t> read_intermediate(const JsonFields& f, int64_t num_layers) {
  std::vector<int64_t> sizes(static_cast<size_t>(num_layers), 16384);
  if (!f.has("intermediate_size")) return sizes;
  const Json& v = f.at("intermediate_size");
  if (v.is_array()) {
    if (static_cast<int64_t>(v.size()) != num_layers)
      fail(f.origin(), ": field \"intermediate_size\" lists ", v.size(), " sizes for ", num_layers,
           " layers");
    for (int64_t i = 0; i < num_layers; ++i) {
      if (!v[i].is_number_integer())
        fail(f.origin(), ": intermediate_size[", i, "] must be an integer");
      sizes[i] = v[i].get<int64_t>();
    }
  } else {
    const int64_t size = f.get<int64_t>("intermediate_size");
    for (int64_t& s : sizes) s = size;
  }
  for (int64_t s : sizes) check_sizes(f, {{"intermediate_size", s}});
  return sizes;
}

// activation_sparsity_pattern: one value per layer; by default 0.95 on the first 10 layers of
// models deeper than 10, else none.
std::vector<float> read_sparsity(const JsonFields& f, int64_t num_layers) {
  std::vector<float> p(static_cast<size_t>(num_layers), 0.0f);
  if (!f.has("activation_sparsity_pattern") || f.at("activation_sparsity_pattern").is_null()) {
    for (int64_t i = 0; i < std::min<int64_t>(num_layers > 10 ? 10 : 0, num_layers); ++i)
      p[i] = 0.95f;
    return p;
  }
  const Json& v = f.at("activation_sparsity_pattern");
  if (!v.is_array() || static_cast<int64_t>(v.size()) != num_layers)
    fail(f.origin(), ": field \"activation_sparsity_pattern\" must list one value for each of ",
         num_layers, " layers");
  for (int64_t i = 0; i < num_layers; ++i) {
    if (!v[i].is_number() || !(v[i].get<double>() >= 0.0 && v[i].get<double>() < 1.0))
      fail(f.origin(), ": activation_sparsity_pattern[", i, "] is ", v[i].dump(),
           ", must be in [0, 1)");
    p[i] = static_cast<float>(v[i].get<double>());
  }
  return p;
}

Gemma3nConfig read_gemma3n_config(const Checkpoint& ckpt, const JsonFields& f) {
  Gemma3nConfig c;
  c.architecture = ckpt.architecture();
  // Gemma3nTextConfig defaults.
  c.vocab_size = f.get_or<int64_t>("vocab_size", 262400);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 2048);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 35);
  c.heads = f.get_or<int64_t>("num_attention_heads", 8);
  const int64_t kv_heads = f.get_or<int64_t>("num_key_value_heads", 2);
  const int64_t head_dim = f.get_or<int64_t>("head_dim", 256);
  c.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 32768);
  c.rms_norm_eps = static_cast<float>(f.get_or<double>("rms_norm_eps", 1e-6));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", true);
  c.act = read_activation(f, "hidden_activation", "gelu_pytorch_tanh", c.architecture);
  c.final_softcap = read_nullable_float(f, "final_logit_softcapping", 30.0f);
  c.per_layer_dim = f.get_or<int64_t>("hidden_size_per_layer_input", 256);
  c.per_layer_vocab = f.get_or<int64_t>("vocab_size_per_layer_input", 262144);
  c.streams = f.get_or<int64_t>("altup_num_inputs", 4);
  c.active = f.get_or<int64_t>("altup_active_idx", 0);
  c.correct_scale = f.get_or<bool>("altup_correct_scale", true);
  c.laurel_rank = f.get_or<int64_t>("laurel_rank", 64);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", c.heads},
                  {"num_key_value_heads", kv_heads},
                  {"head_dim", head_dim},
                  {"max_position_embeddings", c.max_position_embeddings},
                  {"hidden_size_per_layer_input", c.per_layer_dim},
                  {"vocab_size_per_layer_input", c.per_layer_vocab},
                  {"altup_num_inputs", c.streams},
                  {"laurel_rank", c.laurel_rank}});
  if (c.streams > 64)
    fail(f.origin(), ": field \"altup_num_inputs\" is ", c.streams, ", out of range");
  if (c.active < 0 || c.active >= c.streams)
    fail(f.origin(), ": field \"altup_active_idx\" is ", c.active, ", must be below ", c.streams,
         " (altup_num_inputs)");
  if (head_dim % 2 != 0 || c.heads % kv_heads != 0)
    fail(f.origin(), ": head_dim ", head_dim, " and ", kv_heads, " key-value heads for ", c.heads,
         " attention heads (need an even head_dim and heads a multiple of kv heads)");
  // Fields that change the computation in ways lathe does not implement. altup_coef_clip
  // clamps the coefficients only while training: inference ignores it, as transformers does.
  if (f.get_or<bool>("attention_bias", false))
    fail(f.origin(), ": field \"attention_bias\" is true; lathe implements ", c.architecture,
         " without attention biases");

  check_layer_count(ckpt, f, c.num_layers);
  const std::vector<int64_t> windows = read_layer_type_windows(f, c.num_layers, 5, 512);
  const std::vector<int64_t> inter = read_intermediate(f, c.num_layers);
  const std::vector<float> sparsity = read_sparsity(f, c.num_layers);
  c.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    Gemma3nLayer& l = c.layers[i];
    l.sliding = windows[i] > 0;
    l.window = windows[i];
    l.head_dim = head_dim;
    l.kv_heads = kv_heads;
    l.intermediate = inter[i];
    l.sparsity = sparsity[i];
    if (l.sparsity > 0) l.std_multiplier = normal_icdf(l.sparsity);
  }
  read_kv_sharing(f, c.layers);
  c.ropes = read_gemma3_ropes(f, head_dim, c.max_position_embeddings);
  return c;
}

// The rows of a table that a range of ids [offset, offset + rows) reads, zeros elsewhere.
graph::Value range_embedding(graph::Builder& g, const Tensor& table, graph::Value tokens,
                             int64_t offset, graph::IdRange range) {
  return g.embedding(g.weight(table), tokens, -offset, range);
}

// transformers Gemma3nTextModel / Gemma3nTextDecoderLayer.
class Gemma3nModel : public GraphModel {
  struct Layer {
    Tensor attn_norm, attn_post_norm, mlp_norm, mlp_post_norm;
    GemmaAttentionWeights attn;
    GatedMlpWeights mlp;
    Tensor correct_output_scale, correction_coefs, prediction_coefs, modality_router, router_norm;
    Tensor laurel_left, laurel_right, laurel_norm;
    PerLayerInputGate per_layer;
  };

 public:
  Gemma3nModel(const Checkpoint& ckpt, Gemma3nConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    for (const RopeConfig& r : cfg_.ropes) ropes_.emplace_back(r);
    Weights w(ckpt, opts.dtype, !opts.dequantize_fp8);
    const int64_t skipped = w.ignore_prefixes(cfg_.ignored_prefixes);
    const int64_t h = cfg_.hidden_size, n_layers = cfg_.num_layers, s = cfg_.streams;
    const std::string& m = cfg_.prefix;
    embed_ = w.matrix(m + "embed_tokens.weight", {cfg_.vocab_size, h});
    // Gemma3nTextScaledWordEmbedding: a float32 sqrt(hidden_size).
    embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(h)));
    ple_ = load_per_layer_embeddings(w, m, cfg_.per_layer_vocab, n_layers, cfg_.per_layer_dim, h);
    for (int64_t i = 1; i < s; ++i) {
      altup_projections_.push_back(
          w.matrix(cat(m, "altup_projections.", i - 1, ".weight"), {h, h}));
      altup_unembed_.push_back(
          w.matrix(cat(m, "altup_unembed_projections.", i - 1, ".weight"), {h, h}));
    }
    correction_bias_ = ones(s);  // correction_coefs(modalities) + 1.0
    for (int64_t i = 0; i < n_layers; ++i) {
      const Gemma3nLayer& c = cfg_.layers[i];
      const std::string p = cat(m, "layers.", i, ".");
      const std::string a = p + "self_attn.";
      Layer l;
      l.attn_norm = w.vector(p + "input_layernorm.weight", {h});
      l.attn = load_gemma_attention(w, a, c, cfg_.heads, h);
      if (c.kv_shared)  // Gemma3nTextModel drops these where a checkpoint still has them
        for (const char* name : {"k_proj.weight", "v_proj.weight", "k_norm.weight"})
          w.ignore(a + name);
      l.attn_post_norm = w.vector(p + "post_attention_layernorm.weight", {h});
      l.mlp_norm = w.vector(p + "pre_feedforward_layernorm.weight", {h});
      l.mlp = load_gated_mlp(w, p + "mlp.", h, c.intermediate);
      l.mlp_post_norm = w.vector(p + "post_feedforward_layernorm.weight", {h});
      const std::string u = p + "altup.";
      l.correct_output_scale = w.vector(u + "correct_output_scale", {h});
      l.correction_coefs = w.matrix(u + "correction_coefs.weight", {s, s});
      l.prediction_coefs = w.matrix(u + "prediction_coefs.weight", {s * s, s});
      l.modality_router = w.matrix(u + "modality_router.weight", {s, h});
      l.router_norm = w.vector(u + "router_norm.weight", {h});
      l.laurel_left = w.matrix(p + "laurel.linear_left.weight", {cfg_.laurel_rank, h});
      l.laurel_right = w.matrix(p + "laurel.linear_right.weight", {h, cfg_.laurel_rank});
      l.laurel_norm = w.vector(p + "laurel.post_laurel_norm.weight", {h});
      l.per_layer = load_per_layer_input_gate(w, p, h, cfg_.per_layer_dim);
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector(m + "norm.weight", {h});
    for (MultimodalEmbedder& e : cfg_.embedders) {
      e.embedding = w.matrix(e.prefix + "embedding.weight", {e.vocab, e.hidden});
      e.norm = w.vector(e.prefix + "hard_embedding_norm.weight", {e.hidden});
      w.ignore(e.prefix + "soft_embedding_norm.weight");  // soft tokens: the towers' outputs
      e.projection = w.matrix(e.prefix + "embedding_projection.weight", {h, e.hidden});
      e.post_norm = ones(h);
    }
    lm_head_ = load_lm_head(w, cfg_.tie_word_embeddings, embed_, cfg_.vocab_size, h);
    w.finish(cfg_.architecture);
    // Multimodal wrappers: the text table serves the ids below the first embedder's offset.
    text_embed_ = cfg_.embedders.empty()
                      ? embed_
                      : matrix_rows(embed_, 0, std::min(cfg_.vocab_size, cfg_.embedders[0].offset));

    info_.architecture = cfg_.architecture;
    info_.vocab_size = cfg_.vocab_size;
    info_.hidden_size = h;
    info_.num_layers = n_layers;
    info_.kv_heads = cfg_.layers.front().kv_heads;
    info_.head_dim = cfg_.layers.front().head_dim;
    info_.max_position_embeddings = cfg_.max_position_embeddings;
    info_.weight_dtype = w.matrix_dtype();
    if (!cfg_.ignored_prefixes.empty()) {
      info_.runs = cat("the text model (", m,
                       ") and the hard-token embedders of the vision and audio vocabularies; not "
                       "loaded: ",
                       skipped, " vision and audio tower tensors (model.vision_tower., ",
                       "model.audio_tower.)");
    }
  }

  std::vector<LayerStateSpec> layer_states() const override {
    return gemma_layer_states({cfg_.layers.begin(), cfg_.layers.end()});
  }

  // Gemma3nTextModel.forward, then Gemma3nForCausalLM's head.
  graph::Value build(graph::Builder& g, const StepInputs& in) const override {
    std::vector<graph::Value> tables;  // {full_attention, sliding_attention}
    for (const Rope& r : ropes_) tables.push_back(g.rope_tables(r, in.positions));
    const graph::Value x = embed(g, in.tokens);
    const graph::Value per_layer =
        per_layer_inputs(g, x, in.tokens, ple_, cfg_.rms_norm_eps, graph::IdRange::FirstRow);
    graph::Value streams = g.name(expand_streams(g, x), "altup_in");
    for (int64_t i = 0; i < cfg_.num_layers; ++i)
      streams = g.name(layer(g, i, streams, per_layer, tables[cfg_.layers[i].sliding ? 1 : 0]),
                       cat("layer.", i, ".out"));
    graph::Value y = unembed_streams(g, g.rows(streams, in.logit_rows));
    y = g.name(norm(g, y, final_norm_), "final_norm");
    // Gemma3nForCausalLM: final_logit_softcapping.
    graph::Value logits = blocks::linear(g, y, lm_head_);
    if (cfg_.final_softcap > 0) logits = g.softcap(logits, cfg_.final_softcap);
    return g.name(logits, "logits");
  }

 private:
  // Gemma3nTextScaledWordEmbedding; in the multimodal wrapper (Gemma3nModel.forward) the ids
  // of the vision and audio vocabularies take their embedders' rows instead: each table reads
  // zeros outside its range, so the sum is the one that applies (an id below the first range
  // or past the last fails).
  graph::Value embed(graph::Builder& g, graph::Value tokens) const {
    const graph::IdRange text_range =
        cfg_.embedders.empty() ? graph::IdRange::Fail : graph::IdRange::ZerosPast;
    graph::Value x = g.scale(range_embedding(g, text_embed_, tokens, 0, text_range), embed_scale_);
    for (size_t i = 0; i < cfg_.embedders.size(); ++i) {
      const MultimodalEmbedder& e = cfg_.embedders[i];
      const bool last = i + 1 == cfg_.embedders.size();
      graph::Value v = range_embedding(g, e.embedding, tokens, e.offset,
                                       last ? graph::IdRange::ZerosBelow : graph::IdRange::Zeros);
      v = blocks::rms_norm(g, v, e.norm, e.eps, 0.0f);
      v = blocks::rms_norm(g, blocks::linear(g, v, e.projection), e.post_norm, e.eps, 0.0f);
      x = g.add(x, v);
    }
    return g.name(x, "embed");
  }

  // s * target / sqrt(clamp(mean(s^2), 1e-5)): a stream brought to the target magnitude.
  graph::Value renormalise(graph::Builder& g, graph::Value s, graph::Value target) const {
    return g.div(g.mul(s, target), g.row_stat(s, graph::RowStat::Rms, 1e-5f));
  }

  // Gemma3nTextModel.forward: the embedding and its altup_projections, each brought to the
  // embedding's magnitude, as the streams [n, streams * hidden] (each token's streams in
  // turn).
  graph::Value expand_streams(graph::Builder& g, graph::Value x) const {
    const graph::Value target = g.row_stat(x, graph::RowStat::Rms);
    graph::Value out = x;
    for (const Tensor& proj : altup_projections_)
      out = g.concat(out, renormalise(g, blocks::linear(g, x, proj), target));
    return out;
  }

  // The end of Gemma3nTextModel.forward: streams past the first through
  // altup_unembed_projections, brought to the first's magnitude, and all averaged.
  graph::Value unembed_streams(graph::Builder& g, graph::Value streams) const {
    const graph::Value first = stream(g, streams, 0);
    const graph::Value target = g.row_stat(first, graph::RowStat::Rms);
    graph::Value sum = first;
    for (int64_t i = 1; i < cfg_.streams; ++i) {
      const graph::Value u = blocks::linear(g, stream(g, streams, i), altup_unembed_[i - 1]);
      sum = g.add(sum, renormalise(g, u, target));
    }
    return g.divide(sum, static_cast<float>(cfg_.streams));  // torch.mean over the streams
  }

  graph::Value stream(graph::Builder& g, graph::Value streams, int64_t i) const {
    return g.slice(streams, i * cfg_.hidden_size, cfg_.hidden_size);
  }

  // Gemma3nTextAltUp.compute_router_modalities: tanh(modality_router(router_norm(x) / hidden)).
  graph::Value router_modalities(graph::Builder& g, const Layer& l, graph::Value x) const {
    const graph::Value r = g.scale(norm(g, x, l.router_norm),
                                   static_cast<float>(1.0 / static_cast<double>(cfg_.hidden_size)));
    return g.softcap(blocks::linear(g, r, l.modality_router), 1.0f);  // 1 * tanh(x / 1)
  }

  // Gemma3nTextMLP, with _gaussian_topk on the gate where the layer is sparse.
  graph::Value mlp(graph::Builder& g, int64_t i, graph::Value x, const std::string& p) const {
    const Gemma3nLayer& c = cfg_.layers[i];
    const Layer& l = layers_[static_cast<size_t>(i)];
    graph::Value gate = blocks::linear(g, x, l.mlp.gate);
    if (c.sparsity > 0) {
      // relu(x - (mean + std * icdf(sparsity))) over each row of the gate.
      const graph::Value cutoff =
          g.add(g.row_stat(gate, graph::RowStat::Mean),
                g.scale(g.row_stat(gate, graph::RowStat::Std), c.std_multiplier));
      gate = g.activation(graph::Activation::Relu, g.sub(gate, cutoff));
    }
    const graph::Value h = g.act_mul(cfg_.act, gate, blocks::linear(g, x, l.mlp.up));
    return g.name(blocks::linear(g, h, l.mlp.down), p + "mlp_out");
  }

  // Gemma3nTextAltUp.predict: each stream plus a mix of all, by coefficients [streams,
  // streams] per token from the active stream. [n, streams * hidden] in and out.
  graph::Value predict(graph::Builder& g, const Layer& l, graph::Value streams) const {
    const int64_t n = g.dim(streams, 0), h = cfg_.hidden_size, s = cfg_.streams;
    const graph::Value coefs = blocks::linear(
        g, router_modalities(g, l, stream(g, streams, cfg_.active)), l.prediction_coefs);
    const graph::Value x = g.reshape(streams, {n, s, h});
    return g.reshape(g.add(g.batch_matmul(g.reshape(coefs, {n, s, s}), x), x), {n, s * h});
  }

  // Gemma3nTextAltUp.correct: every prediction plus its coefficient (correction_coefs + 1)
  // times the innovation, the activated output minus the active prediction.
  graph::Value correct(graph::Builder& g, const Layer& l, graph::Value predictions,
                       graph::Value active, graph::Value activated) const {
    const int64_t n = g.dim(predictions, 0), h = cfg_.hidden_size, s = cfg_.streams;
    const graph::Value innovation = g.sub(activated, active);
    const graph::Value coefs =
        blocks::linear(g, router_modalities(g, l, activated), l.correction_coefs, correction_bias_);
    const graph::Value corrected =
        g.add(g.mul(g.reshape(coefs, {n, s, 1}), g.reshape(innovation, {n, 1, h})),
              g.reshape(predictions, {n, s, h}));
    return g.reshape(corrected, {n, s * h});
  }

  // Gemma3nTextDecoderLayer on the streams [n, streams * hidden].
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value streams, graph::Value per_layer,
                     graph::Value tables) const {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = cat("layer.", i, ".");
    const int64_t n = g.dim(streams, 0), h = cfg_.hidden_size, s = cfg_.streams;
    const graph::Value predictions = predict(g, l, streams);
    const graph::Value active = stream(g, predictions, cfg_.active);

    const graph::Value normed = g.name(norm(g, active, l.attn_norm), p + "attn_norm");
    // Gemma3nTextLaurelBlock: x + norm(right(left(x))).
    const graph::Value laurel = g.name(
        g.add(normed,
              norm(g, blocks::linear(g, blocks::linear(g, normed, l.laurel_left), l.laurel_right),
                   l.laurel_norm)),
        p + "laurel");
    graph::Value a = gemma_attention(g, normed, cfg_.layers[i], l.attn, cfg_.heads,
                                     cfg_.rms_norm_eps, tables, p);
    a = g.add(active, g.name(norm(g, a, l.attn_post_norm), p + "post_attn_norm"));
    const graph::Value attn_laurel = g.divide(g.add(a, laurel), static_cast<float>(std::sqrt(2.0)));
    graph::Value m = mlp(g, i, g.name(norm(g, attn_laurel, l.mlp_norm), p + "mlp_norm"), p);
    const graph::Value activated =
        g.add(attn_laurel, g.name(norm(g, m, l.mlp_post_norm), p + "post_mlp_norm"));
    const graph::Value corrected = correct(g, l, predictions, active, activated);

    // The per-layer input, gated by the corrected active stream, joins streams 1.. .
    graph::Value first = stream(g, corrected, cfg_.active);
    if (cfg_.correct_scale) first = g.mul(first, g.weight(l.correct_output_scale));
    const int64_t pl = cfg_.per_layer_dim;
    const graph::Value y = g.name(per_layer_input_gate(g, first, g.slice(per_layer, i * pl, pl),
                                                       l.per_layer, cfg_.act, cfg_.rms_norm_eps),
                                  p + "per_layer_out");
    if (s == 1) return corrected;
    const graph::Value rest = g.reshape(
        g.binary(graph::BinaryOp::Add, g.reshape(g.slice(corrected, h, (s - 1) * h), {n, s - 1, h}),
                 g.reshape(y, {n, 1, h})),
        {n, (s - 1) * h});
    return g.concat(stream(g, corrected, 0), rest);
  }

  // Gemma3nRMSNorm: x * (mean(x^2) + eps)^-0.5 * weight.
  graph::Value norm(graph::Builder& g, graph::Value x, const Tensor& weight) const {
    return blocks::rms_norm(g, x, weight, cfg_.rms_norm_eps, 0.0f);
  }

  Gemma3nConfig cfg_;
  std::vector<Rope> ropes_;
  Tensor embed_, text_embed_, lm_head_, final_norm_;
  float embed_scale_ = 1;
  PerLayerEmbeddings ple_;
  std::vector<Tensor> altup_projections_, altup_unembed_;
  Tensor correction_bias_;
  std::vector<Layer> layers_;
};

// Gemma3nVisionConfig / Gemma3nAudioConfig's hidden_size, vocab_size, vocab_offset and
// rms_norm_eps, with their defaults.
MultimodalEmbedder read_embedder(const JsonFields& top, const char* field, const char* prefix,
                                 int64_t hidden, int64_t offset) {
  MultimodalEmbedder e;
  e.prefix = prefix;
  Json sub = Json::object();
  if (top.has(field) && !top.at(field).is_null()) sub = top.at(field);
  if (!sub.is_object()) fail(top.origin(), ": field \"", field, "\" must be an object");
  const JsonFields f(sub, top.origin() + ": " + field);
  e.hidden = f.get_or<int64_t>("hidden_size", hidden);
  e.vocab = f.get_or<int64_t>("vocab_size", 128);
  e.offset = f.get_or<int64_t>("vocab_offset", offset);
  e.eps = static_cast<float>(f.get_or<double>("rms_norm_eps", 1e-6));
  check_sizes(f, {{"hidden_size", e.hidden}, {"vocab_size", e.vocab}, {"vocab_offset", e.offset}});
  return e;
}

}  // namespace

// Gemma3nForCausalLM reads config.json; Gemma3nForConditionalGeneration (Gemma3nConfig) its
// text_config, with tie_word_embeddings at the top level and the hard-token embedders of
// vision_config and audio_config.
std::unique_ptr<Model> load_gemma3n(const Checkpoint& ckpt, const ModelOptions& opts) {
  const JsonFields top(ckpt.config(), ckpt.config_path());
  if (!top.has("text_config"))
    return std::make_unique<Gemma3nModel>(ckpt, read_gemma3n_config(ckpt, top), opts);
  if (!top.at("text_config").is_object())
    fail(top.origin(), ": field \"text_config\" must be an object");
  const JsonFields text(top.at("text_config"), ckpt.config_path() + ": text_config");
  Gemma3nConfig c = read_gemma3n_config(ckpt, text);
  c.tie_word_embeddings = top.get_or<bool>("tie_word_embeddings", true);
  c.prefix = "model.language_model.";
  c.embedders = {read_embedder(top, "vision_config", "model.embed_vision.", 2048, 262144),
                 read_embedder(top, "audio_config", "model.embed_audio.", 1536, 262272)};
  // Gemma3nModel.forward: vision ids are [vision offset, audio offset), audio ids the rest.
  const MultimodalEmbedder &v = c.embedders[0], &a = c.embedders[1];
  if (v.offset + v.vocab != a.offset || a.offset + a.vocab != c.vocab_size)
    fail(top.origin(), ": vision ids [", v.offset, ", ", v.offset + v.vocab, ") and audio ids [",
         a.offset, ", ", a.offset + a.vocab,
         ") must follow each other to the end of the text vocabulary (", c.vocab_size,
         " ids), as Gemma3nModel's id ranges assume");
  c.ignored_prefixes = {"model.vision_tower.", "model.audio_tower."};
  return std::make_unique<Gemma3nModel>(ckpt, std::move(c), opts);
}

}  // namespace lathe
