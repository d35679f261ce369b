#include "models/mamba2_mixer.h"

#include "core/error.h"

namespace lathe {

void check_mamba2_mixer_spec(const JsonFields& f, const Mamba2MixerSpec& s,
                             const std::array<const char*, 5>& names) {
  check_sizes(f, {{names[0], s.heads},
                  {names[1], s.head_dim},
                  {names[2], s.state_size},
                  {names[3], s.n_groups},
                  {names[4], s.conv_kernel}});
  if (s.heads % s.n_groups != 0)
    fail(f.origin(), ": ", names[0], " ", s.heads, " is not a multiple of ", names[3], " ",
         s.n_groups);
  if (s.conv_kernel > 64)
    fail(f.origin(), ": field \"", names[4], "\" is ", s.conv_kernel,
         "; lathe keeps at most 64 positions of convolution state");
  if (s.conv_dim() > (int64_t{1} << 31) || s.heads * s.head_dim * s.state_size > (int64_t{1} << 31))
    fail(f.origin(), ": ", names[0], ", ", names[1], ", ", names[3], " and ", names[2],
         " out of range");
}

void read_time_step_limit(const JsonFields& f, Mamba2MixerSpec& s) {
  if (!f.has("time_step_limit")) return;
  const Json& v = f.at("time_step_limit");
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !(v[1].is_number() || v[1].is_null()))
    fail(f.origin(), ": field \"time_step_limit\" must be [min, max], got ", v.dump());
  s.dt_min = v[0].get<float>();
  if (v[1].is_number()) s.dt_max = v[1].get<float>();
  if (!(s.dt_min >= 0 && s.dt_min <= s.dt_max))
    fail(f.origin(), ": field \"time_step_limit\" is ", v.dump(),
         "; it must be [min, max] with 0 <= min <= max");
}

Mamba2MixerWeights load_mamba2_mixer(Weights& w, const std::string& m, const Mamba2MixerSpec& s) {
  Mamba2MixerWeights l;
  const int64_t h = s.hidden, inter = s.intermediate(), heads = s.heads;
  const int64_t proj = inter + s.conv_dim() + heads;
  l.in_proj = w.matrix(m + "in_proj.weight", {proj, h});
  if (s.in_bias) l.in_bias = w.vector(m + "in_proj.bias", {proj});
  l.conv = w.vector(m + "conv1d.weight", {s.conv_dim(), 1, s.conv_kernel});
  if (s.use_conv_bias) l.conv_bias = w.vector(m + "conv1d.bias", {s.conv_dim()});
  l.dt_bias = w.vector(m + "dt_bias", {heads});
  l.a_log = w.vector(m + "A_log", {heads});
  l.d = w.vector(m + "D", {heads});
  if (s.gated_norm != Mamba2GatedNorm::GateOnly) l.norm = w.vector(m + "norm.weight", {inter});
  l.out_proj = w.matrix(m + "out_proj.weight", {h, inter});
  if (s.out_bias) l.out_bias = w.vector(m + "out_proj.bias", {h});
  return l;
}

LayerStateSpec mamba2_mixer_state(const Mamba2MixerSpec& s) {
  return {.kind = StateKind::Recurrent,
          .recurrent = {{s.conv_kernel - 1, s.conv_dim()}, {s.heads, s.state_size, s.head_dim}}};
}

namespace blocks {

Value mamba2_mixer(Builder& g, Value x, const Mamba2MixerWeights& w, const Mamba2MixerSpec& s,
                   int64_t layer, const std::string& p) {
  const int64_t n = g.dim(x, 0), inter = s.intermediate(), bc = s.bc_dim();
  const std::array<float, 5>& m = s.section_scales;
  auto scaled = [&](Value v, float f) { return f != 1 ? g.scale(v, f) : v; };
  // Mamba2Mixer.torch_forward: in_proj splits into [gate | xBC | dt].
  const Value proj = linear(g, scaled(x, s.in_scale), w.in_proj, w.in_bias);
  const Value gate = scaled(g.slice(proj, 0, inter), m[0]);
  Value xbc = g.slice(proj, inter, s.conv_dim());
  if (m[1] != 1 || m[2] != 1 || m[3] != 1)  // FalconH1's mup_vector on x, B and C
    xbc = g.concat(
        g.concat(scaled(g.slice(xbc, 0, inter), m[1]), scaled(g.slice(xbc, inter, bc), m[2])),
        scaled(g.slice(xbc, inter + bc, bc), m[3]));
  const Value dt = scaled(g.slice(proj, inter + s.conv_dim(), s.heads), m[4]);
  xbc = g.activation(s.act, g.causal_conv(xbc, g.weight(w.conv), g.weight(w.conv_bias),
                                          {.layer = layer, .slot = 0}));
  const Value xs = g.reshape(g.slice(xbc, 0, inter), {n, s.heads, s.head_dim});
  const Value b = g.reshape(g.slice(xbc, inter, bc), {n, s.n_groups, s.state_size});
  const Value c = g.reshape(g.slice(xbc, inter + bc, bc), {n, s.n_groups, s.state_size});
  Value y = g.ssd(xs, dt, g.weight(w.a_log), g.weight(w.dt_bias), b, c, g.weight(w.d), s.dt_min,
                  s.dt_max, {.layer = layer, .slot = 1});
  g.name(y, p + "attn");
  y = g.reshape(y, {n, inter});
  auto group_norm = [&](Value v) {  // an RMSNorm per group of inter / n_groups channels
    return g.reshape(
        g.rms_norm(g.reshape(v, {n, s.n_groups, inter / s.n_groups}), g.weight(w.norm), s.eps),
        {n, inter});
  };
  switch (s.gated_norm) {
    case Mamba2GatedNorm::GateThenNorm:
      y = group_norm(g.act_mul(graph::Activation::Silu, gate, y));
      break;
    case Mamba2GatedNorm::NormThenGate:
      y = g.act_mul(graph::Activation::Silu, gate, group_norm(y));
      break;
    case Mamba2GatedNorm::GateOnly:
      y = g.act_mul(graph::Activation::Silu, gate, y);
      break;
  }
  return g.name(linear(g, y, w.out_proj, w.out_bias), p + "attn_out");
}

}  // namespace blocks
}  // namespace lathe
