// The interface between the engine and the kernels: a backend says which nodes it can run,
// how much scratch memory a node needs, and runs one node into its output. The executor
// (graph/executor.h) plans memory and calls run() node by node.
#pragma once

#include <cstddef>
#include <span>
#include <string>

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
  int variant = 0;  // which of the backend's variants(node) runs it (0: the default)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // The kernels it runs on this machine ("avx512+avx512vnni"): a compiled module made for
  // other kernels is never used (its timings and bits could differ).
  virtual std::string kernel_level() const = 0;
  virtual bool supports(const graph::Node& node) const = 0;
  // Scratch floats run() needs for this node of graph `g` with `threads` threads when no
  // sequence holds more than max_context positions; fixed for a planned graph.
  virtual size_t workspace_floats(const graph::Graph& g, const graph::Node& node, int threads,
                                  int64_t max_context) const = 0;
  // Computes the node. Throws lathe::Error on bad step data (an id outside the vocabulary).
  virtual void run(const NodeArgs& a) const = 0;
  // How many ways the backend can run this node of `g`, all giving the same bits (how its
  // work is split over threads and tiled): NodeArgs::variant picks one, 0 being the default.
  // The compiled mode times them on this machine and keeps the fastest (src/compile/tune.h).
  virtual int variants(const graph::Graph&, const graph::Node&) const { return 1; }
  // Whether run_linears runs this group of `g`'s Linear nodes (graph::linear_groups) as one,
  // faster than one by one; the compiled mode times the groups it says yes to.
  virtual bool fuses_linears(const graph::Graph&, std::span<const int32_t> /*group*/) const {
    return false;
  }
  // Runs Linear nodes that read the same x (q, k and v; gate and up) together, each output with
  // the bits run() gives it alone; `group` in node order, each with the variant of its first.
  virtual void run_linears(std::span<const NodeArgs> group) const {
    for (const NodeArgs& a : group) run(a);
  }
  // A variant in words, for the compiled module's description ("4 tasks/thread, 96 rows").
  virtual std::string variant_name(const graph::Graph&, const graph::Node&, int) const {
    return "default";
  }
};

// The CPU backends: `reference` runs the portable reference kernels (plain loops, a fixed
// summation order: the numbers every other backend is tested against); otherwise the fast
// vectorised, threaded kernels where they exist.
const Backend& cpu_backend(bool reference);

}  // namespace lathe
