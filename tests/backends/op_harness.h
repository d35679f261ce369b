// The op test bench's harness: a single-op graph is built with graph::Builder (tensors fed as
// constants, I32 inputs bound through a graph::StepData), then run on a backend, planned
// (graph::Plan) or eager (graph::EagerRunner), with fresh per-sequence state each time.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "graph/backend.h"
#include "graph/builder.h"
#include "graph/executor.h"

namespace lathe::optest {

// F32 [shape] uniform in (-scale, scale), the same for the same seed.
Tensor random_tensor(Shape shape, uint32_t seed, float scale = 1.0f);
std::span<const float> floats(const Tensor& t);
// Same dtype, shape and bytes.
bool same_bits(const Tensor& a, const Tensor& b);

// One sequence's state for a test: layers as declared, with positions [0, pos0) filled with
// keys and values drawn from `seed` (position p's row depends on p and the seed only, so a
// ring and a full cache built alike hold the same history). Rings keep the newest rows. A
// BF16 cache holds the history rounded to bf16 (nearest even). Index keys (DSA) get random
// F32 rows too.
KVCache prefilled_cache(const std::vector<LayerStateSpec>& layers, int64_t max_seq,
                        int64_t max_step_tokens, int64_t pos0, uint32_t seed,
                        DType kv_dtype = DType::F32);
// The history prefilled_cache writes: [pos0, kv_heads, head_dim] keys (value = false) or values.
Tensor cache_history(int64_t pos0, int64_t kv_heads, int64_t head_dim, uint32_t seed, bool value);

// What one execution reads besides constants: step inputs, segments and the state the step
// appends to (made afresh for every run, since attention writes to it).
struct Step {
  std::vector<int32_t> tokens, positions, logit_rows;
  std::vector<graph::Segment> segments;
  std::function<std::vector<KVCache>()> caches;  // may be empty: no state
};
// A step over `segments` (their positions filled in); tokens are zeros unless given.
Step segment_step(std::vector<graph::Segment> segments);
// One segment of sequence 0: n rows at positions pos0 ...
Step rows_step(int64_t n, int64_t pos0 = 0);

// Builds the op under test; returns the values to compare (kept as graph outputs).
using Build = std::function<std::vector<graph::Value>(graph::Builder&)>;

struct Outcome {
  std::vector<Tensor> values;   // copies of the built values
  std::vector<KVCache> caches;  // the state after the step
};

enum class Mode { Planned, Eager };
const char* mode_name(Mode m);
Outcome run(const Backend& backend, ThreadPool& pool, Mode mode, const Build& build,
            const Step& step);

// Every KV layer's keys, values and index keys equal bit for bit.
::testing::AssertionResult same_caches(const Outcome& a, const Outcome& b);
// The values and the caches equal bit for bit.
::testing::AssertionResult same_outcome(const Outcome& a, const Outcome& b);

}  // namespace lathe::optest
