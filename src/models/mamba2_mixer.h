// The Mamba2 mixer, as transformers' Mamba2Mixer (and the copies of it in GraniteMoeHybrid,
// NemotronH, FalconH1) computes it on its torch path: in_proj splits x into the gate z, the
// convolution's input xBC and dt; the depthwise causal convolution (with its activation) over
// xBC, split into x, B and C; the selective state space recurrence (graph Op::Ssd) with the D
// skip; the gated norm (norm(y * silu(z)) per group of intermediate / n_groups channels, the
// gate applied before the norm); out_proj. A layer's state is the convolution's last inputs and
// the SSM state, both independent of the sequence length.
#pragma once

#include <array>
#include <limits>
#include <string>

#include "models/blocks.h"
#include "models/config_fields.h"
#include "models/weights.h"

namespace lathe {

// How the mixer joins its scan output y with the gate z before out_proj:
//   GateThenNorm: norm(y * silu(z)) per group (Mamba2, GraniteMoeHybrid, NemotronH, FalconH1
//                 with mamba_norm_before_gate false);
//   NormThenGate: norm(y) * silu(z) (FalconH1's default mamba_norm_before_gate);
//   GateOnly:     y * silu(z), no norm (FalconH1 with mamba_rms_norm false).
enum class Mamba2GatedNorm : uint8_t { GateThenNorm, NormThenGate, GateOnly };

struct Mamba2MixerSpec {
  int64_t hidden = 0;
  int64_t heads = 0, head_dim = 0, state_size = 0, n_groups = 0, conv_kernel = 0;
  float eps = 0;                                                 // the gated norm's
  bool in_bias = false, out_bias = false, use_conv_bias = true;  // in_proj, out_proj, conv1d
  graph::Activation act = graph::Activation::Silu;               // after the convolution
  float dt_min = 0, dt_max = std::numeric_limits<float>::infinity();
  Mamba2GatedNorm gated_norm = Mamba2GatedNorm::GateThenNorm;
  // FalconH1: x times in_scale before in_proj (ssm_in_multiplier), and in_proj's sections
  // z, x, B, C, dt times these (ssm_multipliers, its mup_vector).
  float in_scale = 1;
  std::array<float, 5> section_scales = {1, 1, 1, 1, 1};

  int64_t intermediate() const { return heads * head_dim; }
  int64_t bc_dim() const { return n_groups * state_size; }  // B's (and C's) columns
  int64_t conv_dim() const { return intermediate() + 2 * bc_dim(); }
};

// The shared checks: the sizes positive, heads a multiple of n_groups, the state's bounds.
// `names` gives the config's field names for heads, head_dim, state_size, n_groups and
// conv_kernel, in that order.
void check_mamba2_mixer_spec(const JsonFields& f, const Mamba2MixerSpec& s,
                             const std::array<const char*, 5>& names);

// time_step_limit: [min, max] that dt is clamped to (default [0, inf), which softplus never
// leaves); a null upper bound is none. transformers clamps in its prompt path
// (mamba2_chunk_scan) but not in its decode step (mamba2_selective_state_update gets no
// dt_limit); lathe clamps in both, so with a limit that bites, transformers' prompt and decode
// paths disagree and lathe follows the first.
void read_time_step_limit(const JsonFields& f, Mamba2MixerSpec& s);

struct Mamba2MixerWeights {
  Tensor in_proj, in_bias, conv, conv_bias, dt_bias, a_log, d, norm, out_proj, out_bias;
};
// in_proj, conv1d, dt_bias, A_log, D, norm and out_proj under `prefix` ("...mixer.").
Mamba2MixerWeights load_mamba2_mixer(Weights& w, const std::string& prefix,
                                     const Mamba2MixerSpec& s);

// State 0: the convolution's last conv_kernel - 1 inputs [kernel - 1, conv_dim]; state 1: the
// SSM state [heads, head_dim, state_size].
LayerStateSpec mamba2_mixer_state(const Mamba2MixerSpec& s);

namespace blocks {

// The mixer of x [n, hidden] on cache layer `layer`: its core named "<prefix>attn" and its
// output (after out_proj) "<prefix>attn_out", as a layer's token-mixing nodes are named.
Value mamba2_mixer(Builder& g, Value x, const Mamba2MixerWeights& w, const Mamba2MixerSpec& s,
                   int64_t layer, const std::string& prefix);

}  // namespace blocks
}  // namespace lathe
