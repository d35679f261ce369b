// Qwen3NextForCausalLM: transformers/models/qwen3_next (Qwen3NextConfig in
// configuration_qwen3_next.py, Qwen3NextModel in modeling_qwen3_next.py), and the hybrid
// decoder that Qwen3.5 shares with it (models/arch/qwen3_5.cpp): three Gated DeltaNet layers to
// one gated full-attention layer by default, a Qwen2Moe-style mixture of experts (softmax
// router, top num_experts_per_tok renormalised when norm_topk_prob, a shared expert scaled by
// sigmoid(shared_expert_gate(x))) on the layers decoder_sparse_step and mlp_only_layers
// choose, partial rotary (partial_rotary_factor 0.25 by default).
#include "models/arch/qwen3_next.h"

#include "core/error.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

// Qwen3NextDecoderLayer: x + mixer(norm(x)), then x + mlp(norm(x)).
class Qwen3HybridModel : public Decoder {
 public:
  Qwen3HybridModel(const Checkpoint& ckpt, Qwen3HybridConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const LlamaFamilyConfig& c = cfg_.base;
    ropes_.emplace_back(c.rope);
    const int64_t h = c.hidden_size;
    const std::string& m = cfg_.prefix;
    // Qwen3NextRMSNorm: x / rms(x) * (1 + weight).
    const Norm rms = final_norm_ = Norm::rms(c.rms_norm_eps, 1.0f);
    load(
        ckpt, opts, c,
        [&](Weights& w, int64_t i, const std::string& p) {
          Layer l;
          l.attn_norm = rms.load(w, p + "input_layernorm.", h);
          if (cfg_.layer_linear.at(i))
            l.linear = load_gated_deltanet(w, p + "linear_attn.", cfg_.linear);
          else
            l.attn = load_attention(w, p + "self_attn.", c.attention);
          l.mlp_norm = rms.load(w, p + "post_attention_layernorm.", h);
          if (c.moe && c.layer_moe.at(i))
            l.moe = load_moe(w, p + "mlp.", h, *c.moe, c.moe_names);
          else
            l.mlp = load_gated_mlp(w, p + "mlp.", h, c.intermediate_size);
          layers_.push_back(std::move(l));
        },
        {.embed = m + "embed_tokens.weight", .layers = m + "layers.", .final_norm = m + "norm."},
        [&](Weights& w) {
          // The multi-token prediction layers published checkpoints carry (mtp.*), which
          // transformers leaves unloaded (_keys_to_ignore_on_load_unexpected).
          w.ignore_if([](const std::string& name) { return name.starts_with("mtp."); });
          if (!cfg_.ignored_prefix.empty())
            w.ignore_if(
                [&](const std::string& name) { return name.starts_with(cfg_.ignored_prefix); });
        });
    if (!cfg_.ignored_prefix.empty()) {
      int64_t skipped = 0;
      for (const std::string& name : ckpt.tensor_names())
        skipped += name.starts_with(cfg_.ignored_prefix);
      info_.runs = cat("the text model (", m, "); not loaded: ", skipped, " vision tower tensors (",
                       cfg_.ignored_prefix, ")");
    }
  }

  std::vector<LayerStateSpec> layer_states() const override {
    std::vector<LayerStateSpec> out =
        blocks::kv_layer_states(cfg_.base.attention, cfg_.base.layer_windows);
    for (size_t i = 0; i < out.size(); ++i)
      if (cfg_.layer_linear[i]) out[i] = gated_deltanet_state(cfg_.linear);
    return out;
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    a = l.linear ? blocks::gated_deltanet(g, a, *l.linear, cfg_.linear, i, p)
                 : blocks::self_attention(g, a, l.attn, cfg_.base.attention,
                                          {.rope_tables = in.rope_tables[0], .layer = i}, p);
    x = g.add(x, a);
    graph::Value mn = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, l.moe ? blocks::moe(g, mn, *l.moe, *cfg_.base.moe, p)
                          : blocks::gated_mlp(g, mn, l.mlp, cfg_.base.mlp_act, p));
  }

 private:
  // Qwen3NextRMSNorm: x / rms(x) * (1 + weight).
  struct Layer {
    Norm attn_norm, mlp_norm;
    std::optional<GatedDeltaNetWeights> linear;  // linear-attention layers
    AttentionWeights attn;                       // full-attention layers
    GatedMlpWeights mlp;
    std::optional<MoeWeights> moe;  // instead of mlp on the layers that run experts
  };
  Qwen3HybridConfig cfg_;
  std::vector<Layer> layers_;
};

}  // namespace

Qwen3HybridConfig read_qwen3_hybrid_config(const Checkpoint& ckpt, const JsonFields& f,
                                           const LlamaFamilyDefaults& d, bool fused_projections) {
  Qwen3HybridConfig c;
  c.base = read_llama_family_config(ckpt, f, d);
  LlamaFamilyConfig& b = c.base;
  b.attention.qkv_bias = b.attention.o_bias = f.get_or<bool>("attention_bias", false);
  b.attention.qk_norm = QkNorm::RmsPerHead;
  b.attention.norm_offset = 1.0f;  // Qwen3NextRMSNorm
  b.attention.output_gate = true;
  // Qwen3NextConfig.__post_init__: partial_rotary_factor 0.25 unless given.
  b.rope = read_rope_config(f, b.attention.head_dim, b.max_position_embeddings, d.rope_theta, 0.25);
  c.linear =
      read_gated_deltanet_spec(f, b.hidden_size, b.rms_norm_eps, b.mlp_act, fused_projections);
  const int64_t n = b.num_layers;
  if (f.has("layer_types")) {
    const Json& types = f.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != n)
      fail(f.origin(), ": field \"layer_types\" must list ", n, " layer types");
    for (int64_t i = 0; i < n; ++i) {
      if (types[i] != "linear_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements linear_attention and full_attention");
      c.layer_linear.push_back(types[i] == "linear_attention");
    }
  } else {
    const int64_t interval = f.get_or<int64_t>("full_attention_interval", 4);
    check_sizes(f, {{"full_attention_interval", interval}});
    for (int64_t i = 0; i < n; ++i) c.layer_linear.push_back((i + 1) % interval != 0);
  }
  return c;
}

std::unique_ptr<Model> build_qwen3_hybrid(const Checkpoint& ckpt, Qwen3HybridConfig cfg,
                                          const ModelOptions& opts) {
  return std::make_unique<Qwen3HybridModel>(ckpt, std::move(cfg), opts);
}

std::unique_ptr<Model> load_qwen3_next(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Qwen3NextConfig defaults.
  Qwen3HybridConfig c = read_qwen3_hybrid_config(ckpt, f,
                                                 {.vocab_size = 151936,
                                                  .hidden_size = 2048,
                                                  .intermediate_size = 5632,
                                                  .num_layers = 48,
                                                  .heads = 16,
                                                  .kv_heads = 2,
                                                  .head_dim = 256,
                                                  .max_position_embeddings = 32768,
                                                  .tie_word_embeddings = false},
                                                 /*fused_projections=*/true);
  const int64_t experts = f.get_or<int64_t>("num_experts", 512);
  c.base.moe = MoeSpec{.experts = experts,
                       .top_k = f.get_or<int64_t>("num_experts_per_tok", 10),
                       .inter = f.get_or<int64_t>("moe_intermediate_size", 512),
                       .norm_topk = f.get_or<bool>("norm_topk_prob", true),
                       .shared_inter = f.get_or<int64_t>("shared_expert_intermediate_size", 512),
                       .shared_gate = true};
  c.base.layer_moe = read_sparse_layers(f, c.base.num_layers, experts);
  if (experts > 0) check_moe_spec(ckpt, f, *c.base.moe);
  return build_qwen3_hybrid(ckpt, std::move(c), opts);
}

}  // namespace lathe
