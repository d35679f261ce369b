// MixtralForCausalLM: transformers/models/mixtral. Mistral whose MLP is a sparse mixture of
// experts (MixtralSparseMoeBlock): a softmax router picks num_experts_per_tok of
// num_local_experts experts per token, their weights divided by their sum. Checkpoints name
// the block block_sparse_moe and each expert's gate, down and up projections w1, w2, w3.
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_mixtral(const Checkpoint& ckpt, const ModelOptions& opts) {
  // MixtralConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.intermediate_size = 14336,
                                                        .kv_heads = 8,
                                                        .max_position_embeddings = 4096 * 32,
                                                        .rope_theta = 1e6,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  // sliding_window defaults to null: no window.
  c.layer_windows.assign(static_cast<size_t>(c.num_layers), f.get_or<int64_t>("sliding_window", 0));
  c.moe = MoeSpec{.experts = f.get_or<int64_t>("num_local_experts", 8),
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 2),
                  .inter = c.intermediate_size,
                  .norm_topk = true};
  c.layer_moe.assign(static_cast<size_t>(c.num_layers), true);
  c.moe_module = "block_sparse_moe.";
  c.moe_names = {.gate = "w1", .up = "w3", .down = "w2"};
  check_moe_spec(ckpt, f, *c.moe,
                 {"num_local_experts", "num_experts_per_tok", "intermediate_size"});
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
