// The shared pieces architectures are built from: norms, attention variants, MLPs. A model
// file composes them; nothing here knows an architecture by name.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "models/rope.h"
#include "models/weights.h"

namespace lathe {

// Calls the trace, if any, with a named intermediate.
inline void record(const Trace* trace, const std::string& name, const Tensor& t) {
  if (trace && *trace) (*trace)(name, t);
}

// Where q and k are RMS-normed before rotary, if at all.
enum class QkNorm {
  None,
  PerHead,      // Qwen3, Gemma3: q_norm / k_norm over head_dim of each head
  AcrossHeads,  // Olmo2: q_norm / k_norm over the whole projection (heads * head_dim)
};

struct AttentionSpec {
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool qkv_bias = false;  // Qwen2, Llama attention_bias
  bool o_bias = false;    // Llama attention_bias
  QkNorm qk_norm = QkNorm::None;
  float norm_eps = 1e-6f;
  float norm_offset = 0;  // Gemma3: q/k norms scale by (1 + weight)
  int64_t window = 0;     // sliding window (0: attend to every earlier position)
  float scale = 0;        // softmax scale; 0 means head_dim^-0.5
  float softcap = 0;      // Gemma2 attn_logit_softcapping (0: none)
  bool rope = true;       // SmolLM3 no_rope_layers: false skips rotary on this layer
  ops::RopeLayout rope_layout = ops::RopeLayout::HalfSplit;  // Ernie4_5: Interleaved
  // q/k norms are LayerNorms (Phi, StableLm, Cohere), not RMSNorms; their weights are loaded
  // by the model file (names and shapes differ), per head: [head_dim] or [heads, head_dim].
  bool qk_layer_norm = false;
  float clip_qkv = 0;  // Olmo clip_qkv: q, k and v clamped to [-clip, clip] (0: none)
};

struct AttentionWeights {
  Tensor q, k, v, o;
  Tensor q_bias, k_bias, v_bias, o_bias;  // undefined when the spec has none
  Tensor q_norm, k_norm;
  Tensor q_norm_bias, k_norm_bias;  // LayerNorm q/k norms with a bias (Phi)
};

// Loads prefix + {q,k,v,o}_proj.weight (and biases, RMS q_norm/k_norm) as the HF layout has
// them; `o_name` names the output projection where it is not o_proj (GPTJ out_proj, Phi dense).
AttentionWeights load_attention(Weights& w, const std::string& prefix, const AttentionSpec& s,
                                const std::string& o_name = "o_proj");

// Self-attention of x [tokens, hidden] at positions cache.length..: projections, optional
// clipping and q/k norm, rotary (on the first rot_dim of each head when cos/sin are narrower
// than head_dim: partial rotary), cache append, causal (windowed) attention, output projection.
// transformers LlamaAttention / Qwen2Attention / Qwen3Attention.
Tensor self_attention(Context& ctx, const Tensor& x, const AttentionWeights& w,
                      const AttentionSpec& s, const Tensor& cos, const Tensor& sin,
                      KVCache::Layer& cache, int64_t pos0);

struct GatedMlpWeights {
  Tensor gate, up, down;
  Tensor gate_bias, up_bias, down_bias;
};
// gated = false loads only up_proj and down_proj (an ungated MLP, as ArceeMLP).
GatedMlpWeights load_gated_mlp(Weights& w, const std::string& prefix, int64_t hidden,
                               int64_t intermediate, bool bias, bool gated = true);
// down(silu(gate(x)) * up(x))   (transformers LlamaMLP)
Tensor swiglu_mlp(Context& ctx, const Tensor& x, const GatedMlpWeights& w);
// down(act(gate(x)) * up(x))   (transformers GemmaMLP with ACT2FN[hidden_act]), or
// down(act(up(x))) when the weights have no gate.
Tensor gated_mlp(Context& ctx, const Tensor& x, const GatedMlpWeights& w, ops::Activation act);

// up/down without a gate and with biases by default, under the given names: an ungated MLP
// down(act(up(x))) such as GPTNeoXMLP (dense_h_to_4h, dense_4h_to_h), PhiMLP (fc1, fc2).
GatedMlpWeights load_linear_mlp(Weights& w, const std::string& prefix, const std::string& up,
                                const std::string& down, int64_t hidden, int64_t intermediate,
                                bool bias = true);

// x += a + m: the parallel attention + MLP residual (GPTNeoX use_parallel_residual, GPT-J, Phi,
// Cohere), both branches computed from the same layer input.
void parallel_residual(Tensor& x, const Tensor& a, const Tensor& m);

// Reads an activation field (hidden_act, hidden_activation) with its config-class default.
// A value lathe does not implement is an error naming the field.
ops::Activation read_activation(const JsonFields& f, const std::string& field,
                                const std::string& fallback, const std::string& architecture);

// A LayerNorm's parameters; either may be undefined (no weight: OlmoLayerNorm; no bias:
// CohereLayerNorm, nn.LayerNorm(bias=False)).
struct NormWeights {
  Tensor weight, bias;
};
NormWeights load_layer_norm(Weights& w, const std::string& prefix, int64_t dim, bool weight = true,
                            bool bias = true);
// torch.nn.LayerNorm of x over its last dimension with these parameters.
Tensor layer_norm(const Tensor& x, const NormWeights& w, float eps);

// From each block of `block` rows of a matrix (or elements of a vector), rows [begin, begin +
// count), copied once at load: splits GPTNeoX's query_key_value, laid out per head as
// [q_h; k_h; v_h] for each head h.
Tensor row_blocks(const Tensor& t, int64_t block, int64_t begin, int64_t count);

// Equal-length F32 vectors stacked as the rows of a [count, n] tensor, built once at load
// (StableLmLayerNormPerHead's norms.<h>.weight as one per-head weight).
Tensor stack_rows(const std::vector<Tensor>& rows);

// Rows [begin, begin + count) of a matrix, copied once at load: splits fused projections
// (Phi3 qkv_proj, gate_up_proj) into the separate matrices the graph uses.
Tensor matrix_rows(const Tensor& m, int64_t begin, int64_t count);

// Throws naming the field unless each size is in (0, 2^31].
void check_sizes(const JsonFields& f, std::initializer_list<std::pair<const char*, int64_t>> sizes);

// A copy of config.json with rope_parameters as the config class forms it where it reads
// legacy fields (GPTNeoXConfig: rotary_emb_base, rotary_pct): rope_scaling or rope_parameters,
// given rope_theta and partial_rotary_factor from those fields (or the defaults) unless set.
Json with_legacy_rope_fields(const JsonFields& f, const char* theta_field, double theta,
                             const char* partial_field, double partial);

// Reads a float field that a config class defaults to `fallback` but that config.json may set
// to null to turn the feature off (returned as 0), e.g. Gemma2 final_logit_softcapping.
float read_nullable_float(const JsonFields& f, const std::string& field, float fallback);

// What a loaded decoder reports about itself, from any config struct with the usual fields
// (architecture, vocab_size, hidden_size, num_layers, attention, max_position_embeddings).
template <class Config>
ModelInfo decoder_info(const Config& c, DType weight_dtype) {
  ModelInfo info;
  info.architecture = c.architecture;
  info.vocab_size = c.vocab_size;
  info.hidden_size = c.hidden_size;
  info.num_layers = c.num_layers;
  info.kv_heads = c.attention.kv_heads;
  info.head_dim = c.attention.head_dim;
  info.max_position_embeddings = c.max_position_embeddings;
  info.weight_dtype = weight_dtype;
  return info;
}

// Throws, naming --max-seq, unless `n` (> 0) more positions fit in the cache.
void check_cache_room(const KVCache& cache, int64_t n);

// Keeps only the last row of x [tokens, dim] -> [1, dim].
Tensor last_row(const Tensor& x);

// Loads the output projection: lm_head.weight, or the input embedding when tied.
Tensor load_lm_head(Weights& w, bool tied, const Tensor& embed, int64_t vocab, int64_t hidden);

}  // namespace lathe
