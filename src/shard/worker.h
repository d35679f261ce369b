// The processes of a sharded run (docs/sharding.md, "Workers").
//
// `lathe generate MODEL --tp 2` (also logits, bench and tiny check) starts its own workers:
// the process the user ran becomes the launcher, which runs Open MPI's `mpirun` over the same
// binary and arguments, one worker per rank, pinned to its cores, and waits. Each worker runs
// the command as one process would, on its rank's model (ShardedModel), joined to the others
// by MPI collectives inside each step; rank 0 prints the output. Across machines the same
// binary runs under mpirun with a host file (or srun): a process that MPI started is a worker.
//
// A worker that fails ends the run: an error on one rank makes mpirun stop the others; a rank
// that dies or hangs leaves the others waiting in a collective, which gives up after
// LATHE_SHARD_TIMEOUT seconds (default 60). Each worker keeps a status line (state, the
// collectives it finished, its last message) in a small shared file, so the launcher can name
// the rank that failed and what it was doing, and mpirun leaves no process behind.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model.h"
#include "shard/rank_graph.h"

namespace lathe::shard {

struct ShardRequest {
  Parallelism parallelism = Parallelism::Tensor;
  int degree = 1;
  // Each rank's memory budget in bytes (0: none); the launcher gives it to the workers as
  // LATHE_SHARD_MEMORY, which a user may also set.
  uint64_t memory = 0;
};

// What a rank's memory budget adds to the planner's figure for it (--core-memory): the
// process itself, MPI's buffers and the threads' stacks.
inline constexpr uint64_t kRankBaseMemory = uint64_t{256} << 20;

// --tp N or --ep N among a command's arguments (commands that run a model: generate, logits,
// bench, tiny); nullopt without them or for degree 1. Throws UsageError for a bad value or
// both at once.
std::optional<ShardRequest> find_request(int argc, char** argv);

// Whether MPI started this process (mpirun, srun): it is then a worker.
bool under_mpi();

// The launcher: runs the command in `argv` as `request.degree` workers under mpirun and
// waits for them (with --tp or --ep and the degree added, when `add_degree`). Returns the
// exit code (0, or 1 after one error naming the failed rank).
int launch(const ShardRequest& request, int argc, char** argv, bool add_degree = false);

// Thrown where `--cores` had the planner choose more than one rank (src/cli/runtime.cpp):
// main() then launches the command as `request` says.
struct Relaunch {
  ShardRequest request;
};

// This process's shard layout for the compiled mode's flags: "tp1" in one process, "tp2",
// "ep4" in a worker.
std::string current_layout();

// This process's worker side, once started (null otherwise).
class Worker {
 public:
  // MPI_Init, and the checks: the world's size is the degree. Rank 0 keeps stdout; the
  // others' goes nowhere (and, when a launcher started them, their stderr to a log it reads).
  static Worker& start(const ShardRequest& request);
  static Worker* current();
  virtual ~Worker() = default;

  virtual const RankSpec& spec() const = 0;
  // Wraps each loaded model as this rank's (ModelOptions::wrap).
  std::function<std::unique_ptr<Model>(std::unique_ptr<Model>)> model_wrap();
  // Threads per rank when --threads is not given: the cores the launcher gave the rank.
  virtual int default_threads() const = 0;
  // The status line's message ("loading", "generating"), for the launcher's error.
  virtual void status(const std::string& message) = 0;
  // Rank 0's `data` to every rank (the lab's reference, which rank 0 alone reads); waits as
  // long as rank 0 takes, without the collectives' deadline.
  virtual void broadcast(std::vector<int32_t>& data) = 0;
  // The sum of every rank's value, on every rank (the lab's peak memory of a sharded run);
  // without the collectives' deadline, as broadcast.
  virtual int64_t sum(int64_t value) = 0;
  // The end: `code` 0 finalizes MPI (all ranks together); otherwise records the error (none:
  // the command's own failure, which rank 0 reported) and returns, and the process's exit
  // makes mpirun stop the others.
  virtual void finish(int code, const std::string& error = "") = 0;
};

}  // namespace lathe::shard
