// GlmMoeDsaForCausalLM: transformers/models/glm_moe_dsa (GLM-5). DeepSeek-V3's decoder
// (multi-head latent attention, sigmoid-routed experts with shared experts after the dense
// layers) with DeepSeek sparse attention (models/dsa.h): each layer's indexer chooses
// index_topk keys per query and the attention sees those only. indexer_types marks layers
// "full" (their own indexer) or "shared" (the chosen keys of the last full layer before them,
// transformers' prev_topk_indices). The indexer rotates interleaved pairs, as the attention
// does. The DSA decoder built here serves DeepseekV32 (deepseek_v32.cpp) too.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/dsa.h"
#include "models/registry.h"

namespace lathe {
namespace {

// transformers GlmMoeDsaDecoderLayer: x + attn(norm(x)), then x + mlp(norm(x)), where attn is
// GlmMoeDsaAttention (MLA whose keys an indexer chooses per query).
class DsaModel : public Decoder {
 public:
  DsaModel(const Checkpoint& ckpt, DsaConfig cfg, const ModelOptions& opts) : cfg_(std::move(cfg)) {
    const DeepseekConfig& b = cfg_.base;
    ropes_.emplace_back(b.rope);
    Weights w(ckpt, opts.dtype, !opts.dequantize_fp8);
    ignore_layers_from(w, b.num_layers);  // multi-token prediction layers
    const int64_t h = b.hidden_size;
    embed_ = w.matrix("model.embed_tokens.weight", {b.vocab_size, h});
    MoeNames names;
    names.shared = "shared_experts.";
    for (int64_t i = 0; i < b.num_layers; ++i) {
      const std::string p = cat("model.layers.", i, ".");
      Layer l;
      l.attn_norm = w.vector(p + "input_layernorm.weight", {h});
      l.attn = load_mla(w, p + "self_attn.", b.mla);
      if (cfg_.layer_indexer[static_cast<size_t>(i)])
        l.indexer =
            load_dsa_indexer(w, p + "self_attn.indexer.", cfg_.indexer, h, b.mla.q_lora_rank);
      l.mlp_norm = w.vector(p + "post_attention_layernorm.weight", {h});
      if (b.layer_moe[static_cast<size_t>(i)])
        l.moe = load_moe(w, p + "mlp.", h, b.moe, names);
      else
        l.mlp = load_gated_mlp(w, p + "mlp.", h, b.intermediate_size);
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector("model.norm.weight", {h});
    lm_head_ = load_lm_head(w, b.tie_word_embeddings, embed_, b.vocab_size, h);
    w.finish(b.architecture);
    info_ = decoder_info(b, w.matrix_dtype());
  }

  // The latent cache of MLA, and the indexer's keys on the layers that run one.
  std::vector<LayerStateSpec> layer_states() const override {
    std::vector<LayerStateSpec> specs;
    for (bool full : cfg_.layer_indexer) {
      LayerStateSpec s = mla_layer_state(cfg_.base.mla);
      if (full) s.index_dim = cfg_.indexer.head_dim;
      specs.push_back(s);
    }
    return specs;
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const DeepseekConfig& b = cfg_.base;
    const std::string p = cat("layer.", i, ".");
    graph::Value a = g.name(norm(g, x, l.attn_norm), p + "attn_norm");
    graph::Value q_in = blocks::mla_query_input(g, a, l.attn, b.mla);
    graph::Value chosen = l.indexer ? blocks::dsa_indexer(g, a, q_in, *l.indexer, cfg_.indexer,
                                                          in.rope_tables[0], i, p)
                                    : shared_choice(g, i);
    x = g.add(x, blocks::mla_attention(g, a, q_in, l.attn, b.mla, in.rope_tables[0], i, p, chosen));
    graph::Value m = g.name(norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, l.moe ? blocks::moe(g, m, *l.moe, b.moe, p)
                          : blocks::gated_mlp(g, m, l.mlp, graph::Activation::Silu, p));
  }

  graph::Value final_norm(graph::Builder& g, graph::Value x) const override {
    return norm(g, x, final_norm_);
  }

 private:
  graph::Value norm(graph::Builder& g, graph::Value x, const Tensor& weight) const {
    return blocks::rms_norm(g, x, weight, cfg_.base.rms_norm_eps);
  }

  // A "shared" layer's keys: those the last full layer before it chose in this step, found by
  // the name its indexer node was given (layers are built in order; layer 0 is full).
  graph::Value shared_choice(graph::Builder& g, int64_t i) const {
    int64_t full = i - 1;
    while (!cfg_.layer_indexer[static_cast<size_t>(full)]) --full;
    const std::string name = cat("layer.", full, ".index");
    const std::vector<graph::Node>& nodes = g.graph().nodes;
    for (size_t j = nodes.size(); j-- > 0;)
      if (nodes[j].name == name) return {static_cast<int32_t>(j)};
    fail("internal: layer ", i, " shares the keys of ", name, ", which this graph lacks");
  }

  struct Layer {
    Tensor attn_norm, mlp_norm;
    MlaWeights attn;
    std::optional<DsaIndexerWeights> indexer;  // absent on "shared" layers
    GatedMlpWeights mlp;
    std::optional<MoeWeights> moe;
  };
  DsaConfig cfg_;
  Tensor final_norm_;
  std::vector<Layer> layers_;
};

// GlmMoeDsaConfig.__post_init__'s indexer_types: the list itself, else index_topk_pattern
// ("F"ull / "S"hared per layer, a string or a list), else every layer i with
// max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0 full (by default all).
std::vector<bool> read_indexer_types(const JsonFields& f, int64_t num_layers) {
  std::vector<bool> full(static_cast<size_t>(num_layers), true);
  auto set = [&](const char* field, const Json& list, const char* f_name, const char* s_name) {
    if (static_cast<int64_t>(list.size()) != num_layers)
      fail(f.origin(), ": field \"", field, "\" must give ", num_layers, " layers");
    for (int64_t i = 0; i < num_layers; ++i) {
      const Json& t = list[static_cast<size_t>(i)];
      if (t != f_name && t != s_name)
        fail(f.origin(), ": ", field, "[", i, "] is ", t.dump(), "; \"", f_name, "\" or \"", s_name,
             "\"");
      full[static_cast<size_t>(i)] = t == f_name;
    }
  };
  if (f.has("indexer_types")) {
    if (!f.at("indexer_types").is_array())
      fail(f.origin(), ": field \"indexer_types\" is ", f.at("indexer_types").dump(),
           ", not a list");
    set("indexer_types", f.at("indexer_types"), "full", "shared");
  } else if (f.has("index_topk_pattern")) {
    const Json& pattern = f.at("index_topk_pattern");
    Json list = Json::array();
    if (pattern.is_string())
      for (char c : pattern.get<std::string>()) list.push_back(std::string(1, c));
    else
      list = pattern;
    if (!list.is_array()) fail(f.origin(), ": field \"index_topk_pattern\" is ", pattern.dump());
    // A list pattern holds "full" / "shared" as indexer_types does.
    const bool letters = pattern.is_string();
    set("index_topk_pattern", list, letters ? "F" : "full", letters ? "S" : "shared");
  } else {
    const int64_t freq = std::max<int64_t>(f.get_or<int64_t>("index_topk_freq", 1), 1);
    const int64_t offset = f.get_or<int64_t>("index_skip_topk_offset", 2);
    for (int64_t i = 0; i < num_layers; ++i)
      full[static_cast<size_t>(i)] = std::max<int64_t>(i - offset + 1, 0) % freq == 0;
  }
  if (num_layers > 0 && !full[0])
    fail(f.origin(), ": layer 0 shares its indexer's keys, but no earlier layer has an indexer");
  return full;
}

}  // namespace

std::unique_ptr<Model> build_dsa(const Checkpoint& ckpt, DsaConfig cfg, const ModelOptions& opts) {
  return std::make_unique<DsaModel>(ckpt, std::move(cfg), opts);
}

std::unique_ptr<Model> load_glm_moe_dsa(const Checkpoint& ckpt, const ModelOptions& opts) {
  // GlmMoeDsaConfig defaults.
  DeepseekConfig b = read_deepseek_config(ckpt, {.vocab_size = 154880,
                                                 .hidden_size = 6144,
                                                 .intermediate_size = 12288,
                                                 .num_layers = 78,
                                                 .heads = 64,
                                                 .max_position_embeddings = 202752,
                                                 .q_lora_rank = 2048,
                                                 .kv_lora_rank = 512,
                                                 .qk_nope = 192,
                                                 .qk_rope = 64,
                                                 .v_head_dim = 256,
                                                 .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  // GlmMoeDsaAttention always rotates interleaved pairs (it has no rope_interleave).
  b.mla.rope_layout = graph::RopeLayout::Interleaved;
  b.moe = read_sigmoid_moe(f, {.experts = 256,
                               .top_k = 8,
                               .inter = 2048,
                               .shared_experts = 1,
                               .groups = 1,
                               .top_groups = 1,
                               .first_dense = 3,
                               .scale = 2.5,
                               .norm_topk = true});
  b.layer_moe = read_mlp_layer_types(f, b.num_layers, 3);
  check_moe_spec(ckpt, f, b.moe,
                 {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
  DsaConfig c = read_dsa_config(ckpt, std::move(b),
                                {.heads = 32,
                                 .head_dim = 128,
                                 .top_k = 2048,
                                 .qk_rope = 0,
                                 .rope_layout = graph::RopeLayout::Interleaved});
  c.layer_indexer = read_indexer_types(f, c.base.num_layers);
  return build_dsa(ckpt, std::move(c), opts);
}

}  // namespace lathe
