// DeepseekV2ForCausalLM: transformers/models/deepseek_v2 (DeepSeek-V2, -V2-Lite,
// -Coder-V2). The DeepSeek decoder (models/arch/deepseek.h: multi-head latent attention with a
// compressed cache, experts after first_k_dense_replace dense layers) whose router takes a
// softmax over n_routed_experts and the num_experts_per_tok largest (topk_method "greedy"),
// or the largest within the topk_group best of n_group groups, each group scored by its best
// expert ("group_limited_greedy"); weights times routed_scaling_factor, never renormalised;
// plus the shared experts. Rotary in interleaved pairs (DeepseekV2's complex rotation).
#include "core/error.h"
#include "models/arch/deepseek.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_deepseek_v2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // DeepseekV2Config defaults.
  DeepseekConfig c = read_deepseek_config(ckpt, {.vocab_size = 102400,
                                                 .hidden_size = 4096,
                                                 .intermediate_size = 11008,
                                                 .num_layers = 32,
                                                 .heads = 32,
                                                 .max_position_embeddings = 2048});
  JsonFields f(ckpt.config(), ckpt.config_path());
  const std::string method = f.get_or<std::string>("topk_method", "greedy");
  if (method != "greedy" && method != "group_limited_greedy")
    fail(f.origin(), ": field \"topk_method\" is \"", method,
         "\"; DeepseekV2 implements greedy and group_limited_greedy");
  if (!f.has("num_experts_per_tok"))
    fail(f.origin(),
         ": field \"num_experts_per_tok\" is missing (DeepseekV2Config has no default)");
  const bool grouped = method == "group_limited_greedy";
  c.moe = MoeSpec{
      .experts = f.get_or<int64_t>("n_routed_experts", f.get_or<int64_t>("num_experts", 64)),
      .top_k = f.get<int64_t>("num_experts_per_tok"),
      .inter = f.get_or<int64_t>("moe_intermediate_size", 1407),
      .routing = graph::Routing::SoftmaxGreedy,
      .scale = static_cast<float>(f.get_or<double>("routed_scaling_factor", 1.0)),
      .groups = grouped ? f.get<int64_t>("n_group") : 1,
      .top_groups = grouped ? f.get<int64_t>("topk_group") : 1};
  const int64_t shared = f.get_or<int64_t>("n_shared_experts", 2);
  if (shared < 0 || shared > (int64_t{1} << 16) || c.moe.inter > (int64_t{1} << 31))
    fail(f.origin(), ": field \"n_shared_experts\" is ", shared, ", out of range");
  c.moe.shared_inter = shared * c.moe.inter;
  const MoeSpec& m = c.moe;
  if (m.experts <= 0 || m.top_k <= 0 || m.inter <= 0 || m.groups <= 0 || m.top_groups <= 0 ||
      m.experts % m.groups != 0 || m.top_groups > m.groups || m.shared_inter < 0 ||
      m.top_k > m.top_groups * (m.experts / m.groups))
    fail(f.origin(), ": ", m.experts, " experts, num_experts_per_tok ", m.top_k, ", n_group ",
         m.groups, ", topk_group ", m.top_groups, " do not fit together");
  c.layer_moe = read_first_dense_layers(f, c.num_layers, 0);
  check_moe_spec(ckpt, f, c.moe,
                 {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"});
  return build_deepseek(ckpt, std::move(c), opts);
}

}  // namespace lathe
