// Ministral3ForCausalLM: transformers/models/ministral3 (configuration_ministral3.py,
// modeling_ministral3.py), the text model of Mistral3ForConditionalGeneration's Ministral 3.
// Mistral's block (Llama with an optional sliding window on every layer) whose queries, after
// rotary, are scaled by position as Llama 4's are (get_llama_4_attn_scale):
// 1 + llama_4_scaling_beta * log(1 + floor(pos / original_max_position_embeddings)), both read
// from rope_parameters; yarn rotary by default.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_ministral3(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Ministral3Config defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 131072,
                                                        .intermediate_size = 14336,
                                                        .num_layers = 34,
                                                        .kv_heads = 8,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 262144,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.mlp_bias = false;  // Ministral3MLP and Ministral3Attention have no biases
  // Ministral3Config.__post_init__: without rope parameters, yarn with Llama 4's query scale.
  Json config = f.json();
  if (!f.has("rope_parameters") && !f.has("rope_scaling"))
    config["rope_parameters"] = {{"rope_type", "yarn"},
                                 {"rope_theta", 1000000.0},
                                 {"factor", 16.0},
                                 {"original_max_position_embeddings", 16384},
                                 {"beta_fast", 32.0},
                                 {"beta_slow", 1.0},
                                 {"mscale_all_dim", 1.0},
                                 {"mscale", 1.0},
                                 {"llama_4_scaling_beta", 0.1}};
  const JsonFields cf(config, f.origin());
  c.rope = read_rope_config(cf, c.attention.head_dim, c.max_position_embeddings);
  rotate_whole_head(c.rope, f.origin(), "Ministral3");  // Ministral3's apply_rotary_pos_emb

  // Ministral3Attention reads both scale parameters from rope_parameters, where
  // standardize_rope_params has put original_max_position_embeddings for the scaled kinds
  // (llama3, yarn, longrope) as c.rope holds it; transformers fails without either.
  const char* field = cf.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const JsonFields p(cf.at(field), cat(f.origin(), " (", field, ")"));
  if (!p.has("llama_4_scaling_beta"))
    fail(p.origin(),
         ": field \"llama_4_scaling_beta\" is missing; Ministral3 scales its queries by it");
  RopeConfig q = c.rope;
  q.llama_4_scaling_beta = p.get<double>("llama_4_scaling_beta");
  const bool scaled_kind = c.rope.kind == RopeKind::Llama3 || c.rope.kind == RopeKind::Yarn ||
                           c.rope.kind == RopeKind::LongRope;
  if (!scaled_kind && !p.has("original_max_position_embeddings"))
    fail(p.origin(),
         ": field \"original_max_position_embeddings\" is missing; Ministral3 scales its queries "
         "by position over it");
  q.llama_4_scaling_length = scaled_kind ? c.rope.original_max_position_embeddings
                                         : p.get<int64_t>("original_max_position_embeddings");
  if (q.llama_4_scaling_length <= 0)
    fail(p.origin(), ": field \"original_max_position_embeddings\" is ", q.llama_4_scaling_length,
         ", must be positive");
  if (q.llama_4_scaling_beta != 0) c.query_rope = q;

  // sliding_window: null (the default) or a window for every layer. Ministral3Config warns
  // about layer_types and leaves every layer alike.
  int64_t window = 0;
  if (f.has("sliding_window")) {
    window = f.get<int64_t>("sliding_window");
    if (window <= 0)
      fail(f.origin(), ": field \"sliding_window\" is ", window, "; it must be positive or null");
  }
  c.layer_windows.assign(static_cast<size_t>(c.num_layers), window);
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
