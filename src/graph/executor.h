// Executing a graph on a backend, two ways:
//  - Plan: the whole step graph is built first; memory for every intermediate and scratch
//    buffer is placed by liveness into one arena, once. run() then executes it with no heap
//    allocation, as often as the step shape repeats (every decode step).
//  - EagerRunner: attached to a Builder, runs each node the moment it is built, each output
//    in a fresh buffer (the debugging and reference path). Both give identical numbers: they
//    call the same kernels in the same order.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "graph/backend.h"
#include "graph/builder.h"

namespace lathe {

namespace graph {
class ScheduleSource;
}

// Where and how steps run. Passed to every step (no global state).
struct Context {
  ThreadPool* pool = nullptr;
  bool reference_kernels = false;  // run the portable reference backend (tests, debugging)
  bool eager = false;              // run each node as it is built, unplanned (debugging)
  // The storage of the KV caches made for runs in this context (Model::new_cache's kv_dtype):
  // F32, or BF16 (half the memory; keys and values rounded to nearest even when appended).
  DType kv_dtype = DType::F32;
  // The compiled mode (src/compile/compiler.h): each step shape's bucket gets its schedule
  // (memory plan and measured kernel choices) from here, compiled once and kept in the
  // compile cache. Null: each process plans its steps itself. Same numbers either way.
  graph::ScheduleSource* compiled = nullptr;
};

namespace graph {

// Called with every named node's value right after it is computed (the lab's layer-by-layer
// comparison). The tensor is valid only during the call.
using Trace = std::function<void(const std::string& name, const Tensor& value)>;

// Where a Plan puts each buffer in its arena, and which of the backend's variants runs each
// node: the planner's own, or a compiled module's (src/compile/module.h), made for a graph of
// the same structure at a shape bucket at least as large.
struct Schedule {
  struct Slot {
    int32_t node = 0;
    bool workspace = false;  // the node's scratch, else its output
    uint64_t offset = 0, bytes = 0;
  };
  std::vector<Slot> slots;  // in the order the planner lists them: by node, output first
  uint64_t arena_bytes = 0;
  std::vector<int32_t> variants;  // per node; empty: every node's default (0)
  // Linear nodes run as one (KernelChoices::run_linears) where the first of each group stands;
  // each group one of linear_groups(), whose buffers are live from its first node on.
  std::vector<std::vector<int32_t>> groups;
};

// The most Linear nodes one group holds.
inline constexpr size_t kMaxLinearGroup = 4;
// Linear nodes that could run as one: those reading the same x (the same value, not a copy)
// with constant weights (and biases) of one dtype and width, in node order, in groups of 2 to
// kMaxLinearGroup (q, k and v; gate and up). Only those `backend` fuses.
std::vector<std::vector<int32_t>> linear_groups(const Graph& g, const Backend& backend);

// The planner's schedule of `g`: buffers placed greedily by liveness, default variants, and
// the given Linear groups (each one of linear_groups()'s).
Schedule plan_schedule(const Graph& g, const Backend& backend, int threads, int64_t max_context,
                       const std::vector<std::vector<int32_t>>& groups = {});

// Checks that `s` is a valid schedule for `g`: a slot for exactly each buffer `g` needs, each
// at least as large (exactly as large with `exact`), inside the arena, no two buffers live
// at the same time overlapping, the arena no larger than all slots end to end, and each
// variant one the backend has, each group one linear_groups() could give. Throws lathe::Error
// saying what is wrong, so that a module from another machine can never make a plan write outside
// its arena.
void check_schedule(const Graph& g, const Backend& backend, int threads, int64_t max_context,
                    const Schedule& s, bool exact);

// Gives the compiled mode's schedules (src/compile/compiler.h implements it).
class ScheduleSource {
 public:
  virtual ~ScheduleSource() = default;
  // The schedule for steps of up to `bucket`'s shapes, `bucket` being the step graph built at
  // its bucket's token and row counts; null to plan without one (its module failed to compile
  // before). The schedule stays valid as long as the source.
  virtual const Schedule* schedule_for(const Graph& bucket, const Backend& backend,
                                       ThreadPool& pool, int64_t max_context, int64_t tokens,
                                       int64_t rows) = 0;
};

class Plan {
 public:
  // Plans `graph` for `backend` with `threads` threads and caches of at most max_context
  // positions: with the planner's schedule (every group linear_groups() gives run as one), or
  // `given` (checked first).
  Plan(Graph graph, const Backend& backend, int threads, int64_t max_context,
       const Schedule* given = nullptr);
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  const Graph& graph() const { return graph_; }
  size_t arena_bytes() const { return arena_bytes_; }
  int64_t max_context() const { return max_context_; }
  // Sum of the intermediates' sizes had each had a buffer of its own (what planning saves).
  size_t unplanned_bytes() const { return unplanned_bytes_; }
  const Schedule& schedule() const { return schedule_; }
  // Runs node i alone with variant v (its inputs as the last run left them, or zeros): what
  // the compiled mode times to choose each node's variant. Only for nodes that read no step
  // input directly (Linear and the like); returns the seconds it took.
  double time_node(ThreadPool& pool, size_t i, int variant);
  // Runs group g of the schedule alone likewise (each node with its variant); the seconds.
  double time_group(ThreadPool& pool, size_t g);
  // Runs the nodes `which` marks (Linear and the like, as for time_node) in step order, as a
  // step runs them: a group where its first node stands, each node with its variant; the
  // seconds. What the compiled mode times to check its choices against the planner's.
  double time_nodes(ThreadPool& pool, const std::vector<bool>& which);
  void set_variant(size_t i, int variant) { schedule_.variants.at(i) = variant; }

  // Executes the graph over `step`, whose inputs must have the shapes the graph was built for,
  // on a pool of at most the planned number of threads (scratch is sized per thread).
  void run(ThreadPool& pool, const StepData& step, const Trace* trace = nullptr);
  // A node's value after run(); outputs stay valid until the next run().
  const Tensor& value(Value v) const { return values_.at(static_cast<size_t>(v.id)); }

 private:
  Graph graph_;
  const Backend& backend_;
  int threads_;
  int64_t max_context_;
  std::vector<uint8_t> arena_storage_;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0, unplanned_bytes_ = 0;
  Schedule schedule_;
  std::vector<Tensor> values_;                    // per node: a view of the arena, a weight, ...
  std::vector<std::vector<const Tensor*>> args_;  // per node: its inputs' values
  std::vector<float*> workspace_;                 // per node: its scratch in the arena, or null
  // Per node: the schedule's group it heads, kInGroup when it runs with an earlier node's
  // group, or kAlone.
  std::vector<int32_t> group_at_;
  static constexpr int32_t kAlone = -1, kInGroup = -2;
  void run_group(ThreadPool& pool, size_t g, const StepData& step);
};

class EagerRunner {
 public:
  EagerRunner(const Backend& backend, ThreadPool& pool, const StepData& step,
              const Trace* trace = nullptr);
  // It keeps `step` by reference for the runs to come: a temporary would dangle.
  EagerRunner(const Backend&, ThreadPool&, const StepData&&, const Trace* = nullptr) = delete;
  // The Builder hooks: run the node just added; trace a node when it is named.
  Builder::OnNode hook();
  Builder::OnNode name_hook();
  const Tensor& value(Value v) const { return values_.at(static_cast<size_t>(v.id)); }

 private:
  void run(const Graph& g, Value v);

  const Backend& backend_;
  ThreadPool& pool_;
  const StepData& step_;
  const Trace* trace_;
  std::vector<Tensor> values_;
};

}  // namespace graph
}  // namespace lathe
