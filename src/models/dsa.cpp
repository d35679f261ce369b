#include "models/dsa.h"

#include <cmath>

#include "core/error.h"
#include "models/config_fields.h"

namespace lathe {

DsaIndexerWeights load_dsa_indexer(Weights& w, const std::string& prefix, const DsaIndexerSpec& s,
                                   int64_t hidden, int64_t q_lora_rank) {
  DsaIndexerWeights m;
  m.wq_b = w.matrix(prefix + "wq_b.weight", {s.heads * s.head_dim, q_lora_rank});
  m.wk = w.matrix(prefix + "wk.weight", {s.head_dim, hidden});
  m.k_norm = load_layer_norm(w, prefix + "k_norm.", s.head_dim);
  // A router of sorts (its weights decide which keys are kept): never quantized, and kept in
  // f32 as transformers keeps it (_keep_in_fp32_modules).
  m.weights_proj = w.vector(prefix + "weights_proj.weight", {s.heads, hidden});
  return m;
}

DsaConfig read_dsa_config(const Checkpoint& ckpt, DeepseekConfig base, const DsaIndexerSpec& d) {
  JsonFields f(ckpt.config(), ckpt.config_path());
  DsaConfig c{.base = std::move(base), .indexer = d, .layer_indexer = {}};
  DsaIndexerSpec& s = c.indexer;
  s.heads = f.get_or<int64_t>("index_n_heads", d.heads);
  s.head_dim = f.get_or<int64_t>("index_head_dim", d.head_dim);
  s.top_k = f.get_or<int64_t>("index_topk", d.top_k);
  s.qk_rope = c.base.mla.qk_rope;
  check_sizes(
      f, {{"index_n_heads", s.heads}, {"index_head_dim", s.head_dim}, {"index_topk", s.top_k}});
  if (s.head_dim < s.qk_rope)
    fail(f.origin(), ": field \"index_head_dim\" is ", s.head_dim, ", below qk_rope_head_dim (",
         s.qk_rope, "), the dims the indexer rotates");
  // The indexer reads q_a_layernorm(q_a_proj(x)); both DSA attentions always have them.
  if (c.base.mla.q_lora_rank <= 0)
    fail(f.origin(),
         ": field \"q_lora_rank\" must be set: DSA's indexer reads the query's "
         "low-rank input");
  return c;
}

namespace blocks {

Value dsa_indexer(Builder& g, Value x, Value q_in, const DsaIndexerWeights& w,
                  const DsaIndexerSpec& s, Value rope_tables, int64_t layer,
                  const std::string& prefix) {
  const int64_t n = g.dim(x, 0);
  // GlmMoeDsaIndexer.forward: the rotary part is each vector's first qk_rope_head_dim dims.
  Value q = g.reshape(linear(g, q_in, w.wq_b), {n, s.heads, s.head_dim});
  q = g.rope(q, rope_tables, s.rope_layout);
  Value k = layer_norm(g, linear(g, x, w.wk), w.k_norm, 1e-6f);
  k = g.reshape(g.rope(g.reshape(k, {n, 1, s.head_dim}), rope_tables, s.rope_layout),
                {n, s.head_dim});
  Value weights = g.scale(linear(g, x, w.weights_proj, {}, graph::Quantize::Never),
                          static_cast<float>(std::pow(static_cast<double>(s.heads), -0.5)));
  const float scale = static_cast<float>(std::pow(static_cast<double>(s.head_dim), -0.5));
  return g.name(g.indexer(q, k, weights, layer, s.top_k, scale), prefix + "index");
}

}  // namespace blocks
}  // namespace lathe
