// Pieces the Gemma family shares beyond the Gemma2 decoder (models/arch/gemma2.h): the rotary of
// each layer type as Gemma3 reads it (Gemma3n reads it alike), and what Gemma3n brought and
// Gemma4 kept: attention unscaled over q and k RMS-normed per head and values RMS-normed
// without a weight, the last num_kv_shared_layers layers reading an earlier layer's cache, and
// per-layer embeddings (PLE) fed to each layer through a gated projection.
#pragma once

#include <string>
#include <vector>

#include "graph/builder.h"
#include "models/config_fields.h"
#include "models/layers.h"

namespace lathe {

// Gemma3TextConfig / Gemma3nTextConfig.convert_rope_params_to_dict: rope_parameters keyed by
// layer type; the legacy fields give full layers rope_theta (1e6) and rope_scaling, sliding
// layers rope_local_base_freq (1e4). Returns {full_attention, sliding_attention}.
std::vector<RopeConfig> read_gemma3_ropes(const JsonFields& f, int64_t head_dim,
                                          int64_t max_position_embeddings);

// One attention layer of Gemma3n or Gemma4: its kind, sizes and the cache layer it reads.
struct GemmaAttentionLayer {
  bool sliding = false;
  int64_t window = 0;  // sliding_window on sliding layers
  int64_t head_dim = 0, kv_heads = 0;
  bool k_eq_v = false;     // Gemma4 attention_k_eq_v on a full layer: values = keys' projection
  int64_t kv_layer = 0;    // the cache layer it attends over (itself unless KV-shared)
  bool kv_shared = false;  // kv_sharing_modes "reuse": no k/v projections or norms of its own
};

// kv_sharing_modes (Gemma3nTextConfig, Gemma4TextConfig): the last num_kv_shared_layers layers
// ("reuse") attend over the keys and values of the last earlier layer of their type ("store").
void read_kv_sharing_of(const JsonFields& f, const std::vector<GemmaAttentionLayer*>& layers);
template <class L>
void read_kv_sharing(const JsonFields& f, std::vector<L>& layers) {
  std::vector<GemmaAttentionLayer*> p;
  for (L& l : layers) p.push_back(&l);
  read_kv_sharing_of(f, p);
}

struct GemmaAttentionWeights {
  Tensor q, k, v, o, q_norm, k_norm;  // k, v, k_norm undefined where not loaded
  Tensor v_norm;                      // RMSNorm(with_scale=False): a weight of ones, made here
};
GemmaAttentionWeights load_gemma_attention(Weights& w, const std::string& prefix,
                                           const GemmaAttentionLayer& c, int64_t heads,
                                           int64_t hidden);

// Gemma3nTextAttention / Gemma4TextAttention on x [n, hidden]: q, k (RMS-normed per head,
// rotary) and v (RMS-normed without a weight), attention with scaling 1.0 over the layer's
// cache, or the cache of kv_layer when KV-shared; names q, k, v, attn and attn_out.
graph::Value gemma_attention(graph::Builder& g, graph::Value x, const GemmaAttentionLayer& c,
                             const GemmaAttentionWeights& w, int64_t heads, float eps,
                             graph::Value rope_tables, const std::string& prefix);

// The KV state of such layers: each at its own size (a ring on sliding layers); KV-shared
// layers keep nothing.
std::vector<LayerStateSpec> gemma_layer_states(const std::vector<GemmaAttentionLayer>& layers);

// embed_tokens_per_layer, per_layer_model_projection and per_layer_projection_norm.
struct PerLayerEmbeddings {
  Tensor embed, model_projection, projection_norm;
  int64_t layers = 0, dim = 0;  // num_hidden_layers, hidden_size_per_layer_input
};
PerLayerEmbeddings load_per_layer_embeddings(Weights& w, const std::string& prefix, int64_t vocab,
                                             int64_t layers, int64_t dim, int64_t hidden);

// get_per_layer_inputs and project_per_layer_inputs: [n, layers * dim], the token's per-layer
// embedding (times sqrt(dim)) plus the RMS-normed projection of the scaled embedding x (times
// hidden_size^-0.5), times 2^-0.5; an id past the per-layer vocabulary reads as `range` says
// (Gemma3n: row 0). Named per_layer_inputs.
graph::Value per_layer_inputs(graph::Builder& g, graph::Value x, graph::Value tokens,
                              const PerLayerEmbeddings& p, float eps,
                              graph::IdRange range = graph::IdRange::Fail);

// per_layer_input_gate, per_layer_projection and post_per_layer_input_norm of one layer.
struct PerLayerInputGate {
  Tensor gate, projection, norm;
};
PerLayerInputGate load_per_layer_input_gate(Weights& w, const std::string& prefix, int64_t hidden,
                                            int64_t dim);
// norm(projection(act(gate(x)) * per_layer_input)), per_layer_input the layer's [n, dim].
graph::Value per_layer_input_gate(graph::Builder& g, graph::Value x, graph::Value per_layer_input,
                                  const PerLayerInputGate& w, graph::Activation act, float eps);

// A weight of n ones (an RMSNorm without a scale).
Tensor ones(int64_t n);

}  // namespace lathe
