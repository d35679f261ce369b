#include "backends/cpu/indexer.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/moe.h"

namespace lathe::cpu {
namespace {

// One row's scratch: the scores, then (value, index) pairs and indices for torch_topk.
struct RowScratch {
  TopkPair* pairs;
  int64_t* ids;
  float* scores;
};

// Floats per row; pairs and ids first, so that they stay 8-byte aligned, and each row a whole
// 64 bytes, so that the next row's pairs are aligned too (an odd max_context would leave them
// 4 bytes off).
int64_t row_floats(int64_t max_context) {
  const int64_t n =
      max_context * static_cast<int64_t>((sizeof(TopkPair) + sizeof(int64_t)) / sizeof(float)) +
      max_context;
  return (n + 15) / 16 * 16;
}

RowScratch row_scratch(float* base, int64_t max_context) {
  auto* pairs = reinterpret_cast<TopkPair*>(base);
  auto* ids = reinterpret_cast<int64_t*>(pairs + max_context);
  return {pairs, ids, reinterpret_cast<float*>(ids + max_context)};
}

void index_row(const IndexerArgs& a, int64_t t, const RowScratch& r) {
  const int64_t p = a.pos0 + t;
  const int64_t rate = std::max<int64_t>(a.entry_rate, 1);
  const int64_t length = (a.pos0 + a.tokens) / rate, seen = (p + 1) / rate;
  const float* q = a.q + t * a.heads * a.dim;
  const float* w = a.w + t * a.heads;
  // torch: relu(matmul(q, k^T) * scale), then weights [1, heads] times that [heads, keys].
  for (int64_t j = 0; j < seen; ++j) {
    const float* k = a.keys + j * a.dim;
    float score = 0.0f;
    for (int64_t h = 0; h < a.heads; ++h) {
      float dot = 0.0f;
      for (int64_t d = 0; d < a.dim; ++d) dot += q[h * a.dim + d] * k[d];
      score += w[h] * std::max(dot * a.scale, 0.0f);
    }
    r.scores[j] = score;
  }
  // The keys this query may not see: masked as transformers masks them before its top-k,
  // all equal and below every visible score.
  std::fill(r.scores + seen, r.scores + length, -INFINITY);
  const int64_t k = std::min(a.top_k, length);
  torch_topk(r.scores, length, k, false, r.ids, r.pairs);
  // Chosen keys the query cannot see (k above its visible count) are dropped; the rest in
  // ascending order, which is the order attention sums them in.
  int64_t kept = 0;
  for (int64_t i = 0; i < k; ++i)
    if (r.ids[i] < seen) r.ids[kept++] = r.ids[i];
  std::sort(r.ids, r.ids + kept);
  int32_t* out = a.out + t * a.top_k;
  for (int64_t i = 0; i < a.top_k; ++i) out[i] = i < kept ? static_cast<int32_t>(r.ids[i]) : -1;
}

}  // namespace

size_t indexer_workspace_floats(int64_t max_context, int64_t rows) {
  return static_cast<size_t>(rows * row_floats(max_context));
}

void indexer(const IndexerArgs& a, float* workspace, int64_t max_context, ThreadPool* pool) {
  if (pool == nullptr) {
    const RowScratch r = row_scratch(workspace, max_context);
    for (int64_t t = 0; t < a.tokens; ++t) index_row(a, t, r);
    return;
  }
  // One chunk of rows per thread, each with its own scratch (as attention_fast splits).
  const int64_t chunks = std::min<int64_t>(pool->size(), a.tokens);
  pool->parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const RowScratch r = row_scratch(workspace + c * row_floats(max_context), max_context);
      for (int64_t t = a.tokens * c / chunks; t < a.tokens * (c + 1) / chunks; ++t)
        index_row(a, t, r);
    }
  });
}

}  // namespace lathe::cpu
