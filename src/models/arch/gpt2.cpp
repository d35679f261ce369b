// GPT2LMHeadModel: transformers/models/gpt2 (configuration_gpt2.py, modeling_gpt2.py). The GPT
// family decoder (gpt_family.h) with Conv1D weights stored [in, out], c_attn rows [q | k | v],
// gelu_new, and optionally each layer's attention scale divided by its index + 1.
#include "core/error.h"
#include "models/arch/gpt_family.h"
#include "models/registry.h"

namespace lathe {

std::unique_ptr<Model> load_gpt2(const Checkpoint& ckpt, const ModelOptions& opts) {
  GptFamilyConfig c = read_gpt_family_config(ckpt, "gelu_new");
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.conv1d = true;
  c.qkv_groups = 1;
  // GPT2Attention: scaling /= layer_idx + 1.
  if (f.get_or<bool>("scale_attn_by_inverse_layer_idx", false))
    for (size_t i = 0; i < c.layer_scale.size(); ++i)
      c.layer_scale[i] = static_cast<float>(static_cast<double>(c.layer_scale[i]) / (i + 1.0));
  // reorder_and_upcast_attn (read by eager attention only) computes the scores with
  // baddbmm in f32: the same product lathe's f32 attention computes, so it needs no switch.
  return build_gpt_family(ckpt, c, opts);
}

}  // namespace lathe
