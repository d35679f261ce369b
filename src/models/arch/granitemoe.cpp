// GraniteMoeForCausalLM: transformers/models/granitemoe. Granite (its four multipliers) whose
// MLP is a mixture of experts: the router takes the num_experts_per_tok largest logits and a
// softmax over those; checkpoints keep every expert in 3-D tensors, input_linear
// [experts, 2 * intermediate, hidden] (gate rows, then up) and output_linear.
#include "models/arch/granite.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_granitemoe(const Checkpoint& ckpt, const ModelOptions& opts) {
  // GraniteMoeConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {});
  JsonFields f(ckpt.config(), ckpt.config_path());
  read_granite_multipliers(f, c);
  c.moe = MoeSpec{.experts = f.get_or<int64_t>("num_local_experts", 8),
                  .top_k = f.get_or<int64_t>("num_experts_per_tok", 2),
                  .inter = c.intermediate_size,
                  .routing = graph::Routing::TopKSoftmax};
  c.layer_moe.assign(static_cast<size_t>(c.num_layers), true);
  c.moe_module = "block_sparse_moe.";
  c.moe_names = {.router = "router.layer.weight",
                 .gate_up = "input_linear.weight",
                 .down_fused = "output_linear.weight"};
  check_moe_spec(ckpt, f, *c.moe,
                 {"num_local_experts", "num_experts_per_tok", "intermediate_size"});
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
