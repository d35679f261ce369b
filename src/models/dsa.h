// DeepSeek sparse attention (DSA: DeepSeek-V3.2's, and GLM-5's GlmMoeDsa): multi-head latent
// attention (models/mla.h) in which each query attends only to the index_topk keys a small
// "lightning indexer" scores highest. The indexer has its own projections: per-head queries
// wq_b(q_resid) and one shared key LayerNorm(wk(x)), both rotated on their first
// qk_rope_head_dim dims; a key's score for a query is sum_h w_h relu(q_h . k / sqrt(dim)),
// with per-head weights weights_proj(x) / sqrt(heads). Its keys are cached beside the latent
// (LayerStateSpec::index_dim). graph Op::Indexer scores and chooses; Attention's `chosen`
// input restricts each query to those keys.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/arch/deepseek.h"

namespace lathe {

struct DsaIndexerSpec {
  int64_t heads = 0, head_dim = 0;  // index_n_heads, index_head_dim
  int64_t top_k = 0;                // index_topk
  int64_t qk_rope = 0;              // the rotary dims, the first of each query and key
  // The indexer's rotary pairs: DeepseekV32Indexer rotates half-split, GlmMoeDsaIndexer
  // interleaved (the main attention is interleaved in both).
  graph::RopeLayout rope_layout = graph::RopeLayout::Interleaved;
};

struct DsaIndexerWeights {
  Tensor wq_b;          // [heads * head_dim, q_lora_rank]
  Tensor wk;            // [head_dim, hidden]
  NormWeights k_norm;   // nn.LayerNorm(head_dim, eps=1e-6)
  Tensor weights_proj;  // [heads, hidden]
};

// Loads prefix + wq_b, wk, k_norm and weights_proj.
DsaIndexerWeights load_dsa_indexer(Weights& w, const std::string& prefix, const DsaIndexerSpec& s,
                                   int64_t hidden, int64_t q_lora_rank);

// The DSA decoder: DeepSeek's (models/arch/deepseek.h) with an indexer in every layer that runs
// one (`layer_indexer` true); the others reuse the chosen keys of the last layer before them
// that does (GlmMoeDsa's "shared" indexer_types).
struct DsaConfig {
  DeepseekConfig base;
  DsaIndexerSpec indexer;
  std::vector<bool> layer_indexer;
};

// Reads index_n_heads, index_head_dim, index_topk (the config class's defaults in `d`) and
// checks them against the MLA sizes; layer_indexer is left to the caller.
DsaConfig read_dsa_config(const Checkpoint& ckpt, DeepseekConfig base, const DsaIndexerSpec& d);

// Built in glm_moe_dsa.cpp.
std::unique_ptr<Model> build_dsa(const Checkpoint& ckpt, DsaConfig cfg, const ModelOptions& opts);

namespace blocks {

// The indexer of x [n, hidden] (the attention's input) and q_in (mla_query_input): each
// query's chosen keys [n, top_k] I32, named "<prefix>index". Its keys go to cache layer `layer`.
Value dsa_indexer(Builder& g, Value x, Value q_in, const DsaIndexerWeights& w,
                  const DsaIndexerSpec& s, Value rope_tables, int64_t layer,
                  const std::string& prefix);

}  // namespace blocks
}  // namespace lathe
