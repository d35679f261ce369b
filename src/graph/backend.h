// The interface between the engine and its kernels. A backend says truthfully which nodes it
// can run, how much scratch memory a node needs, and runs one node into its output. The
// executor (graph/executor.h) plans memory and calls run() node by node. Backends
// (src/backends/) implement this interface; nothing here knows one.
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
  int variant = 0;  // which of KernelChoices::variants(node) runs it (0: the default)
};

class KernelChoices;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // The kernels it runs on this machine ("avx512+avx512vnni"): a compiled module made for
  // other kernels is never used (its timings and bits could differ).
  virtual std::string kernel_level() const = 0;
  // Whether it has a kernel for node `n` of `g` with the dtypes of its inputs. The builder
  // asks before adding a node (graph/builder.h), and the executor before running one.
  virtual bool supports(const graph::Graph& g, const graph::Node& n) const = 0;
  // Scratch floats run() needs for this node of graph `g` with `threads` threads when no
  // sequence holds more than max_context positions; fixed for a planned graph.
  virtual size_t workspace_floats(const graph::Graph& g, const graph::Node& node, int threads,
                                  int64_t max_context) const = 0;
  // Computes the node. Throws lathe::Error on bad step data (an id outside the vocabulary).
  virtual void run(const NodeArgs& a) const = 0;
  // The choices the compiled mode can make among this backend's kernels; null: none.
  virtual const KernelChoices* choices() const { return nullptr; }
};

// What the compiled mode (src/compile/) times and chooses among: ways to run a node that all
// give the same bits, and Linear nodes run together.
class KernelChoices {
 public:
  virtual ~KernelChoices() = default;
  // How many ways the backend can run this node of `g` (how its work is split over threads
  // and tiled): NodeArgs::variant picks one, 0 being the default.
  virtual int variants(const graph::Graph&, const graph::Node&) const = 0;
  // A variant in words, for the compiled module's description ("4 tasks/thread, 96 rows").
  virtual std::string variant_name(const graph::Graph&, const graph::Node&, int) const = 0;
  // Whether run_linears runs this group of `g`'s Linear nodes (graph::linear_groups) as one,
  // faster than one by one.
  virtual bool fuses_linears(const graph::Graph&, std::span<const int32_t> group) const = 0;
  // Runs Linear nodes that read the same x (q, k and v; gate and up) together, each output with
  // the bits run() gives it alone; `group` in node order, each with the variant of its first.
  virtual void run_linears(std::span<const NodeArgs> group) const = 0;
};

// Fails, naming the op, the node and its inputs' dtypes, unless `b` has a kernel for node `n`
// of `g`.
void check_supported(const Backend& b, const graph::Graph& g, const graph::Node& n);

// The number of variants `b` has for node `n` of `g`: 1 without kernel choices.
inline int variant_count(const Backend& b, const graph::Graph& g, const graph::Node& n) {
  const KernelChoices* c = b.choices();
  return c ? c->variants(g, n) : 1;
}

}  // namespace lathe
