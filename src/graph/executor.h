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

#include "backends/backend.h"
#include "graph/builder.h"

namespace lathe {

// Where and how steps run. Passed to every step (no global state).
struct Context {
  ThreadPool* pool = nullptr;
  bool reference_kernels = false;  // run the portable reference backend (tests, debugging)
  bool eager = false;              // run each node as it is built, unplanned (debugging)
  // The storage of the KV caches made for runs in this context (Model::new_cache's kv_dtype):
  // F32, or BF16 (half the memory; keys and values rounded to nearest even when appended).
  DType kv_dtype = DType::F32;
};

namespace graph {

// Called with every named node's value right after it is computed (the lab's layer-by-layer
// comparison). The tensor is valid only during the call.
using Trace = std::function<void(const std::string& name, const Tensor& value)>;

class Plan {
 public:
  // Plans `graph` for `backend` with `threads` threads and caches of at most max_context
  // positions.
  Plan(Graph graph, const Backend& backend, int threads, int64_t max_context);
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  const Graph& graph() const { return graph_; }
  size_t arena_bytes() const { return arena_bytes_; }
  int64_t max_context() const { return max_context_; }
  // Sum of the intermediates' sizes had each had a buffer of its own (what planning saves).
  size_t unplanned_bytes() const { return unplanned_bytes_; }

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
  std::vector<Tensor> values_;                    // per node: a view of the arena, a weight, ...
  std::vector<std::vector<const Tensor*>> args_;  // per node: its inputs' values
  std::vector<float*> workspace_;                 // per node: its scratch in the arena, or null
};

class EagerRunner {
 public:
  EagerRunner(const Backend& backend, ThreadPool& pool, const StepData& step,
              const Trace* trace = nullptr);
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
