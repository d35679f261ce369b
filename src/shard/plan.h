// Shard plans as data: for a loaded model and a degree N, how each of N ranks takes every
// tensor of the checkpoint (docs/sharding.md).
//
// Nothing here is a table per architecture. The plan is derived from the model's own step
// graph: which Linear nodes feed an attention's q, k, v or an MLP's activation (column-
// parallel), which ones read a value split across ranks (row-parallel), which tables are
// embeddings or the head (vocabulary-parallel), which matrices are experts (expert-parallel).
// The graph's weights are found in the checkpoint by address, through the FetchLog the loader
// filled (io/checkpoint.h), so a fused [q | k | v] tensor is seen as its three row blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/state.h"
#include "io/checkpoint.h"
#include "models/model.h"

namespace lathe::shard {

// Tensor parallelism splits every layer's heads and MLP features; expert parallelism gives
// each rank a share of the experts and keeps everything else whole.
enum class Parallelism : uint8_t { Tensor, Expert };
const char* parallelism_name(Parallelism p);  // "tp", "ep"

// How a rank takes one checkpoint tensor:
//   Column:     rows split (output features): q, k, v, gate, up, their biases, attention
//               sinks; a fused tensor is split part by part, each rank taking its block of
//               every part (not copies of the whole);
//   Row:        columns split (input features): o_proj, down_proj; their outputs are summed
//               across ranks (an all-reduce) before the residual add;
//   Replicated: whole on every rank (norms, row-parallel biases, routers, small tensors);
//   Vocab:      rows of the vocabulary split: the embedding table (each rank embeds the ids
//               in its range, then an all-reduce) and the head (each rank its logits' columns,
//               then an all-gather);
//   Expert:     whole experts held by one rank each (expert parallelism);
//   Unused:     read by no rank (the loader ignores it, as transformers does).
enum class ShardKind : uint8_t { Column, Row, Replicated, Vocab, Expert, Unused };
inline constexpr int kShardKinds = 6;
const char* kind_name(ShardKind k);

// Indices [begin, end) along a tensor's split dimension.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

// How the loader stores a tensor in memory, for the planner's byte counts.
enum class Loaded : uint8_t {
  None,    // not loaded, or counted with another tensor (an MXFP4 or FP8 matrix's scales)
  Matrix,  // in the matrix dtype (--dtype), or quantized (--quantize) when `quantizable`
  Vector,  // always F32
  Mxfp4,   // MXFP4 kept packed (17 bytes per 32 values)
  Fp8,     // FP8 kept packed (36 bytes per 32 values)
};

struct TensorShard {
  std::string name;    // as the checkpoint names it
  std::string dtype;   // as stored
  Shape shape;         // as stored
  uint64_t bytes = 0;  // as stored
  ShardKind kind = ShardKind::Replicated;
  int dim = 0;  // the dimension `ranks` index: 0, or the last for Row
  // Per rank, the ranges of `dim` it holds; its slice is their concatenation in this order.
  // Replicated: the whole range on every rank; Unused: nothing anywhere.
  std::vector<std::vector<Range>> ranks;
  std::string use;   // the graph's use of it, e.g. "layer.0 attention q, k, v (fused)"
  std::string note;  // an exception, said in words (KV heads replicated, a cross-head norm)
  // The planner's byte counts: how it is loaded, its elements once loaded, and whether
  // --quantize would quantize it (a Linear's or expert's matrix, rows of whole 64s).
  Loaded loaded = Loaded::None;
  int64_t loaded_numel = 0;
  bool quantizable = false;

  int64_t extent(int rank) const;   // elements of `dim` that rank holds
  double fraction(int rank) const;  // extent / shape[dim]
};

struct ShardPlan {
  std::string architecture;
  Parallelism parallelism = Parallelism::Tensor;
  int degree = 1;
  std::vector<TensorShard> tensors;  // every tensor of the checkpoint, by name
  std::vector<uint64_t> rank_bytes;  // stored bytes each rank holds
  // EP: the rank that holds each expert (expert e: expert_rank[e]); empty for TP.
  std::vector<int> expert_rank;
  std::vector<std::string> notes;  // the exceptions the plan makes, one line each
  int64_t count(ShardKind k) const;
};

// What the step graph says about the model's layout, whatever the degree: computed once per
// model, then planned for each degree the planner tries.
struct Layout {
  std::string architecture;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, experts = 0;
  // Why tensor parallelism is not built for this model (layers of unequal expert counts); empty
  // when it is. One sentence naming the node and what it is.
  std::string tp_unsupported;
  // Why expert parallelism is not: the model has no experts, or layers of unequal counts.
  std::string ep_unsupported;
  std::vector<LayerStateSpec> states;  // per layer, for KV and state bytes

  // One graph weight's use by the step graph, in each parallelism (internal to the planner,
  // public for tests and tools).
  enum class Role : uint8_t {
    Replicated,
    ColumnHeads,     // q projection (or its bias): units = q heads
    ColumnKv,        // k or v projection: units = kv heads
    ColumnFeatures,  // gate, up, an ungated MLP's first projection: units = features
    HeadsVector,     // one value per q head (attention sinks)
    Row,             // reads a split value: units of its input columns
    Vocab,           // an embedding table or the head
    CrossHeadNorm,   // a norm over the whole projection of all heads (OLMo2's q_norm)
    Expert,          // expert `expert`'s matrix or bias
  };
  struct Use {
    size_t record = 0;             // index into the fetch log
    int64_t first = 0, count = 0;  // the rows of the loaded tensor it uses (dimension 0)
    Role tp = Role::Replicated, ep = Role::Replicated;
    int64_t units = 0;                 // Column*, HeadsVector, Row: the units split across ranks
    Role unit = Role::ColumnFeatures;  // what they are: ColumnHeads, ColumnKv, ColumnFeatures
    int64_t expert = -1;               // Expert
    std::string node;                  // the graph node that reads it, for messages
  };
  std::vector<Use> uses;
  // Per fetch-log record, whether --quantize quantizes it.
  std::vector<bool> quantizable;
  std::vector<std::string> notes;  // degree-independent exceptions (cross-head norms)
};

// `model` must have been loaded while `log` was its checkpoint's fetch log, without
// --quantize (the planner counts quantized bytes itself). Throws lathe::Error when the model
// builds no step graph.
Layout analyze(const Model& model, const FetchLog& log);

// Expert parallelism's split: rank r holds experts [r * experts / n, (r + 1) * experts / n),
// contiguous and as even as the count allows (every rank at least one when experts >= n).
Range expert_block(int64_t experts, int n, int r);

// The plan of `degree` ranks. Degree 1 replicates everything. Throws lathe::Error when the
// layout cannot be sharded this way (Layout::tp_unsupported / ep_unsupported) or a count does
// not divide, naming the model, the tensor and the numbers ("9 heads across 2 ranks").
ShardPlan make_plan(const Layout& layout, const Checkpoint& ckpt, const FetchLog& log,
                    Parallelism parallelism, int degree);

// A rank's slice of a tensor laid out as `t` is (the loaded tensor, or the stored one when
// its dtype is plain): the rows or columns of its ranges, concatenated along `dim`.
Tensor slice(const Tensor& t, const TensorShard& shard, int rank);

}  // namespace lathe::shard
