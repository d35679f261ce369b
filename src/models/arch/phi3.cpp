// Phi3ForCausalLM: transformers/models/phi3 (configuration_phi3.py, modeling_phi3.py).
// The Llama block with fused projections (self_attn.qkv_proj = [q; k; v], mlp.gate_up_proj =
// [gate; up]) that are split once here at load, partial rotary, and an optional sliding
// window on every layer.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

// transformers Phi3Model / Phi3DecoderLayer: x + attn(norm(x)), then x + mlp(norm(x)) (pre-norm,
// as Llama); Phi3MLP: down(silu(gate) * up).
class Phi3Model : public LayerStack {
 public:
  Phi3Model(const Checkpoint& ckpt, const LlamaFamilyConfig& cfg, const ModelOptions& opts) {
    ropes_.emplace_back(cfg.rope);
    const int64_t h = cfg.hidden_size, inter = cfg.intermediate_size;
    const AttentionSpec& s = cfg.attention;
    const int64_t q_out = s.heads * s.head_dim, kv_out = s.kv_heads * s.head_dim;
    const Norm rms = final_norm_ = rms_norm_of(cfg);
    load(ckpt, opts, cfg, [&](Weights& w, int64_t i, const std::string& p) {
      DecoderLayer l{.spec = layer_attention(cfg, i), .act = graph::Activation::Silu};
      l.load_norms(w, p, rms, h,
                   {.attn_norm = "input_layernorm.", .mlp_norm = "post_attention_layernorm."});
      // Phi3Attention slices qkv_proj's output as [q | k | v]: the same rows of the weight.
      const Tensor qkv = w.matrix(p + "self_attn.qkv_proj.weight", {q_out + 2 * kv_out, h});
      l.attn.q = matrix_rows(qkv, 0, q_out);
      l.attn.k = matrix_rows(qkv, q_out, kv_out);
      l.attn.v = matrix_rows(qkv, q_out + kv_out, kv_out);
      l.attn.o = w.matrix(p + "self_attn.o_proj.weight", {h, q_out});
      // Phi3MLP: gate, up = gate_up_proj(x).chunk(2).
      l.mlp = load_fused_gate_up_mlp(w, p + "mlp.", h, inter);
      layers_.push_back(std::move(l));
    });
    // Only longrope depends on the length; with other schedules the rebuild would compute
    // the same keys again.
    if (cfg.rope.kind == RopeKind::LongRope)
      info_.rebuild_cache_at = cfg.rope.original_max_position_embeddings;
  }
};

}  // namespace

std::unique_ptr<Model> load_phi3(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Phi3Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 32064,
                                                        .hidden_size = 3072,
                                                        .intermediate_size = 8192,
                                                        .max_position_embeddings = 4096,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Phi3Config renames rope types "su" and "yarn" to "longrope"; lathe's rope reader would
  // take "yarn" for YaRN, so both are refused rather than misread.
  for (const char* field : {"rope_parameters", "rope_scaling"}) {
    if (!f.has(field) || !f.at(field).is_object()) continue;
    JsonFields r(f.at(field), f.origin() + ": " + field);
    for (const char* key : {"rope_type", "type"})
      if (r.has(key) && (r.at(key) == "su" || r.at(key) == "yarn"))
        fail(f.origin(), ": field \"", field, ".", key, "\" is ", r.at(key).dump(), "; ",
             c.architecture, " in lathe implements \"default\" and \"longrope\"");
  }
  c.mlp_bias = false;  // Phi3MLP has no biases
  // sliding_window defaults to null (no window); when set it applies to every layer.
  c.layer_windows.assign(static_cast<size_t>(c.num_layers), f.get_or<int64_t>("sliding_window", 0));
  return std::make_unique<Phi3Model>(ckpt, c, opts);
}

}  // namespace lathe
