#include "models/arch/deepseek.h"

#include <cmath>

#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/decoder.h"

namespace lathe {
namespace {

// transformers DeepseekV2Model / DeepseekV2DecoderLayer (and V3's): x + attn(norm(x)), then
// x + mlp(norm(x)). Multi-token prediction layers past num_hidden_layers are left unused.
class DeepseekModel : public Decoder {
 public:
  DeepseekModel(const Checkpoint& ckpt, DeepseekConfig cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    ropes_.emplace_back(cfg_.rope);
    const int64_t h = cfg_.hidden_size;
    const Norm rms = final_norm_ = Norm::rms(cfg_.rms_norm_eps);
    MoeNames names;
    names.shared = "shared_experts.";
    load(
        ckpt, opts, cfg_,
        [&](Weights& w, int64_t i, const std::string& p) {
          Layer l;
          l.attn_norm = rms.load(w, p + "input_layernorm.", h);
          l.attn = load_mla(w, p + "self_attn.", cfg_.mla);
          l.mlp_norm = rms.load(w, p + "post_attention_layernorm.", h);
          if (cfg_.layer_moe[static_cast<size_t>(i)])
            l.moe = load_moe(w, p + "mlp.", h, cfg_.moe, names);
          else
            l.mlp = load_gated_mlp(w, p + "mlp.", h, cfg_.intermediate_size);
          layers_.push_back(std::move(l));
        },
        {}, [&](Weights& w) { ignore_layers_from(w, cfg_.num_layers); });
  }

  std::vector<LayerStateSpec> layer_states() const override {
    return std::vector<LayerStateSpec>(static_cast<size_t>(cfg_.num_layers),
                                       mla_layer_state(cfg_.mla));
  }

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    graph::Value a = g.name(blocks::norm(g, x, l.attn_norm), p + "attn_norm");
    x = g.add(x, blocks::mla_attention(g, a, l.attn, cfg_.mla, in.rope_tables[0], i, p));
    graph::Value m = g.name(blocks::norm(g, x, l.mlp_norm), p + "mlp_norm");
    return g.add(x, l.moe ? blocks::moe(g, m, *l.moe, cfg_.moe, p)
                          : blocks::gated_mlp(g, m, l.mlp, graph::Activation::Silu, p));
  }

 private:
  struct Layer {
    Norm attn_norm, mlp_norm;
    MlaWeights attn;
    GatedMlpWeights mlp;
    std::optional<MoeWeights> moe;
  };
  DeepseekConfig cfg_;
  std::vector<Layer> layers_;
};

// yarn_get_mscale of transformers' DeepSeek models.
double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

DeepseekConfig read_deepseek_config(const Checkpoint& ckpt, const DeepseekDefaults& d) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  DeepseekConfig c;
  read_sizes(
      ckpt, f,
      {d.vocab_size, d.hidden_size, d.intermediate_size, d.num_layers, d.max_position_embeddings},
      c);
  c.rms_norm_eps = static_cast<float>(f.get_or<double>("rms_norm_eps", d.rms_norm_eps));
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  MlaSpec& a = c.mla;
  a.hidden = c.hidden_size;
  a.heads = f.get_or<int64_t>("num_attention_heads", d.heads);
  // q_lora_rank null: a plain q_proj.
  a.q_lora_rank =
      f.json().contains("q_lora_rank") ? f.get_or<int64_t>("q_lora_rank", 0) : d.q_lora_rank;
  a.kv_lora_rank = f.get_or<int64_t>("kv_lora_rank", d.kv_lora_rank);
  a.qk_nope = f.get_or<int64_t>("qk_nope_head_dim", d.qk_nope);
  a.qk_rope = f.get_or<int64_t>("qk_rope_head_dim", d.qk_rope);
  a.v_head_dim = f.get_or<int64_t>("v_head_dim", d.v_head_dim);
  a.bias = f.get_or<bool>("attention_bias", false);
  a.rope_layout = f.get_or<bool>("rope_interleave", true) ? graph::RopeLayout::Interleaved
                                                          : graph::RopeLayout::HalfSplit;
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", c.intermediate_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_attention_heads", a.heads},
                  {"kv_lora_rank", a.kv_lora_rank},
                  {"qk_nope_head_dim", a.qk_nope},
                  {"qk_rope_head_dim", a.qk_rope},
                  {"v_head_dim", a.v_head_dim},
                  {"max_position_embeddings", c.max_position_embeddings}});
  if (a.q_lora_rank < 0) fail(f.origin(), ": field \"q_lora_rank\" is ", a.q_lora_rank);
  check_layer_count(ckpt, f, c.num_layers);
  // Rotary over the qk_rope_head_dim dims; the softmax scale is qk_head_dim^-0.5, times
  // yarn's mscale^2 where the rope parameters give mscale_all_dim (yarn_apply_mscale).
  c.rope = read_rope_config(f, a.qk_rope, c.max_position_embeddings);
  double scale = 1.0 / std::sqrt(static_cast<double>(a.qk_nope + a.qk_rope));
  if (c.rope.kind != RopeKind::Default && c.rope.mscale_all_dim.value_or(0) != 0) {
    const double m = yarn_get_mscale(c.rope.factor, *c.rope.mscale_all_dim);
    scale = scale * m * m;
  }
  a.scale = static_cast<float>(scale);
  c.attention = {1, a.latent_dim()};
  return c;
}

std::unique_ptr<Model> build_deepseek(const Checkpoint& ckpt, DeepseekConfig cfg,
                                      const ModelOptions& opts) {
  return std::make_unique<DeepseekModel>(ckpt, std::move(cfg), opts);
}

}  // namespace lathe
