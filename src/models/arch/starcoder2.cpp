// Starcoder2ForCausalLM: transformers/models/starcoder2 (configuration_starcoder2.py,
// modeling_starcoder2.py). Pre-norm blocks with LayerNorm (weight and bias), rotary
// grouped-query attention with biases (use_bias), an ungated MLP c_proj(act(c_fc(x))), and an
// optional sliding window on every layer.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace lathe {
namespace {

struct Starcoder2Config {
  LlamaFamilyConfig base;  // the fields Starcoder2Config shares with LlamaConfig
  float norm_epsilon = 1e-5f;
  bool use_bias = true;
  graph::Activation act = graph::Activation::GeluTanh;
};

// transformers Starcoder2Model / Starcoder2DecoderLayer: x + attn(ln(x)), then x + mlp(ln(x)).
class Starcoder2Model : public LayerStack {
 public:
  Starcoder2Model(const Checkpoint& ckpt, const Starcoder2Config& cfg, const ModelOptions& opts) {
    const LlamaFamilyConfig& b = cfg.base;
    ropes_.emplace_back(b.rope);
    const int64_t h = b.hidden_size, inter = b.intermediate_size;
    const Norm ln = final_norm_ = Norm::layer(cfg.norm_epsilon);
    load(ckpt, opts, b, [&](Weights& w, int64_t i, const std::string& p) {
      DecoderLayer l{.spec = layer_attention(b, i), .act = cfg.act};
      l.load_norms(w, p, ln, h,
                   {.attn_norm = "input_layernorm.", .mlp_norm = "post_attention_layernorm."});
      l.attn = load_attention(w, p + "self_attn.", l.spec);
      // Starcoder2MLP: c_proj(act(c_fc(x))), an ungated MLP.
      l.mlp = load_linear_mlp(w, p + "mlp.", "c_fc", "c_proj", h, inter, cfg.use_bias);
      layers_.push_back(std::move(l));
    });
  }
};

}  // namespace

std::unique_ptr<Model> load_starcoder2(const Checkpoint& ckpt, const ModelOptions& opts) {
  // Starcoder2Config defaults.
  Starcoder2Config c;
  c.base = read_llama_family_config(ckpt, {.vocab_size = 49152,
                                           .hidden_size = 3072,
                                           .intermediate_size = 12288,
                                           .num_layers = 30,
                                           .heads = 24,
                                           .kv_heads = 2,
                                           .max_position_embeddings = 4096,
                                           .tie_word_embeddings = true,
                                           .hidden_act = nullptr});
  JsonFields f(ckpt.config(), ckpt.config_path());
  c.norm_epsilon = static_cast<float>(f.get_or<double>("norm_epsilon", 1e-5));
  c.use_bias = f.get_or<bool>("use_bias", true);
  c.act = read_activation(f, "hidden_act", "gelu_pytorch_tanh", c.base.architecture);
  c.base.attention.qkv_bias = c.base.attention.o_bias = c.use_bias;
  // sliding_window defaults to null (no window); when set it applies to every layer.
  c.base.layer_windows.assign(static_cast<size_t>(c.base.num_layers),
                              f.get_or<int64_t>("sliding_window", 0));
  return std::make_unique<Starcoder2Model>(ckpt, c, opts);
}

}  // namespace lathe
