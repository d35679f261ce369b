// Models that build a graph, and the engine that runs their steps.
//
// A GraphModel builds the graph of one step (models/blocks.h has the shared blocks); the
// Engine feeds it batches: tokens of one or more sequences, their positions, which sequence
// each belongs to, and which rows want logits. In planned mode (the default) a step shape
// seen before reuses its plan, so a decode step allocates nothing; in eager mode
// (Context::eager) each node runs as it is built.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "graph/executor.h"
#include "models/model.h"

namespace lathe {

// The step inputs a model's graph starts from.
struct StepInputs {
  graph::Value tokens;      // [n] I32
  graph::Value positions;   // [n] I32
  graph::Value logit_rows;  // [r] I32: the rows whose logits the step returns
};

class GraphModel : public Model {
 public:
  // The graph of one step; returns the logits [r, vocab] (marked as the graph's output by the
  // caller).
  virtual graph::Value build(graph::Builder& g, const StepInputs& in) const = 0;
  // What each layer keeps between steps; full KV on every layer unless overridden.
  virtual std::vector<LayerStateSpec> layer_states() const;

  KVCache new_cache(int64_t max_seq, DType kv_dtype = DType::F32) const override;
  // With sliding layers a step appends at most max_step_tokens positions to a sequence (their
  // ring holds window - 1 + max_step_tokens keys); the engine splits longer prompts.
  KVCache new_cache(int64_t max_seq, int64_t max_step_tokens, DType kv_dtype = DType::F32) const;
  static constexpr int64_t kDefaultMaxStepTokens = 256;

  // Quantizes the model's Linear and Experts matrices to `type` (Q8_0, Q4_0) now, at load, by
  // building the graph of a one-token step once through a quantizer the model then keeps:
  // every later step graph takes the same quantized copies.
  void quantize_weights(DType type);
  graph::WeightQuantizer* quantizer() const { return quantizer_.get(); }

  // The one-sequence step, run through an Engine (prompts longer than the cache allows in one
  // step are split).
  Tensor forward(Context& ctx, std::span<const int32_t> ids, KVCache& cache, bool all_logits,
                 const Trace* trace = nullptr) const override;

 private:
  std::unique_ptr<graph::WeightQuantizer> quantizer_;
};

// A step shape's bucket in the compiled mode: tokens rounded up to a power of two; logit rows
// the same, or all the bucket's rows when the step wants every row's logits. Steps of one
// bucket share one compiled module.
struct StepBucket {
  int64_t tokens, rows;
};
StepBucket step_bucket(int64_t tokens, int64_t rows);
// The compiled mode's bucket of a cache size: the next power of two.
int64_t context_bucket(int64_t max_context);

class Engine {
 public:
  Engine(const GraphModel& model, Context& ctx);

  // Runs one step over a batch and appends each token to its sequence's cache. Token i
  // belongs to caches[seq[i]] at positions[i]; a sequence's tokens are contiguous and its
  // positions continue its cache (cache.length, cache.length + 1, ...). Returns the logits
  // of logit_rows, [logit_rows.size(), vocab], valid until the next step.
  const Tensor& step(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                     std::span<const int32_t> seq, std::span<const int32_t> logit_rows,
                     std::span<KVCache* const> caches, const Trace* trace = nullptr);

  // The plan of the last planned step (null in eager mode or before the first step).
  const graph::Plan* last_plan() const { return last_plan_; }
  // How many distinct step graphs were built and planned so far.
  int64_t plans_built() const { return plans_built_; }

  // The graph of a step of n tokens with r logit rows, as the model builds it.
  graph::Graph build_graph(int64_t n, int64_t r) const;
  // Plans (in the compiled mode: compiles, or reads from the compile cache) the step of n
  // tokens with r logit rows over caches of max_context positions now, without running it:
  // the lab's compile stage.
  void prepare(int64_t n, int64_t r, int64_t max_context);

 private:
  struct Cached {
    int64_t tokens, rows, max_context;
    std::unique_ptr<graph::Plan> plan;
    graph::Value logits;
  };
  graph::Plan& plan_for(int64_t n, int64_t r, int64_t max_context, graph::Value* logits);

  const GraphModel& model_;
  Context& ctx_;
  std::vector<Cached> plans_;  // the most recent step shapes, newest last
  std::vector<graph::Segment> segments_;
  graph::Plan* last_plan_ = nullptr;
  int64_t plans_built_ = 0;
  Tensor eager_logits_;
};

}  // namespace lathe
