// Mamba2ForCausalLM: transformers/models/mamba2 (Mamba2Config in configuration_mamba2.py,
// Mamba2Model in modeling_mamba2.py). Every layer is x + Mamba2Mixer(RMSNorm(x)); the mixer
// projects x once into the gate z, the convolution's input xBC and dt, runs the depthwise
// causal convolution (with its activation) over xBC, splits it into x, B and C, runs the
// selective state space recurrence (graph Op::Ssd) with the D skip, then the gated norm
// (MambaRMSNormGated: norm(y * silu(z)) per group of intermediate / n_groups channels, the
// gate applied before the norm) and out_proj.
#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/layers.h"
#include "models/mamba2_mixer.h"
#include "models/registry.h"
#include "models/weights.h"

namespace lathe {
namespace {

using graph::Builder;
using graph::Value;

struct Mamba2Config {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
  Mamba2MixerSpec mixer;
  bool tie_word_embeddings = false;
};

struct Layer {
  Norm norm;
  Mamba2MixerWeights mixer;
};

// Mamba2Block: x + mixer(norm(x)) (residual_in_fp32 changes nothing: lathe's residual stream
// is F32).
class Mamba2Model : public Decoder {
 public:
  Mamba2Model(const Checkpoint& ckpt, Mamba2Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const Mamba2Config& c = cfg_;
    const int64_t h = c.hidden_size;
    final_norm_ = Norm::rms(c.mixer.eps);
    // Mamba2Model.load_hook: older checkpoints name the embedding "embedding".
    const std::string embed_name = ckpt.has("backbone.embedding.weight")
                                       ? "backbone.embedding.weight"
                                       : "backbone.embeddings.weight";
    Weights w(ckpt, opts.dtype, !opts.dequantize_fp8);
    load(w,
         {.architecture = c.architecture,
          .vocab_size = c.vocab_size,
          .hidden_size = h,
          .num_layers = c.num_layers,
          .tie_word_embeddings = c.tie_word_embeddings},
         [&](Weights& w, int64_t, const std::string& p) {
           layers_.push_back({.norm = final_norm_.load(w, p + "norm.", h),
                              .mixer = load_mamba2_mixer(w, p + "mixer.", c.mixer)});
         },
         {.embed = embed_name, .layers = "backbone.layers.", .final_norm = "backbone.norm_f."}, {});
    info_.architecture = c.architecture;
    info_.vocab_size = c.vocab_size;
    info_.hidden_size = h;
    info_.num_layers = c.num_layers;
    // No positions: the state does not grow with the sequence (the CLI's default cache is
    // min(this, 4096) positions).
    info_.max_position_embeddings = int64_t{1} << 20;
    info_.weight_dtype = w.matrix_dtype();
  }

  std::vector<LayerStateSpec> layer_states() const override {
    return std::vector<LayerStateSpec>(static_cast<size_t>(cfg_.num_layers),
                                       mamba2_mixer_state(cfg_.mixer));
  }

 protected:
  Value layer(Builder& g, int64_t i, Value x, const LayerInputs&) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const std::string p = layer_prefix(i);
    const Value a = g.name(blocks::norm(g, x, l.norm), p + "attn_norm");
    return g.add(x, blocks::mamba2_mixer(g, a, l.mixer, cfg_.mixer, i, p));
  }

 private:
  Mamba2Config cfg_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_mamba2(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Mamba2Config defaults.
  Mamba2Config c;
  c.architecture = "Mamba2ForCausalLM";
  c.vocab_size = f.get_or<int64_t>("vocab_size", 32768);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 4096);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 64);
  Mamba2MixerSpec& m = c.mixer;
  m.hidden = c.hidden_size;
  m.heads = f.get_or<int64_t>("num_heads", 128);
  m.head_dim = f.get_or<int64_t>("head_dim", 64);
  m.state_size = f.get_or<int64_t>("state_size", 128);
  m.n_groups = f.get_or<int64_t>("n_groups", 8);
  m.conv_kernel = f.get_or<int64_t>("conv_kernel", 4);
  const int64_t expand = f.get_or<int64_t>("expand", 2);
  m.eps = static_cast<float>(f.get_or<double>("layer_norm_epsilon", 1e-5));
  m.in_bias = m.out_bias = f.get_or<bool>("use_bias", false);
  m.use_conv_bias = f.get_or<bool>("use_conv_bias", true);
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  m.act = read_activation(f, "hidden_act", "silu", c.architecture);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"num_hidden_layers", c.num_layers},
                  {"expand", expand}});
  // Mamba2Config.validate_architecture.
  if (c.hidden_size * expand != m.heads * m.head_dim)
    fail(f.origin(), ": hidden_size * expand (", c.hidden_size * expand,
         ") must equal num_heads * head_dim (", m.heads * m.head_dim, ")");
  check_mamba2_mixer_spec(f, m, {"num_heads", "head_dim", "state_size", "n_groups", "conv_kernel"});
  read_time_step_limit(f, m);
  return std::make_unique<Mamba2Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
