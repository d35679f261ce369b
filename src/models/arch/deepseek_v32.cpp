// DeepseekV32ForCausalLM: transformers/models/deepseek_v32 (DeepSeek-V3.2). DeepSeek-V3's
// decoder with DeepSeek sparse attention in every layer (models/dsa.h; the decoder is built
// in glm_moe_dsa.cpp): GlmMoeDsa's computation except that the indexer rotates its queries
// and keys half-split (DeepseekV32Indexer's apply_rotary_pos_emb) while the attention rotates
// interleaved pairs, and that no layer shares another's chosen keys.
#include "models/dsa.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_deepseek_v32(const Checkpoint& ckpt, const ModelOptions& opts) {
  // DeepseekV32Config defaults.
  DeepseekConfig b = read_deepseek_config(ckpt, {.vocab_size = 129280,
                                                 .hidden_size = 7168,
                                                 .intermediate_size = 18432,
                                                 .num_layers = 61,
                                                 .heads = 128,
                                                 .max_position_embeddings = 163840});
  JsonFields f(ckpt.config(), ckpt.config_path());
  // DeepseekV32Attention always rotates interleaved pairs (rope_interleave is not read).
  b.mla.rope_layout = graph::RopeLayout::Interleaved;
  b.moe = read_sigmoid_moe(f, {.experts = 256,
                               .top_k = 8,
                               .inter = 2048,
                               .shared_experts = 1,
                               .groups = 8,
                               .top_groups = 4,
                               .first_dense = 3,
                               .scale = 2.5,
                               .norm_topk = true});
  b.layer_moe = read_mlp_layer_types(f, b.num_layers, 3);
  check_moe_spec(ckpt, f, b.moe,
                 {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
  DsaConfig c = read_dsa_config(ckpt, std::move(b),
                                {.heads = 64,
                                 .head_dim = 128,
                                 .top_k = 2048,
                                 .qk_rope = 0,
                                 .rope_layout = graph::RopeLayout::HalfSplit});
  c.layer_indexer.assign(static_cast<size_t>(c.base.num_layers), true);
  return build_dsa(ckpt, std::move(c), opts);
}

}  // namespace lathe
