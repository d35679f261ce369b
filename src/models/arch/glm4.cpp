// Glm4ForCausalLM: transformers/models/glm4 (configuration_glm4.py, modeling_glm4.py).
// A sandwich block of RMSNorms: x + post_self_attn_norm(attn(norm(x))), then
// x + post_mlp_norm(mlp(norm(x))); q/k/v biases (attention_bias) without an output bias;
// rotary on the first half of each head (partial_rotary_factor 0.5) as interleaved pairs
// (Glm4's apply_rotary_pos_emb repeats each of the first rot/2 frequencies for a pair); a
// fused gate_up_proj split once at load.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

// transformers Glm4Model / Glm4DecoderLayer: each branch normed before and after.
class Glm4Model : public LayerStack {
 public:
  Glm4Model(const Checkpoint& ckpt, const LlamaFamilyConfig& cfg, const ModelOptions& opts) {
    ropes_.emplace_back(cfg.rope);
    const int64_t h = cfg.hidden_size;
    const Norm rms = final_norm_ = rms_norm_of(cfg);
    load(ckpt, opts, cfg, [&](Weights& w, int64_t, const std::string& p) {
      DecoderLayer l{.spec = cfg.attention, .act = cfg.mlp_act};
      l.load_norms(w, p, rms, h,
                   {.attn_norm = "input_layernorm.",
                    .attn_post_norm = "post_self_attn_layernorm.",
                    .mlp_norm = "post_attention_layernorm.",
                    .mlp_post_norm = "post_mlp_layernorm."});
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      // Glm4MLP: gate, up = gate_up_proj(x).chunk(2).
      l.mlp = load_fused_gate_up_mlp(w, p + "mlp.", h, cfg.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }
};

}  // namespace

std::unique_ptr<Model> load_glm4(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Glm4Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 151552,
                                                        .intermediate_size = 13696,
                                                        .num_layers = 40,
                                                        .kv_heads = 2,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 131072,
                                                        .hidden_act = nullptr,
                                                        .rms_norm_eps = 1.5625e-07});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.mlp_act = read_activation(f, "hidden_act", "silu", c.architecture);
  c.attention.qkv_bias = f.get_or<bool>("attention_bias", true);
  c.attention.o_bias = false;
  c.attention.rope_layout = graph::RopeLayout::Interleaved;
  // Glm4Config's partial_rotary_factor defaults to 0.5 rather than 1.
  c.rope = read_rope_config(f, c.attention.head_dim, c.max_position_embeddings, 10000.0, 0.5);
  return std::make_unique<Glm4Model>(ckpt, c, opts);
}

}  // namespace lathe
