// The core planner: the smallest degree (1, 2, 4, ...) whose ranks each fit a per-core memory
// budget, for a model's weights, its KV cache or state, and its activations
// (docs/sharding.md has the arithmetic).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "shard/plan.h"

namespace lathe::shard {

struct PlannerOptions {
  uint64_t core_memory = 0;  // bytes one rank (one core) may hold
  int max_cores = 1;         // degrees tried: 1, 2, 4, ... up to this
  // The matrices' dtype (F32, BF16); unset: the one the model was loaded in.
  std::optional<DType> dtype = {};
  std::optional<DType> quantize = {};  // Q8_0, Q4_0: quantizable matrices in that type
  DType kv_dtype = DType::F32;
  int64_t max_seq = 4096;  // KV positions per sequence (one sequence)
  // Unset: tensor parallelism (which splits a model's experts by blocks too), or expert
  // parallelism at a degree where a model with experts has no tensor-parallel plan (heads
  // that do not divide).
  std::optional<Parallelism> parallelism = {};
};

// What one rank holds.
struct RankMemory {
  uint64_t weights = 0, kv = 0, activations = 0;
  uint64_t total() const { return weights + kv + activations; }
};

// One degree the planner tried.
struct Attempt {
  int degree = 1;
  Parallelism parallelism = Parallelism::Tensor;
  bool planned = false;  // false: no plan at this degree (`why`)
  RankMemory memory;     // the largest rank's, when planned
  std::string why;
};

struct PlannerChoice {
  bool fits = false;
  Parallelism parallelism = Parallelism::Tensor;
  int degree = 0;     // the degree chosen (fits), else the largest degree planned
  RankMemory memory;  // per rank at `degree`
  std::vector<Attempt> attempts;
  std::optional<ShardPlan> plan;  // at `degree`
  std::string refusal;            // when it fits nowhere: one message, naming the numbers
};

// Tries degrees 1, 2, 4, ... up to opts.max_cores and keeps the first whose every rank fits
// opts.core_memory. `model` is the one `layout` was made from (analyze()).
PlannerChoice choose_degree(const Model& model, const Layout& layout, const Checkpoint& ckpt,
                            const FetchLog& log, const PlannerOptions& opts);

// Opens the checkpoint folder `dir`, loads it with `model` (its --quantize left out: the
// planner counts quantized bytes itself from opts.quantize) and plans it. opts.max_seq <= 0:
// min(max_position_embeddings, 4096). What `--cores` runs on (generate, the lab).
PlannerChoice plan_checkpoint(const std::filesystem::path& dir, const ModelOptions& model,
                              PlannerOptions opts);

// The pieces of the arithmetic, each for one rank.
// Weights: every tensor's share times its bytes per element once loaded (the matrix dtype, or
// the quantized type's blocks for a quantizable matrix; F32 for vectors; MXFP4 packed).
uint64_t weight_bytes(const ShardPlan& plan, int rank, DType matrix_dtype,
                      std::optional<DType> quantize);
// The KV cache and recurrent state of one sequence of max_seq positions, as the model's layers
// declare them: full layers max_seq slots, sliding ones their ring; under tensor parallelism
// a rank holds kv_heads / N heads, or one when there are fewer kv heads than ranks.
uint64_t kv_bytes(const Layout& layout, Parallelism parallelism, int degree, int64_t max_seq,
                  DType kv_dtype);
// The planned arena of a prefill step of min(max_seq, 256) tokens (graph::plan_schedule, no
// memory taken), as one process plans it: every intermediate and scratch buffer at its
// peak. A rank's step is no larger (its split nodes are narrower), so this bounds it.
uint64_t activation_bytes(const Model& model, int64_t max_seq);

// The machine: MemTotal of /proc/meminfo over the cores this process may use.
int machine_cores();
uint64_t default_core_memory();
// "2G", "512M", "64K", "1.5GiB", "1000" (bytes), in powers of 1024; nullopt when malformed.
std::optional<uint64_t> parse_size(std::string_view text);
std::string format_bytes(uint64_t bytes);  // "1.5 GiB"

}  // namespace lathe::shard
