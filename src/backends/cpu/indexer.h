// DeepSeek sparse attention's lightning indexer (graph Op::Indexer), as transformers'
// DeepseekV32Indexer and GlmMoeDsaIndexer compute it: each query scores every key it sees by
//   index_score[j] = sum_h w[h] * relu(scale * q[h] . k[j])
// and keeps the top_k keys (torch.topk over the whole step's row of keys, the ones it may not
// see at -inf, so ties break as torch breaks them on CPU).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace lathe::cpu {

struct IndexerArgs {
  const float* q;     // [tokens, heads, dim]: the step's rows of one sequence
  const float* w;     // [tokens, heads]: each head's weight (weights_proj, times heads^-0.5)
  const float* keys;  // [pos0 + tokens, dim]: the sequence's index keys, this step's included
  int64_t tokens, pos0, heads, dim, top_k;
  float scale;   // softmax_scale, index_head_dim^-0.5
  int32_t* out;  // [tokens, top_k]: ascending positions, then -1
  // > 0: the keys are DeepseekV4's compressed entries [(pos0 + tokens) / entry_rate, dim],
  // entry w seen by the query at p when w < (p + 1) / entry_rate.
  int64_t entry_rate = 0;
};

// Floats of scratch for `rows` rows computed at once over up to max_context keys.
size_t indexer_workspace_floats(int64_t max_context, int64_t rows);
// Every row on the calling thread (pool null), or in chunks on the pool; the bits are the
// same either way (each row is computed alone, in one order).
void indexer(const IndexerArgs& a, float* workspace, int64_t max_context, ThreadPool* pool);

}  // namespace lathe::cpu
