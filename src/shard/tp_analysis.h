// The tensor-parallel dataflow over a step graph (shared by the plan, src/shard/plan.h, and
// the ranks' graphs, src/shard/rank_graph.h): which Linear is column- or row-parallel, what
// every Weight node is to a rank, and how each value is held across ranks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "shard/plan.h"

namespace lathe::shard::detail {

// A value of the step graph as the ranks of a tensor-parallel run hold it: whole on every
// rank (units 0), or split along its features into `units` equal groups (heads, or single
// features of an MLP), each rank holding units / N of them.
struct Split {
  int64_t units = 0;
  Layout::Role unit = Layout::Role::ColumnFeatures;  // ColumnHeads, ColumnKv, ColumnFeatures
  bool split() const { return units > 0; }
};

struct Column {
  Layout::Role role;
  int64_t units;
};

struct TpAnalysis {
  std::map<int32_t, Column> column;  // Linear node -> its role and units
  struct WeightRole {
    Layout::Role role;
    int64_t units;
    Layout::Role unit;  // what the units are (a row-parallel weight's: its input's)
  };
  std::map<int32_t, WeightRole> weight;             // Weight node -> its role
  std::string problem;                              // the first node it cannot split; empty if none
  std::map<std::string, int64_t> cross_head_norms;  // what they normalise -> how many
  std::vector<Split> split;                         // per node: how its value is held
  int32_t head = -1;                                // the Linear that makes the logits
};

TpAnalysis analyze_tp(const graph::Graph& g);
// What tensor parallelism runs whole on every rank (recurrent mixers, DeepSeek's indexer,
// Gemma3n's AltUp), one line each.
std::vector<std::string> replicated_parts(const graph::Graph& g);
// Where a node sits, for messages.
std::string label(const graph::Graph& g, size_t i);
// The features of one token's row of a value: its elements over its first dimension.
int64_t row_features(const graph::Node& n);

}  // namespace lathe::shard::detail
