// GPTBigCodeForCausalLM: transformers/models/gpt_bigcode (configuration_gpt_bigcode.py,
// modeling_gpt_bigcode.py). The GPT family decoder (gpt_family.h) with nn.Linear weights and
// multi-query attention: with multi_query (the default) c_attn's rows are [q | k | v] with one
// key and one value head; without it each head's rows are [q, k, v] in turn.
#include "core/error.h"
#include "models/arch/gpt_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_gpt_bigcode(const Checkpoint& ckpt, const ModelOptions& opts) {
  GptFamilyConfig c = read_gpt_family_config(ckpt, "gelu_pytorch_tanh");
  JsonFields f(ckpt.config(), ckpt.config_path());
  // GPTBigCodeAttention: kv_heads 1 and c_attn split (embed_dim, kv_dim, kv_dim) under
  // multi_query, else c_attn viewed as (heads, 3 * head_dim).
  if (f.get_or<bool>("multi_query", true)) {
    c.attention.kv_heads = 1;
    c.qkv_groups = 1;
  } else {
    c.qkv_groups = c.attention.heads;
  }
  // attention_softmax_in_fp32 and scale_attention_softmax_in_fp32 only choose the precision
  // of reduced-precision runs; lathe's attention is f32 throughout.
  return build_gpt_family(ckpt, c, opts);
}

}  // namespace lathe
