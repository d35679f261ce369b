// OlmoForCausalLM: transformers/models/olmo (configuration_olmo.py, modeling_olmo.py).
// The Llama block with LayerNorms that have no parameters (OlmoLayerNorm, eps 1e-5) and
// q, k and v optionally clamped to [-clip_qkv, clip_qkv] straight after their projections.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct OlmoConfig {
  LlamaFamilyConfig base;  // the fields OlmoConfig shares with LlamaConfig
  graph::Activation act = graph::Activation::Silu;
};

// OlmoLayerNorm: F.layer_norm without weight or bias, at a fixed eps.
const Norm kOlmoNorm = Norm::layer(1e-5f, {.weight = false, .bias = false});

// transformers OlmoModel / OlmoDecoderLayer (pre-norm, as Llama).
class OlmoModel : public LayerStack {
 public:
  OlmoModel(const Checkpoint& ckpt, const OlmoConfig& cfg, const ModelOptions& opts) {
    const LlamaFamilyConfig& b = cfg.base;
    ropes_.emplace_back(b.rope);
    final_norm_ = kOlmoNorm;
    load(ckpt, opts, b, [&](Weights& w, int64_t, const std::string& p) {
      DecoderLayer l{
          .spec = b.attention, .attn_norm = kOlmoNorm, .mlp_norm = kOlmoNorm, .act = cfg.act};
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      l.mlp = load_gated_mlp(w, p + "mlp.", b.hidden_size, b.intermediate_size);
      layers_.push_back(std::move(l));
    });
  }
};

}  // namespace

std::unique_ptr<Model> load_olmo(const Checkpoint& ckpt, const ModelOptions& opts) {
  // OlmoConfig defaults.
  OlmoConfig c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 50304, .hidden_act = nullptr});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.act = read_activation(f, "hidden_act", "silu", c.base.architecture);
  AttentionSpec& a = c.base.attention;
  a.qkv_bias = a.o_bias = f.get_or<bool>("attention_bias", false);
  // clip_qkv: null (the default) means no clamping.
  if (f.has("clip_qkv")) {
    a.clip_qkv = static_cast<float>(f.get<double>("clip_qkv"));
    if (!(a.clip_qkv > 0))
      fail(f.origin(), ": field \"clip_qkv\" is ", a.clip_qkv, "; it must be positive or null");
  }
  return std::make_unique<OlmoModel>(ckpt, c, opts);
}

}  // namespace lathe
