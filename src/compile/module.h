// A compiled module: what the compiled mode computes once for a step graph and keeps in the
// compile cache (cache.h), so that a later run, or another machine with the same lathe,
// skips it:
//  - the memory plan: where every intermediate and scratch buffer lives in one arena;
//  - the kernel choices: for every node the backend can run several ways (how a Linear's
//    work is split over threads and tiled, KernelChoices::variants), the way that measured fastest
//    on this machine for this shape; every way gives the same bits, so a compiled run equals
//    an eager one bit for bit.
// A module is made for a shape bucket (graph/executor.h's Schedule is checked against each
// graph it serves): prefill steps of 65..128 tokens share the module of 128.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/backend.h"
#include "graph/executor.h"

namespace lathe::compile {

// Bumped when module.json's meaning changes; part of the flags, so old entries are not used.
inline constexpr int kModuleFormat = 3;

// What besides the graph decides a module's content: the flags hash keys it in the cache
// (flags.json holds them in words).
struct Flags {
  std::string backend;        // Backend::name()
  std::string kernels;        // Backend::kernel_level(): the instruction set the kernels use
  int threads = 1;            // the pool the plan is made for (scratch is per thread)
  int64_t max_context = 0;    // the caches' positions (attention scratch)
  int64_t tokens = 0;         // the bucket: tokens in a step
  int64_t rows = 0;           //   and logit rows
  std::string shard = "tp1";  // the shard layout: tp1 for one process, tp2, ep4 for a rank

  std::string json() const;
  std::string hash() const;  // 16 hex digits
};

// 16 hex digits of a graph's hash (Graph::hash()).
std::string hex_hash(uint64_t h);

// One tuned node: which variant was chosen and what each measured.
struct Tuned {
  int32_t node = 0;
  std::string name;             // the node's name, or its op
  int32_t variant = 0;          // the chosen one
  std::vector<double> seconds;  // best time of each variant, in variant order
};

// One measured Linear group (graph::linear_groups): its nodes one by one (each with its
// chosen variant) against the group run as one; kept when that is 3% faster.
struct Fused {
  std::vector<int32_t> nodes;
  std::string matrices;  // the weights' shapes and dtypes: "576x576 Q8_0 + 192x576 Q8_0"
  double separate_seconds = 0, fused_seconds = 0;
  bool kept = false;
};

// The compiler's choices checked as a whole: the step's Linear nodes and groups run in step
// order with the planner's schedule (default variants, every group run as one) and with the
// chosen one; the chosen one is kept only when 3% faster, for a node timed alone can look
// faster than it runs among the others. Both times are 0 when the choices were the planner's
// own (nothing to check).
struct Checked {
  double planned_seconds = 0, chosen_seconds = 0;
  bool kept = false;
};

struct Module {
  std::string graph_hash;  // of the bucket's graph
  Flags flags;
  graph::Schedule schedule;
  std::vector<Tuned> tuned;
  std::vector<Fused> fused;
  Checked checked;
  double compile_seconds = 0;

  std::string json() const;  // module.json
  // Reads module.json; throws lathe::Error naming `origin` and the field when it is malformed.
  // Sizes are checked against the graph later (graph::check_schedule), not trusted here.
  static Module parse(const std::string& text, const std::string& origin);
};

// What compiling counted: the tests check the warm path did none of the costly work.
struct Work {
  int64_t nodes_timed = 0;   // kernel variants timed (the costly part)
  int64_t groups_timed = 0;  // Linear groups timed fused against one by one
  int64_t steps_timed = 0;   // the chosen schedule's Linear nodes against the planner's
  int64_t plans = 0;         // memory plans computed
};

// Compiles the graph of a bucket: plans its memory, then times each variant of every node
// the backend can run several ways (nodes of the same op and shapes are timed once) and keeps
// the fastest; a variant must beat the default by 3% to replace it, so noise does not churn.
// Then it times each group of Linear nodes that read the same x (graph::linear_groups; groups
// of the same shapes once) run as one against one by one, and fuses the groups 3% faster so
// (the memory plan is made again with them). Last it times the step's leading Linear nodes
// (keep_leading_nodes, kCheckBytes) with these choices against the planner's schedule
// (Checked), and keeps the planner's unless the choices are 3% faster.
Module compile_module(const graph::Graph& bucket, const Backend& backend, ThreadPool& pool,
                      const Flags& flags, Work& work);

// The weights of the Linear nodes the step check times: a step's leading nodes, in order, until
// their weights reach this. The layers repeat, so a few of them in sequence show what the whole
// step would, and a long prefill is not run four times over: timing every Linear node of
// SmolLM2's 512-token f32 prefill made compiling its two modules take 3.4-4.1 s on two
// threads, and the 1B shape's 9.4-9.7 s.
inline constexpr size_t kCheckBytes = size_t{64} << 20;

// Keeps, of the nodes `which` marks, the first ones in node order until their Linear weights
// reach `bytes` (at least one node), and then the rest of any of `groups` begun; unmarks the
// others.
void keep_leading_nodes(const graph::Graph& g, const std::vector<std::vector<int32_t>>& groups,
                        std::vector<bool>& which, size_t bytes);

}  // namespace lathe::compile
