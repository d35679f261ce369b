// The shared blocks of step graphs: norms, attention, MLPs, as transformers' modules compute
// them, each naming its nodes under the layer's prefix ("layer.3.") as the module tree does:
// q, k, v (after projection, norms and rotary), attn (before o_proj), attn_out, mlp_out.
// Weights are the tensors the model file loaded (models/layers.h has the loaders).
#pragma once

#include <string>

#include "graph/builder.h"
#include "models/layers.h"

namespace lathe::blocks {

using graph::Builder;
using graph::Value;

// x . w^T (+ bias), with an undefined bias meaning none.
Value linear(Builder& g, Value x, const Tensor& w, const Tensor& bias = {},
             graph::Quantize quantize = graph::Quantize::Allowed);
// RMSNorm with its weight scaled by (weight + offset) (offset 1: GemmaRMSNorm).
Value rms_norm(Builder& g, Value x, const Tensor& weight, float eps, float offset = 0);
// torch.nn.LayerNorm with these parameters (either may be undefined).
Value layer_norm(Builder& g, Value x, const NormWeights& w, float eps);
// The norm as loaded: rms_norm or layer_norm by its kind.
Value norm(Builder& g, Value x, const Norm& n);

// The step inputs and tables a layer's attention reads.
struct AttentionInputs {
  Value rope_tables;  // [2, n, rot/2] (unused when the spec has no rotary)
  // The queries' tables where they differ from the keys' (Ministral3's llama-4 position
  // scale); invalid: rope_tables.
  Value q_rope_tables = {};
  int64_t layer = 0;  // the cache layer
  graph::PositionBias bias = graph::PositionBias::None;
  Tensor slopes = {};  // ALiBi slopes [heads] when bias is set
  Tensor sinks = {};   // GptOss: a learned logit per head in the softmax (undefined: none)
};

// Self-attention of x [n, hidden]: projections, optional clipping and q/k norms, rotary on the
// first rot_dim of each head, cache append, causal (windowed) attention, output projection
// (transformers LlamaAttention and the variants AttentionSpec describes).
Value self_attention(Builder& g, Value x, const AttentionWeights& w, const AttentionSpec& s,
                     const AttentionInputs& in, const std::string& prefix);

// down(act(gate(x)) * up(x)), or down(act(up(x))) when the weights have no gate.
Value feed_forward(Builder& g, Value x, const GatedMlpWeights& w, graph::Activation act);
// The same, named "<prefix>mlp_out" (a layer's MLP module output).
Value gated_mlp(Builder& g, Value x, const GatedMlpWeights& w, graph::Activation act,
                const std::string& prefix);

// The KV state of attention layers: full KV, or a sliding ring where the layer has a window.
std::vector<LayerStateSpec> kv_layer_states(const AttentionSpec& s,
                                            const std::vector<int64_t>& layer_windows);

}  // namespace lathe::blocks
