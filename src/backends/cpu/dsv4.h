// DeepseekV4's own ops (graph Op::HyperMix, Op::Compress), as transformers'
// DeepseekV4HyperConnection, DeepseekV4HyperHead and the HCA / CSA compressors compute them.
// One kernel serves both backends: they are small beside the matrix products around them.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "graph/state.h"

namespace lathe::cpu {

// mixes [n, width] -> out [n, width] (Op::HyperMix): width (2 + hc) hc gives pre, post and
// the transposed Sinkhorn-normalised comb; width hc gives pre only.
void hyper_mix(const float* mixes, const float* base, const float* scale, float* out, int64_t n,
               int64_t width, int64_t hc, int64_t iters, float eps);

struct CompressArgs {
  const float *kv, *gate;  // [tokens, width] of one sequence's step
  const float* ape;        // [ape_rows, width]: the gate's bias by position in the window
  const float* norm;       // [dim]
  int64_t tokens, pos0, width, dim, ape_rows;
  float eps;
  const graph::RopeSchedule* rope;  // rotates each entry's last rot_dim() dims
  graph::RopeLayout layout;
  KVCache::Layer::Compressed* cache;
  float* scratch;  // compress_scratch_floats()
};
size_t compress_scratch_floats(int64_t rot_dim);
// Appends the step's rows to the cache's recent rows, and each window that closes to its
// entries (Op::Compress).
void compress(const CompressArgs& a);

}  // namespace lathe::cpu
