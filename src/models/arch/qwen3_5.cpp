// Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM: transformers/models/qwen3_5 and qwen3_5_moe
// (Qwen3_5TextConfig, Qwen3_5MoeTextConfig), and the language model inside their multimodal
// checkpoints (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration), whose
// config.json nests the text model's config as text_config and whose tensors sit under
// model.language_model.; the vision tower (model.visual.) is left unloaded, as text
// generation never runs it.
//
// Qwen3.5 is the Qwen3Next hybrid decoder (models/arch/qwen3_next.h) with the linear attention's
// projections kept apart (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), interleaved M-RoPE
// (which, for text, rotates every axis by the same position: ordinary partial rotary), a
// dense MLP on every layer (Qwen3.5) or experts on every layer (Qwen3.5-MoE: softmax router,
// top num_experts_per_tok always renormalised, a gated shared expert).
#include "core/error.h"
#include "models/arch/qwen3_next.h"
#include "models/registry.h"

namespace lathe {
namespace {

// Qwen3_5TextConfig and Qwen3_5MoeTextConfig defaults (the MoE one has no intermediate_size).
constexpr LlamaFamilyDefaults kQwen35 = {.vocab_size = 248320,
                                         .intermediate_size = 12288,
                                         .heads = 16,
                                         .kv_heads = 4,
                                         .head_dim = 256,
                                         .max_position_embeddings = 32768};

// config.json, or the text_config of a multimodal one (which then holds tie_word_embeddings
// at its top level).
struct TextConfig {
  JsonFields fields;
  bool multimodal;
};
TextConfig text_config(const Checkpoint& ckpt) {
  const JsonFields top(ckpt.config(), ckpt.config_path());
  if (!top.has("text_config")) return {top, false};
  if (!top.at("text_config").is_object())
    fail(top.origin(), ": field \"text_config\" must be an object");
  return {JsonFields(top.at("text_config"), ckpt.config_path() + ": text_config"), true};
}

Qwen3HybridConfig read_qwen3_5(const Checkpoint& ckpt, const TextConfig& t,
                               const LlamaFamilyDefaults& d) {
  Qwen3HybridConfig c = read_qwen3_hybrid_config(ckpt, t.fields, d, /*fused_projections=*/false);
  c.base.architecture = ckpt.architecture();
  if (t.multimodal) {
    const JsonFields top(ckpt.config(), ckpt.config_path());
    c.base.tie_word_embeddings = top.get_or<bool>("tie_word_embeddings", false);
    c.prefix = "model.language_model.";
    c.ignored_prefix = "model.visual.";
  }
  return c;
}

}  // namespace

std::unique_ptr<Model> load_qwen3_5(const Checkpoint& ckpt, const ModelOptions& opts) {
  return build_qwen3_hybrid(ckpt, read_qwen3_5(ckpt, text_config(ckpt), kQwen35), opts);
}

std::unique_ptr<Model> load_qwen3_5_moe(const Checkpoint& ckpt, const ModelOptions& opts) {
  const TextConfig t = text_config(ckpt);
  LlamaFamilyDefaults d = kQwen35;
  d.hidden_size = 2048;
  d.num_layers = 40;
  d.kv_heads = 2;
  Qwen3HybridConfig c = read_qwen3_5(ckpt, t, d);
  const JsonFields& f = t.fields;
  c.base.moe = MoeSpec{.experts = f.get_or<int64_t>("num_experts", 256),
                       .top_k = f.get_or<int64_t>("num_experts_per_tok", 8),
                       .inter = f.get_or<int64_t>("moe_intermediate_size", 512),
                       .norm_topk = true,
                       .shared_inter = f.get_or<int64_t>("shared_expert_intermediate_size", 512),
                       .shared_gate = true};
  c.base.layer_moe.assign(static_cast<size_t>(c.base.num_layers), true);
  // Checkpoints publish one tensor per expert and projection (transformers fuses them into
  // 3-D gate_up_proj / down_proj on load and splits them again on save).
  check_moe_spec(ckpt, f, *c.base.moe);
  return build_qwen3_hybrid(ckpt, std::move(c), opts);
}

}  // namespace lathe
