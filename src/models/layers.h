// The weights of the layers architectures share, loaded by their Hugging Face names: attention
// (with its AttentionSpec options), norms, MLPs, fused projections, the output head. A model
// file loads with these and builds its graph from models/blocks.h; nothing here knows an
// architecture by name.
#pragma once

#include <string>
#include <vector>

#include "models/model.h"
#include "models/rope.h"
#include "models/weights.h"

namespace lathe {

// Which norm q and k get before rotary, and over what, if any.
enum class QkNorm {
  None,
  RmsPerHead,      // Qwen3, Gemma3: RMS q_norm / k_norm over head_dim of each head
  RmsAcrossHeads,  // Olmo2: RMS q_norm / k_norm over the whole projection (heads * head_dim)
  // Phi, StableLm, Cohere: LayerNorms over each head, whose weights the model file loads
  // (names and shapes differ): [head_dim] for all heads, or [heads, head_dim].
  LayerPerHead,
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
  graph::RopeLayout rope_layout = graph::RopeLayout::HalfSplit;  // Ernie4_5: Interleaved
  float clip_qkv = 0;            // Olmo clip_qkv: q, k and v clamped to [-clip, clip] (0: none)
  bool clip_after_norm = false;  // Olmoe: clamps after the q/k norms, Olmo before them
  // Qwen3Next, Qwen3.5: q_proj gives each head its query and then as many gate values; the
  // attention output is multiplied by sigmoid(gate) before o_proj.
  bool output_gate = false;
  float key_scale = 1;  // FalconH1 key_multiplier: k_proj's output times this, before rotary
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

// Splits a fused query/key/value projection, a weight [rows, in] or a bias [rows], into the
// separate q, k, v that AttentionWeights holds (row-block views for [q | k | v], copied once at
// load for the other groupings). transformers views the fused rows as `groups` equal blocks, each
// of heads/groups query heads, then kv_heads/groups key heads, then as many value heads, head_dim
// rows per head:
//   groups 1:                  [q | k | v]      Phi3, GPT-2, GPTBigCode and Falcon multi_query
//   groups = heads = kv_heads: per head [q k v]  GPTNeoX, Bloom, GPTBigCode and Falcon without MQA
//   groups = kv_heads:         per kv head [q.. k v]  Falcon new_decoder_architecture
struct FusedQkv {
  Tensor q, k, v;
};
FusedQkv split_fused_qkv(const Tensor& fused, const AttentionSpec& s, int64_t groups);
// The same for a tensor fetched as `name` through `w`: the copies a grouped layout makes are
// recorded in the checkpoint's fetch log with the rows they came from (the shard planner
// splits the fused tensor by them).
FusedQkv split_fused_qkv(Weights& w, const std::string& name, const Tensor& fused,
                         const AttentionSpec& s, int64_t groups);

// An attention whose q, k and v are one fused projection: qkv + "weight" [rows, hidden] (and
// qkv + "bias" when `bias`) split by split_fused_qkv in `groups`, and the output projection
// o + "weight" (o + "bias"): GPTNeoX, Falcon.
AttentionWeights load_fused_attention(Weights& w, const std::string& qkv, const std::string& o,
                                      const AttentionSpec& s, int64_t groups, bool bias);

// transformers Conv1D (GPT-2) stores a linear layer's weight as [in, out]: loads it and
// transposes it once to the [out, in] that a Linear node takes.
Tensor load_conv1d(Weights& w, const std::string& name, int64_t in, int64_t out);
// A 2-D tensor transposed, copied (any dtype).
Tensor transpose_matrix(const Tensor& m);

// ALiBi slopes as transformers' _get_alibi_slopes / build_alibi_tensor compute them (Bloom,
// Falcon): for the largest power of two n <= heads, 2^(-8i/n) for i = 1..n; the heads past n
// take the odd powers 2^(-4i/n), i = 1, 3, 5, ...; in f32.
std::vector<float> alibi_slopes(int64_t heads);
// The same as the F32 [heads] tensor the attention op reads (graph::PositionBias).
Tensor alibi_slopes_tensor(int64_t heads);
// A LayerNorm's parameters; either may be undefined (no weight: OlmoLayerNorm, OPT
// layer_norm_elementwise_affine false; no bias: CohereLayerNorm, nn.LayerNorm(bias=False)).
struct NormWeights {
  Tensor weight, bias;
};
// Which LayerNorm parameters a checkpoint stores (CohereLayerNorm: no bias; OPT without
// layer_norm_elementwise_affine: neither).
struct NormParams {
  bool weight = true, bias = true;
};
NormWeights load_layer_norm(Weights& w, const std::string& prefix, int64_t dim,
                            NormParams params = {});

// A norm layer as a model loads and applies it (blocks::norm): RMSNorm (transformers
// LlamaRMSNorm; offset 1 for GemmaRMSNorm's (1 + weight)) or torch.nn.LayerNorm (weight and bias,
// either possibly absent). A model keeps one without weights as the kind of its norms and loads
// each of its norms from it.
struct Norm {
  enum class Kind { Rms, Layer };
  Kind kind = Kind::Rms;
  float eps = 1e-6f;
  float offset = 0;        // Rms: scales by (weight + offset)
  NormParams params = {};  // Layer: which of weight and bias the checkpoint stores
  Tensor weight = {}, bias = {};

  static Norm rms(float eps, float offset = 0);
  static Norm layer(float eps, NormParams params = {});
  // This kind of norm with its parameters loaded: prefix + "weight" (and "bias"), [dim].
  Norm load(Weights& w, const std::string& prefix, int64_t dim) const;
};

struct GatedMlpWeights {
  Tensor gate = {}, up = {}, down = {};
  Tensor gate_bias = {}, up_bias = {}, down_bias = {};
};
struct MlpParams {
  bool bias = false;  // gate/up/down biases (Llama mlp_bias)
  bool gated = true;  // false: only up_proj and down_proj (an ungated MLP, as ArceeMLP)
};
GatedMlpWeights load_gated_mlp(Weights& w, const std::string& prefix, int64_t hidden,
                               int64_t intermediate, MlpParams params = {});
// A gated MLP whose gate and up projections are one matrix, prefix + "gate_up_proj.weight"
// [2 * intermediate, hidden], split once at load (Phi3MLP, Glm4MLP: gate, up =
// gate_up_proj(x).chunk(2)), and prefix + "down_proj.weight"; no biases.
GatedMlpWeights load_fused_gate_up_mlp(Weights& w, const std::string& prefix, int64_t hidden,
                                       int64_t intermediate);
// up/down without a gate and with biases by default, under the given names: an ungated MLP
// down(act(up(x))), run with blocks::gated_mlp, such as GPTNeoXMLP, BloomMLP and FalconMLP
// (dense_h_to_4h, dense_4h_to_h), PhiMLP and OPT (fc1, fc2), GPTJMLP (fc_in, fc_out).
GatedMlpWeights load_linear_mlp(Weights& w, const std::string& prefix, const std::string& up,
                                const std::string& down, int64_t hidden, int64_t intermediate,
                                bool bias = true);

// Equal-length F32 vectors stacked as the rows of a [count, n] tensor, built once at load
// (StableLmLayerNormPerHead's norms.<h>.weight as one per-head weight).
Tensor stack_rows(const std::vector<Tensor>& rows);

// Rows [begin, begin + count) of a matrix, a zero-copy view of it: splits fused projections
// (Phi3 qkv_proj, gate_up_proj) into the separate matrices the graph uses.
Tensor matrix_rows(const Tensor& m, int64_t begin, int64_t count);

// transformers loads a checkpoint saved from the base model, whose tensor names lack the causal
// LM's base_model_prefix ("transformer." for GPT-2, Bloom, Falcon; "model." for OPT), as the
// original GPT-2 and OPT files are: returns "" for such a checkpoint (it has `probe` but not
// prefix + probe), else `prefix`.
std::string base_model_prefix(const Checkpoint& ckpt, const std::string& prefix,
                              const std::string& probe);

// Loads the output projection: `name` (lm_head.weight), or the input embedding when tied.
Tensor load_lm_head(Weights& w, bool tied, const Tensor& embed, int64_t vocab, int64_t hidden,
                    const std::string& name = "lm_head.weight");

}  // namespace lathe
