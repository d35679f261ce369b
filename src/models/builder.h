// The shared pieces architectures are built from: norms, attention variants, MLPs. A model
// file composes them; nothing here knows an architecture by name.
#pragma once

#include <string>

#include "models/model.h"
#include "models/rope.h"
#include "models/weights.h"

namespace lathe {

// Calls the trace, if any, with a named intermediate.
inline void record(const Trace* trace, const std::string& name, const Tensor& t) {
  if (trace && *trace) (*trace)(name, t);
}

struct AttentionSpec {
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool qkv_bias = false;  // Qwen2, Llama attention_bias
  bool o_bias = false;    // Llama attention_bias
  bool qk_norm = false;   // Qwen3: RMSNorm over head_dim of q and k, before rotary
  float norm_eps = 1e-6f;
  int64_t window = 0;  // sliding window (0: attend to every earlier position)
  float scale = 0;     // softmax scale; 0 means head_dim^-0.5
};

struct AttentionWeights {
  Tensor q, k, v, o;
  Tensor q_bias, k_bias, v_bias, o_bias;  // undefined when the spec has none
  Tensor q_norm, k_norm;
};

// Loads prefix + {q,k,v,o}_proj.weight (and biases, q_norm/k_norm) as the HF layout has them.
AttentionWeights load_attention(Weights& w, const std::string& prefix, const AttentionSpec& s);

// Self-attention of x [tokens, hidden] at positions cache.length..: projections, optional
// q/k norm, rotary, cache append, causal (windowed) attention, output projection.
// transformers LlamaAttention / Qwen2Attention / Qwen3Attention.
Tensor self_attention(Context& ctx, const Tensor& x, const AttentionWeights& w,
                      const AttentionSpec& s, const Tensor& cos, const Tensor& sin,
                      KVCache::Layer& cache, int64_t pos0);

struct GatedMlpWeights {
  Tensor gate, up, down;
  Tensor gate_bias, up_bias, down_bias;
};
GatedMlpWeights load_gated_mlp(Weights& w, const std::string& prefix, int64_t hidden,
                               int64_t intermediate, bool bias);
// down(silu(gate(x)) * up(x))   (transformers LlamaMLP)
Tensor swiglu_mlp(Context& ctx, const Tensor& x, const GatedMlpWeights& w);

// Keeps only the last row of x [tokens, dim] -> [1, dim].
Tensor last_row(const Tensor& x);

// Loads the output projection: lm_head.weight, or the input embedding when tied.
Tensor load_lm_head(Weights& w, bool tied, const Tensor& embed, int64_t vocab, int64_t hidden);

}  // namespace lathe
