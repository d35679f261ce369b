// Gated DeltaNet linear attention, as transformers' Qwen3NextGatedDeltaNet and
// Qwen3_5GatedDeltaNet compute it: projections to queries, keys, values, an output gate z and
// the per-head decay and write strength (a, b); a depthwise causal convolution over [q | k | v]
// followed by the activation; the gated delta rule (graph Op::GatedDeltaRule) with q and k
// L2-normalised; an RMSNorm of each head's output gated by silu(z); the output projection.
// A layer's state is its convolution's last inputs and the delta rule's matrix per value head,
// both independent of the sequence length.
#pragma once

#include <string>

#include "models/blocks.h"
#include "models/config_fields.h"
#include "models/weights.h"

namespace lathe {

struct GatedDeltaNetSpec {
  int64_t hidden = 0;
  int64_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0;  // linear_num_key_heads, ...
  int64_t conv_kernel = 0;                                 // linear_conv_kernel_dim
  float norm_eps = 1e-6f;                                  // rms_norm_eps
  graph::Activation act = graph::Activation::Silu;         // hidden_act, after the convolution
  // Qwen3Next: in_proj_qkvz and in_proj_ba, whose rows are grouped by key head ([q k v.. z..]
  // and [b.. a..] per key head); Qwen3.5: in_proj_qkv ([q | k | v]), in_proj_z, _b and _a.
  bool fused_projections = false;

  int64_t key_dim() const { return k_heads * k_dim; }
  int64_t value_dim() const { return v_heads * v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

// The linear_* fields of Qwen3NextConfig and Qwen3_5TextConfig (whose defaults agree), checked.
GatedDeltaNetSpec read_gated_deltanet_spec(const JsonFields& f, int64_t hidden, float eps,
                                           graph::Activation act, bool fused_projections);

struct GatedDeltaNetWeights {
  Tensor qkvz, ba;        // fused_projections
  Tensor qkv, z, b, a;    // separate projections
  Tensor conv;            // [conv_dim, 1, kernel]
  Tensor dt_bias, a_log;  // [v_heads]
  Tensor norm;            // [v_dim]
  Tensor out;             // [hidden, value_dim]
};
GatedDeltaNetWeights load_gated_deltanet(Weights& w, const std::string& prefix,
                                         const GatedDeltaNetSpec& s);

// State 0: the convolution's last kernel - 1 inputs [kernel - 1, conv_dim]; state 1: the
// delta rule's [v_heads, k_dim, v_dim].
LayerStateSpec gated_deltanet_state(const GatedDeltaNetSpec& s);

namespace blocks {

// The layer's linear attention of x [n, hidden] on cache layer `layer`, its output (after
// out_proj) named "<prefix>attn_out" as transformers' linear_attn module output.
Value gated_deltanet(Builder& g, Value x, const GatedDeltaNetWeights& w, const GatedDeltaNetSpec& s,
                     int64_t layer, const std::string& prefix);

}  // namespace blocks
}  // namespace lathe
