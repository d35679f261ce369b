// One rank's step graph of a sharded run, made from the graph the model builds for one
// process (docs/sharding.md, "How a rank runs"):
//
//   tensor parallelism: every column-parallel Linear keeps the rank's rows (its heads or MLP
//   features), the nodes after it run on that share (reshapes, rotary, per-head norms,
//   attention over the rank's heads and its share of the KV cache), and each row-parallel
//   Linear multiplies the rank's columns, then an AllReduce sums the ranks' products (its
//   bias added once, after). A vocabulary that divides is split too: each rank embeds the
//   ids in its range (an AllReduce joins them) and computes its columns of the logits (an
//   AllGather joins them). A norm over several heads' values gathers them first.
//
//   expert parallelism: the graph is the same on every rank but for its Experts nodes, which
//   hold only the rank's experts; an AllReduce sums the ranks' shares of each token's mixture.
//
// The slices are copies made once (ShardedModel keeps them) and reused by every later step.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "graph/builder.h"
#include "graph/collectives.h"
#include "models/engine.h"
#include "shard/plan.h"

namespace lathe::shard {

// A model this kind of sharding cannot split (its layers, or a count that does not divide),
// found when a rank's model is made: one sentence naming the node or the numbers.
class NotShardable : public Error {
 public:
  using Error::Error;
};

struct RankSpec {
  Parallelism parallelism = Parallelism::Tensor;
  int degree = 1, rank = 0;
  graph::Collectives* comm = nullptr;  // null only at degree 1
};

// The slices of weights a rank's graphs read, made on first use and kept.
class WeightSlices {
 public:
  // Indices [begin, end) of dimension `dim` of t (0, or the last), as a new tensor; with a
  // quantizer (a matmul's weight under --quantize), its quantized copy in its place.
  const Tensor& get(const Tensor& t, int dim, int64_t begin, int64_t end,
                    graph::WeightQuantizer* quantizer = nullptr);
  // What the slices hold, in bytes.
  uint64_t bytes();

 private:
  using Key = std::tuple<const void*, int, int64_t, int64_t, bool>;
  std::map<Key, Tensor> slices_;
  std::mutex mutex_;
};

// Appends the rank's graph of `g` (a graph the model built, its outputs the logits) to `out`,
// whose step inputs are `in`; returns the logits. Throws lathe::Error when the graph cannot be
// split this way (naming the node) or a count does not divide by the degree.
graph::Value append_rank_graph(const graph::Graph& g, const StepInputs& in, const RankSpec& spec,
                               WeightSlices& slices, graph::Builder& out);

// What each layer of the model keeps on this rank: under tensor parallelism a rank's KV
// cache holds its kv heads (kv_heads / degree, or the one it shares when the degree is a
// multiple of them).
std::vector<LayerStateSpec> rank_layer_states(std::vector<LayerStateSpec> states,
                                              const RankSpec& spec);

// A model whose steps are one rank's: the engine, generate, logits and the tiny check run it
// as they run any model. `inner` must build step graphs (a GraphModel). Making it builds a
// one-token step once, so that a model that cannot be split this way is refused at load
// (NotShardable) and the rank's weight slices are made then, not during the first step.
class ShardedModel : public GraphModel {
 public:
  ShardedModel(std::unique_ptr<Model> inner, const RankSpec& spec);
  graph::Value build(graph::Builder& g, const StepInputs& in) const override;
  std::vector<LayerStateSpec> layer_states() const override;
  const RankSpec& spec() const { return spec_; }
  const GraphModel& inner() const { return *inner_; }
  // The bytes of the rank's weight slices.
  uint64_t slice_bytes() const { return slices_.bytes(); }

 private:
  graph::Value build_rank(graph::Builder& g, const StepInputs& in) const;

  std::unique_ptr<Model> owner_;
  const GraphModel* inner_;
  RankSpec spec_;
  mutable WeightSlices slices_;
};

}  // namespace lathe::shard
