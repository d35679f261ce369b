// Ernie4_5_MoeForCausalLM: transformers/models/ernie4_5_moe (ERNIE-4.5-21B-A3B and the like).
// Ernie4_5's block (interleaved rotary pairs) whose MLP is, on the layers i with
// (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <= moe_layer_end_index, a
// mixture of experts: a softmax router whose choice adds moe_statics' e_score_correction_bias,
// weights the scores without it divided by max(their sum, moe_norm_min), plus
// moe_num_shared_experts shared experts. lathe implements use_bias false (every published
// checkpoint's): with it set, transformers adds biases to every projection and the head.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_ernie4_5_moe(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Ernie4_5_MoeConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(ckpt, {.vocab_size = 103424,
                                                        .hidden_size = 2560,
                                                        .intermediate_size = 12288,
                                                        .num_layers = 28,
                                                        .heads = 20,
                                                        .kv_heads = 4,
                                                        .head_dim = 128,
                                                        .max_position_embeddings = 131072,
                                                        .tie_word_embeddings = true,
                                                        .rope_theta = 500000.0,
                                                        .rms_norm_eps = 1e-5});
  JsonFields f(ckpt.config(), ckpt.config_path());
  if (f.get_or<bool>("use_bias", false))
    fail(f.origin(), ": field \"use_bias\" is true; lathe implements Ernie4_5_Moe without biases");
  c.attention.rope_layout = graph::RopeLayout::Interleaved;
  const int64_t experts = f.get_or<int64_t>("moe_num_experts", 64);
  c.moe = MoeSpec{.experts = experts,
                  .top_k = f.get_or<int64_t>("moe_k", 6),
                  .inter = f.get_or<int64_t>("moe_intermediate_size", 1536),
                  .routing = graph::Routing::SoftmaxBiased,
                  .norm_eps = static_cast<float>(f.get_or<double>("moe_norm_min", 1e-12)),
                  .correction_bias = true};
  const int64_t shared = f.get_or<int64_t>("moe_num_shared_experts", 2);
  if (shared < 0 || shared > (int64_t{1} << 16) || c.moe->inter > (int64_t{1} << 31))
    fail(f.origin(), ": field \"moe_num_shared_experts\" is ", shared, ", out of range");
  c.moe->shared_inter = shared * c.moe->inter;
  const int64_t start = f.get_or<int64_t>("moe_layer_start_index", 1);
  const int64_t end = f.get_or<int64_t>("moe_layer_end_index", c.num_layers - 1);
  const int64_t interval = f.get_or<int64_t>("moe_layer_interval", 1);
  if (interval < 1) fail(f.origin(), ": field \"moe_layer_interval\" is ", interval);
  if (experts < 1 || c.moe->top_k < 1 || c.moe->top_k > experts || c.moe->inter < 1)
    fail(f.origin(), ": moe_num_experts ", experts, ", moe_k ", c.moe->top_k,
         ", moe_intermediate_size ", c.moe->inter, " do not fit together");
  c.layer_moe.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i)
    c.layer_moe[static_cast<size_t>(i)] = (i + 1) % interval == 0 && i >= start && i <= end;
  c.moe_names.shared = "shared_experts.";
  c.moe_names.correction_bias = "moe_statics.e_score_correction_bias";
  c.moe_names.correction_bias_row = true;
  check_moe_spec(ckpt, f, *c.moe, {"moe_num_experts", "moe_k", "moe_intermediate_size"});
  return build_llama_family(ckpt, c, opts);
}

}  // namespace lathe
