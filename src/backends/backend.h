// The interface between the engine and the kernels: a backend says which nodes it can run,
// how much scratch memory a node needs, and runs one node into its output. The executor
// (graph/executor.h) plans memory and calls run() node by node.
#pragma once

#include <cstddef>
#include <span>

#include "core/thread_pool.h"
#include "graph/graph.h"
#include "graph/step.h"

namespace lathe {

struct NodeArgs {
  const graph::Node& node;
  std::span<const Tensor* const> inputs;  // in the node's input order; absent ones are null
  Tensor& out;                            // shaped as the node says, in planned memory
  float* workspace;                       // workspace_floats(node, ...) floats
  const graph::StepData& step;
  ThreadPool& pool;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual bool supports(const graph::Node& node) const = 0;
  // Scratch floats run() needs for this node of graph `g` with `threads` threads when no
  // sequence holds more than max_context positions; fixed for a planned graph.
  virtual size_t workspace_floats(const graph::Graph& g, const graph::Node& node, int threads,
                                  int64_t max_context) const = 0;
  // Computes the node. Throws lathe::Error on bad step data (an id outside the vocabulary).
  virtual void run(const NodeArgs& a) const = 0;
};

// The CPU backends: `reference` runs the portable reference kernels (plain loops, a fixed
// summation order: the numbers every other backend is tested against); otherwise the fast
// vectorised, threaded kernels where they exist.
const Backend& cpu_backend(bool reference);

}  // namespace lathe
