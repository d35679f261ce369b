// Mamba2ForCausalLM: transformers/models/mamba2 (Mamba2Config in configuration_mamba2.py,
// Mamba2Model in modeling_mamba2.py). Every layer is x + Mamba2Mixer(RMSNorm(x)); the mixer
// projects x once into the gate z, the convolution's input xBC and dt, runs the depthwise
// causal convolution (with its activation) over xBC, splits it into x, B and C, runs the
// selective state space recurrence (graph Op::Ssd) with the D skip, then the gated norm
// (MambaRMSNormGated: norm(y * silu(z)) per group of intermediate / n_groups channels, the
// gate applied before the norm) and out_proj.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "models/config_fields.h"
#include "models/decoder.h"
#include "models/layers.h"
#include "models/registry.h"
#include "models/weights.h"

namespace lathe {
namespace {

using graph::Builder;
using graph::Value;

struct Mamba2Config {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
  int64_t heads = 0, head_dim = 0, state_size = 0, n_groups = 0, conv_kernel = 0;
  float eps = 0;
  bool use_bias = false, use_conv_bias = true, tie_word_embeddings = false;
  graph::Activation act = graph::Activation::Silu;
  float dt_min = 0, dt_max = std::numeric_limits<float>::infinity();

  int64_t intermediate() const { return heads * head_dim; }
  int64_t bc_dim() const { return n_groups * state_size; }  // B's (and C's) columns
  int64_t conv_dim() const { return intermediate() + 2 * bc_dim(); }
};

struct Layer {
  Tensor norm;
  Tensor in_proj, in_bias, conv, conv_bias, dt_bias, a_log, d, gated_norm, out_proj, out_bias;
};

// Mamba2Block: x + mixer(norm(x)) (residual_in_fp32 changes nothing: lathe's residual stream
// is F32).
class Mamba2Model : public Decoder {
 public:
  Mamba2Model(const Checkpoint& ckpt, Mamba2Config cfg, const ModelOptions& opts)
      : cfg_(std::move(cfg)) {
    const Mamba2Config& c = cfg_;
    Weights w(ckpt, opts.dtype);
    const int64_t h = c.hidden_size, inter = c.intermediate(), heads = c.heads;
    // Mamba2Model.load_hook: older checkpoints name the embedding "embedding".
    const std::string embed_name = w.has("backbone.embedding.weight")
                                       ? "backbone.embedding.weight"
                                       : "backbone.embeddings.weight";
    embed_ = w.matrix(embed_name, {c.vocab_size, h});
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = cat("backbone.layers.", i, ".");
      const std::string m = p + "mixer.";
      Layer l;
      l.norm = w.vector(p + "norm.weight", {h});
      const int64_t proj = inter + c.conv_dim() + heads;
      l.in_proj = w.matrix(m + "in_proj.weight", {proj, h});
      if (c.use_bias) l.in_bias = w.vector(m + "in_proj.bias", {proj});
      l.conv = w.vector(m + "conv1d.weight", {c.conv_dim(), 1, c.conv_kernel});
      if (c.use_conv_bias) l.conv_bias = w.vector(m + "conv1d.bias", {c.conv_dim()});
      l.dt_bias = w.vector(m + "dt_bias", {heads});
      l.a_log = w.vector(m + "A_log", {heads});
      l.d = w.vector(m + "D", {heads});
      l.gated_norm = w.vector(m + "norm.weight", {inter});
      l.out_proj = w.matrix(m + "out_proj.weight", {h, inter});
      if (c.use_bias) l.out_bias = w.vector(m + "out_proj.bias", {h});
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector("backbone.norm_f.weight", {h});
    lm_head_ = load_lm_head(w, c.tie_word_embeddings, embed_, c.vocab_size, h);
    w.finish(c.architecture);
    info_.architecture = c.architecture;
    info_.vocab_size = c.vocab_size;
    info_.hidden_size = h;
    info_.num_layers = c.num_layers;
    // No positions: the state does not grow with the sequence (the CLI's default cache is
    // min(this, 4096) positions).
    info_.max_position_embeddings = int64_t{1} << 20;
    info_.weight_dtype = w.matrix_dtype();
  }

  // Per layer: the convolution's last conv_kernel - 1 inputs and the SSM state.
  std::vector<LayerStateSpec> layer_states() const override {
    const LayerStateSpec s{.kind = StateKind::Recurrent,
                           .recurrent = {{cfg_.conv_kernel - 1, cfg_.conv_dim()},
                                         {cfg_.heads, cfg_.head_dim, cfg_.state_size}}};
    return std::vector<LayerStateSpec>(static_cast<size_t>(cfg_.num_layers), s);
  }

 protected:
  Value layer(Builder& g, int64_t i, Value x, const LayerInputs&) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const Mamba2Config& c = cfg_;
    const std::string p = cat("layer.", i, ".");
    const int64_t n = g.dim(x, 0), inter = c.intermediate(), bc = c.bc_dim();
    Value a = g.name(blocks::rms_norm(g, x, l.norm, c.eps), p + "attn_norm");
    // Mamba2Mixer.forward (the torch path): in_proj splits into [gate | xBC | dt].
    const Value proj = blocks::linear(g, a, l.in_proj, l.in_bias);
    const Value gate = g.slice(proj, 0, inter);
    Value xbc = g.slice(proj, inter, c.conv_dim());
    const Value dt = g.slice(proj, inter + c.conv_dim(), c.heads);
    xbc = g.activation(c.act, g.causal_conv(xbc, g.weight(l.conv), g.weight(l.conv_bias), {i, 0}));
    const Value xs = g.reshape(g.slice(xbc, 0, inter), {n, c.heads, c.head_dim});
    const Value b = g.reshape(g.slice(xbc, inter, bc), {n, c.n_groups, c.state_size});
    const Value cc = g.reshape(g.slice(xbc, inter + bc, bc), {n, c.n_groups, c.state_size});
    Value y = g.ssd(xs, dt, g.weight(l.a_log), g.weight(l.dt_bias), b, cc, g.weight(l.d), c.dt_min,
                    c.dt_max, {i, 1});
    // The mixing core and the mixer's output under the names a layer's token-mixing nodes get
    // (attention's, Gated DeltaNet's): attn, attn_out.
    g.name(y, p + "attn");
    // MambaRMSNormGated: (y * silu(gate)), then an RMSNorm per group of channels.
    y = g.act_mul(graph::Activation::Silu, gate, g.reshape(y, {n, inter}));
    y = g.rms_norm(g.reshape(y, {n, c.n_groups, inter / c.n_groups}), g.weight(l.gated_norm),
                   c.eps);
    const Value out = blocks::linear(g, g.reshape(y, {n, inter}), l.out_proj, l.out_bias);
    return g.add(x, g.name(out, p + "attn_out"));
  }

  Value final_norm(Builder& g, Value x) const override {
    return blocks::rms_norm(g, x, final_norm_, cfg_.eps);
  }

 private:
  Mamba2Config cfg_;
  Tensor final_norm_;
  std::vector<Layer> layers_;
};

// Mamba2Config.time_step_limit: [min, max] that dt is clamped to (default [0, inf), which
// softplus never leaves). transformers clamps in its prompt path (mamba2_chunk_scan) but not
// in its decode step (mamba2_selective_state_update gets no dt_limit); lathe clamps in both,
// so with a limit that bites, transformers' prompt and decode paths disagree and lathe follows
// the first.
void read_time_step_limit(const JsonFields& f, Mamba2Config& c) {
  if (!f.has("time_step_limit")) return;
  const Json& v = f.at("time_step_limit");
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !(v[1].is_number() || v[1].is_null()))
    fail(f.origin(), ": field \"time_step_limit\" must be [min, max], got ", v.dump());
  c.dt_min = v[0].get<float>();
  if (v[1].is_number()) c.dt_max = v[1].get<float>();
  if (!(c.dt_min >= 0 && c.dt_min <= c.dt_max))
    fail(f.origin(), ": field \"time_step_limit\" is ", v.dump(),
         "; it must be [min, max] with 0 <= min <= max");
}

}  // namespace

std::unique_ptr<Model> load_mamba2(const Checkpoint& ckpt, const ModelOptions& opts) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  // Mamba2Config defaults.
  Mamba2Config c;
  c.architecture = "Mamba2ForCausalLM";
  c.vocab_size = f.get_or<int64_t>("vocab_size", 32768);
  c.hidden_size = f.get_or<int64_t>("hidden_size", 4096);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", 64);
  c.heads = f.get_or<int64_t>("num_heads", 128);
  c.head_dim = f.get_or<int64_t>("head_dim", 64);
  c.state_size = f.get_or<int64_t>("state_size", 128);
  c.n_groups = f.get_or<int64_t>("n_groups", 8);
  c.conv_kernel = f.get_or<int64_t>("conv_kernel", 4);
  const int64_t expand = f.get_or<int64_t>("expand", 2);
  c.eps = static_cast<float>(f.get_or<double>("layer_norm_epsilon", 1e-5));
  c.use_bias = f.get_or<bool>("use_bias", false);
  c.use_conv_bias = f.get_or<bool>("use_conv_bias", true);
  c.tie_word_embeddings = f.get_or<bool>("tie_word_embeddings", false);
  c.act = read_activation(f, "hidden_act", "silu", c.architecture);
  check_sizes(f, {{"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"num_hidden_layers", c.num_layers},
                  {"num_heads", c.heads},
                  {"head_dim", c.head_dim},
                  {"state_size", c.state_size},
                  {"n_groups", c.n_groups},
                  {"conv_kernel", c.conv_kernel},
                  {"expand", expand}});
  // Mamba2Config.validate_architecture.
  if (c.hidden_size * expand != c.heads * c.head_dim)
    fail(f.origin(), ": hidden_size * expand (", c.hidden_size * expand,
         ") must equal num_heads * head_dim (", c.heads * c.head_dim, ")");
  if (c.heads % c.n_groups != 0)
    fail(f.origin(), ": num_heads ", c.heads, " is not a multiple of n_groups ", c.n_groups);
  if (c.conv_kernel > 64)
    fail(f.origin(), ": field \"conv_kernel\" is ", c.conv_kernel,
         "; lathe keeps at most 64 positions of convolution state");
  if (c.conv_dim() > (int64_t{1} << 31) || c.heads * c.head_dim * c.state_size > (int64_t{1} << 31))
    fail(f.origin(), ": num_heads, head_dim, n_groups and state_size out of range");
  read_time_step_limit(f, c);
  return std::make_unique<Mamba2Model>(ckpt, std::move(c), opts);
}

}  // namespace lathe
