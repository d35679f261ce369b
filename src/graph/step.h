// What one execution of a step graph reads besides weights: the batch (tokens, their
// positions, which sequence each belongs to, which rows want logits) and each sequence's state.
#pragma once

#include <cstdint>
#include <span>

#include "graph/state.h"

namespace lathe::graph {

// One sequence's tokens within a step: rows [first, first + count) of the batch, at positions
// pos0 .. pos0 + count - 1, appended to caches[seq].
struct Segment {
  int64_t seq = 0, first = 0, count = 0, pos0 = 0;
};

struct StepData {
  std::span<const int32_t> tokens, positions, logit_rows;
  std::span<const Segment> segments;  // in row order, covering every row once
  std::span<KVCache* const> caches;   // indexed by Segment::seq
  int64_t max_context = 0;            // the largest max_seq among the caches
};

}  // namespace lathe::graph
