// PhimoeForCausalLM: transformers/models/phimoe (PhimoeConfig in configuration_phimoe.py,
// PhimoeModel in modeling_phimoe.py). Mixtral's block with LayerNorms (weight and bias) instead
// of RMSNorms, optional attention and lm_head biases, and the sparsemixer router: the top
// logit, then the best of the others, each weighted by a softmax over the logits near it
// (router_jitter_noise), not renormalised. Longrope configs scale cos and sin by short_mscale
// or long_mscale (PhimoeRotaryEmbedding).
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/moe.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct PhimoeConfig {
  LlamaFamilyConfig base;  // attention, rotary, sizes; rms_norm_eps is the LayerNorms' eps
  MoeSpec moe;
  bool lm_head_bias = false;
};

// PhimoeDecoderLayer: x + attn(LN(x)), then x + moe(LN(x)).
class PhimoeModel : public LayerStack {
 public:
  PhimoeModel(const Checkpoint& ckpt, const PhimoeConfig& cfg, const ModelOptions& opts) {
    const LlamaFamilyConfig& c = cfg.base;
    ropes_.emplace_back(c.rope);
    const int64_t h = c.hidden_size;
    const Norm ln = final_norm_ = Norm::layer(c.rms_norm_eps);
    load(
        ckpt, opts, c,
        [&](Weights& w, int64_t i, const std::string& p) {
          DecoderLayer l{.spec = layer_attention(c, i), .moe_spec = cfg.moe};
          l.load_norms(w, p, ln, h,
                       {.attn_norm = "input_layernorm.", .mlp_norm = "post_attention_layernorm."});
          l.attn = load_attention(w, p + "self_attn.", l.spec);
          l.moe = load_moe(w, p + "block_sparse_moe.", h, cfg.moe,
                           {.gate = "w1", .up = "w3", .down = "w2"});
          layers_.push_back(std::move(l));
        },
        {},
        [&](Weights& w) {
          if (cfg.lm_head_bias) lm_head_bias_ = w.vector("lm_head.bias", {c.vocab_size});
        });
    // PhimoeForCausalLM.prepare_inputs_for_generation recomputes the cache once the sequence
    // passes original_max_position_embeddings (the rotary scale changes there).
    if (c.rope.kind == RopeKind::LongRope)
      info_.rebuild_cache_at = c.rope.original_max_position_embeddings;
  }
};

}  // namespace

std::unique_ptr<Model> load_phimoe(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // PhimoeConfig defaults.
  PhimoeConfig c;
  c.base = read_llama_family_config(ckpt, f,
                                    {.vocab_size = 32064,
                                     .intermediate_size = 6400,
                                     .kv_heads = 8,
                                     .max_position_embeddings = 4096 * 32,
                                     .hidden_act = "silu",
                                     .rope_theta = 1e6,
                                     .rms_norm_eps = 1e-5});
  LlamaFamilyConfig& b = c.base;
  b.attention.qkv_bias = b.attention.o_bias = f.get_or<bool>("attention_bias", false);
  c.lm_head_bias = f.get_or<bool>("lm_head_bias", false);
  // sliding_window defaults to null: no window; when set, every layer slides.
  b.layer_windows.assign(static_cast<size_t>(b.num_layers), f.get_or<int64_t>("sliding_window", 0));
  if (b.rope.kind == RopeKind::LongRope) {
    // PhimoeConfig.validate_rope requires both; PhimoeRotaryEmbedding uses them, not the
    // attention factor.
    const char* field = f.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
    JsonFields r(f.at(field), f.origin() + ": " + field);
    for (const char* key : {"short_mscale", "long_mscale"})
      if (!r.has(key) || !r.at(key).is_number())
        fail(f.origin(), ": field \"", field, ".", key, "\" must be a number (longrope)");
    b.rope.phimoe_mscale = true;
    b.rope.short_mscale = r.get<double>("short_mscale");
    b.rope.long_mscale = r.get<double>("long_mscale");
  } else if (b.rope.kind != RopeKind::Default) {
    fail(f.origin(), ": PhimoeForCausalLM in lathe implements the default and longrope rotary");
  }
  c.moe = MoeSpec{.experts = f.get_or<int64_t>("num_local_experts", 16),
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 2),
                  .inter = b.intermediate_size,
                  .routing = graph::Routing::SparseMixer,
                  .norm_eps = static_cast<float>(f.get_or<double>("router_jitter_noise", 0.01))};
  check_moe_spec(ckpt, f, c.moe, {"num_local_experts", "num_experts_per_tok", "intermediate_size"});
  if (c.moe.top_k != 2)
    fail(f.origin(), ": field \"num_experts_per_tok\" is ", c.moe.top_k,
         "; PhiMoE's sparsemixer picks 2 experts");
  return std::make_unique<PhimoeModel>(ckpt, c, opts);
}

}  // namespace lathe
