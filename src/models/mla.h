// Multi-head latent attention (DeepSeek-V2's MLA, also DeepSeek-V3's and GLM-4.7-Flash's), in
// its absorbed form. Keys and values are compressed into one latent c = norm(W_dkv x) of
// kv_lora_rank dims per token, shared by every head, plus a rotary key k_r of qk_rope_head_dim
// dims, also shared. transformers expands them per head (k = [W_uk c, k_r], v = W_uv c); the
// absorbed form folds W_uk into each head's query instead, q_l = W_uk^T q_nope, so that
//   score = q_l . c + q_r . k_r     and     out = W_uv (softmax . c),
// the same numbers up to summation order, with a cache of [c | k_r] per token whose first
// kv_lora_rank dims serve as the values: kv_lora_rank + qk_rope_head_dim floats per token and
// layer, where the expanded cache holds heads * (qk_head_dim + v_head_dim).
#pragma once

#include <string>

#include "models/blocks.h"
#include "models/layers.h"

namespace lathe {

struct MlaSpec {
  int64_t hidden = 0, heads = 0;
  int64_t q_lora_rank = 0;  // 0: a plain q_proj
  int64_t kv_lora_rank = 0, qk_nope = 0, qk_rope = 0, v_head_dim = 0;
  bool bias = false;            // attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj biases
  float scale = 0;              // softmax scale (qk_head_dim^-0.5, times yarn's mscale^2)
  float lora_norm_eps = 1e-6f;  // q_a_layernorm and kv_a_layernorm (DeepseekV3RMSNorm's default)
  graph::RopeLayout rope_layout = graph::RopeLayout::Interleaved;  // rope_interleave
  int64_t latent_dim() const { return kv_lora_rank + qk_rope; }    // cached floats per token
};

struct MlaWeights {
  // The query: q_a_proj, its norm and q_b_proj's rows split per head into the no-position
  // part and the rotary part (or q_proj's alike when q_lora_rank is 0).
  Tensor q_a, q_a_bias, q_a_norm, q_nope, q_rope;
  // kv_a_proj_with_mqa's rows: the latent's [kv_lora_rank, hidden] and the rotary key's.
  Tensor kv_a, kv_a_bias, k_rope, k_rope_bias, kv_a_norm;
  // kv_b_proj per head: W_uk^T [heads, kv_lora_rank, qk_nope] and W_uv [heads, v, kv_lora_rank].
  Tensor uk_t, uv;
  Tensor o, o_bias;
};

// Loads prefix + q_a_proj / q_a_layernorm / q_b_proj (or q_proj), kv_a_proj_with_mqa,
// kv_a_layernorm, kv_b_proj and o_proj, rearranged once for the absorbed form.
MlaWeights load_mla(Weights& w, const std::string& prefix, const MlaSpec& s);

// The cache layer MLA needs: one "kv head" of latent_dim() floats, values inside the keys.
LayerStateSpec mla_layer_state(const MlaSpec& s);

namespace blocks {

// MLA of x [n, hidden], named as self_attention names its nodes (attn, attn_out).
Value mla_attention(Builder& g, Value x, const MlaWeights& w, const MlaSpec& s, Value rope_tables,
                    int64_t layer, const std::string& prefix);
// The query's input: q_a_layernorm(q_a_proj(x)) (transformers' q_resid, which DeepSeek sparse
// attention's indexer reads too), or x itself without q_lora_rank.
Value mla_query_input(Builder& g, Value x, const MlaWeights& w, const MlaSpec& s);
// MLA from that query input; with `chosen` (an Indexer's keys, may be invalid) each query
// attends to its chosen keys only.
Value mla_attention(Builder& g, Value x, Value q_in, const MlaWeights& w, const MlaSpec& s,
                    Value rope_tables, int64_t layer, const std::string& prefix, Value chosen = {});

}  // namespace blocks
}  // namespace lathe
