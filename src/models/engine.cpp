#include "models/engine.h"
#include "backends/cpu/backend.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace lathe {

std::vector<LayerStateSpec> GraphModel::layer_states() const {
  return std::vector<LayerStateSpec>(
      static_cast<size_t>(info_.num_layers),
      {.kind = StateKind::FullKV, .kv_heads = info_.kv_heads, .head_dim = info_.head_dim});
}

KVCache GraphModel::new_cache(int64_t max_seq, DType kv_dtype) const {
  return new_cache(max_seq, kDefaultMaxStepTokens, kv_dtype);
}

KVCache GraphModel::new_cache(int64_t max_seq, int64_t max_step_tokens, DType kv_dtype) const {
  return KVCache(layer_states(), max_seq, max_step_tokens, kv_dtype);
}

Tensor GraphModel::forward(Context& ctx, std::span<const int32_t> ids, KVCache& cache,
                           bool all_logits, const Trace* trace) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n <= 0) fail("forward: no tokens");
  Engine engine(*this, ctx);
  KVCache* caches[] = {&cache};
  const int64_t chunk = std::min(n, cache.max_step_tokens());
  Tensor out;
  if (all_logits) out = Tensor::zeros(DType::F32, {n, info_.vocab_size});
  std::vector<int32_t> positions, seq, rows;
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t c = std::min(chunk, n - off);
    positions.resize(static_cast<size_t>(c));
    std::iota(positions.begin(), positions.end(), static_cast<int32_t>(cache.length));
    seq.assign(static_cast<size_t>(c), 0);
    rows.resize(all_logits ? static_cast<size_t>(c) : 1);
    std::iota(rows.begin(), rows.end(), static_cast<int32_t>(all_logits ? 0 : c - 1));
    const Tensor& logits =
        engine.step(ids.subspan(static_cast<size_t>(off), static_cast<size_t>(c)), positions, seq,
                    rows, caches, trace);
    if (all_logits)
      std::memcpy(out.mut<float>() + off * info_.vocab_size, logits.data<float>(), logits.nbytes());
    else if (off + c == n)
      out = logits.clone();
  }
  return out;
}

Engine::Engine(const GraphModel& model, Context& ctx) : model_(model), ctx_(ctx) {
  if (!ctx_.pool) fail("internal: Engine without a thread pool");
}

namespace {

int64_t round_up_pow2(int64_t n) {
  int64_t b = 1;
  while (b < n) b *= 2;
  return b;
}

StepInputs step_inputs(graph::Builder& b, int64_t n, int64_t r) {
  return {b.input(graph::InputSlot::Tokens, n), b.input(graph::InputSlot::Positions, n),
          b.input(graph::InputSlot::LogitRows, r)};
}

}  // namespace

int64_t context_bucket(int64_t max_context) {
  return round_up_pow2(max_context);
}

StepBucket step_bucket(int64_t tokens, int64_t rows) {
  const int64_t t = round_up_pow2(tokens);
  return {t, rows == tokens ? t : std::min(t, round_up_pow2(rows))};
}

void GraphModel::quantize_weights(DType type) {
  quantizer_ = std::make_unique<graph::WeightQuantizer>(type);
  graph::Builder b;
  b.set_quantizer(quantizer_.get());
  b.output(build(b, step_inputs(b, 1, 1)));
  info_.quantized = type;
  info_.quantized_matrices = quantizer_->stats().matrices;
  info_.quantized_bytes = quantizer_->stats().quantized_bytes;
}

graph::Graph Engine::build_graph(int64_t n, int64_t r) const {
  graph::Builder b;
  b.set_quantizer(model_.quantizer());
  b.set_backend(&cpu_backend(ctx_.reference_kernels));
  b.output(model_.build(b, step_inputs(b, n, r)));
  return std::move(b.graph());
}

graph::Plan& Engine::plan_for(int64_t n, int64_t r, int64_t max_context, graph::Value* logits) {
  for (Cached& c : plans_)
    if (c.tokens == n && c.rows == r && c.max_context >= max_context) {
      *logits = c.logits;
      return *c.plan;
    }
  constexpr size_t kKeep = 8;  // prefill shapes come and go; decode shapes stay
  if (plans_.size() == kKeep) plans_.erase(plans_.begin());
  graph::Graph g = build_graph(n, r);
  *logits = g.outputs.at(0);
  const Backend& backend = cpu_backend(ctx_.reference_kernels);
  const graph::Schedule* schedule = nullptr;
  if (ctx_.compiled) {
    // The module of the step's bucket serves it when the bucket's graph has the same nodes
    // (a model may build a different graph for some counts: then the step is its own bucket).
    // Cache sizes are bucketed too (a plan for more positions serves fewer).
    max_context = context_bucket(max_context);
    const StepBucket b = step_bucket(n, r);
    graph::Graph bucket_graph = b.tokens == n && b.rows == r ? g : build_graph(b.tokens, b.rows);
    const bool same = bucket_graph.hash(false) == g.hash(false);
    if (!same) bucket_graph = g;
    schedule = ctx_.compiled->schedule_for(bucket_graph, backend, *ctx_.pool, max_context,
                                           same ? b.tokens : n, same ? b.rows : r);
  }
  auto plan = std::make_unique<graph::Plan>(std::move(g), backend, ctx_.pool->size(), max_context,
                                            schedule);
  ++plans_built_;
  plans_.push_back({n, r, max_context, std::move(plan), *logits});
  return *plans_.back().plan;
}

void Engine::prepare(int64_t n, int64_t r, int64_t max_context) {
  graph::Value logits;
  if (!ctx_.eager) plan_for(n, r, max_context, &logits);
}

const Tensor& Engine::step(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                           std::span<const int32_t> seq, std::span<const int32_t> logit_rows,
                           std::span<KVCache* const> caches, const Trace* trace) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t r = static_cast<int64_t>(logit_rows.size());
  if (n <= 0) fail("forward: no tokens");
  if (positions.size() != tokens.size() || seq.size() != tokens.size())
    fail("internal: step of ", n, " tokens with ", positions.size(), " positions and ", seq.size(),
         " sequence indices");
  // Contiguous runs of one sequence each, continuing that sequence's cache.
  segments_.clear();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t s = seq[static_cast<size_t>(i)];
    if (i == 0 || s != seq[static_cast<size_t>(i - 1)]) {
      if (s < 0 || static_cast<size_t>(s) >= caches.size() || !caches[static_cast<size_t>(s)])
        fail("internal: token ", i, " of a step names sequence ", s, " of ", caches.size());
      for (const graph::Segment& earlier : segments_)
        if (earlier.seq == s)
          fail("internal: the tokens of sequence ", s, " are not contiguous in the step");
      segments_.push_back({s, i, 0, caches[static_cast<size_t>(s)]->length});
    }
    graph::Segment& g = segments_.back();
    if (positions[static_cast<size_t>(i)] != g.pos0 + g.count)
      fail("internal: token ", i, " of a step is at position ", positions[static_cast<size_t>(i)],
           "; its sequence continues at ", g.pos0 + g.count);
    ++g.count;
  }
  int64_t max_context = 0;
  for (const graph::Segment& g : segments_) {
    const KVCache& c = *caches[static_cast<size_t>(g.seq)];
    if (g.pos0 + g.count > c.max_seq)
      fail("sequence of ", g.pos0 + g.count, " tokens exceeds the KV cache of ", c.max_seq,
           " positions (raise --max-seq)");
    if (g.count > c.max_step_tokens())
      fail("internal: a step appends ", g.count, " tokens to a sequence whose cache takes ",
           c.max_step_tokens(), " at a time");
    max_context = std::max(max_context, c.max_seq);
  }
  for (int32_t row : logit_rows)
    if (row < 0 || row >= n) fail("internal: logit row ", row, " of a step of ", n, " tokens");

  const graph::StepData data{tokens, positions, logit_rows, segments_, caches, max_context};
  const Tensor* result;
  if (ctx_.eager) {
    graph::EagerRunner runner(cpu_backend(ctx_.reference_kernels), *ctx_.pool, data, trace);
    graph::Builder b(runner.hook(), runner.name_hook());
    b.set_quantizer(model_.quantizer());
    b.set_backend(&cpu_backend(ctx_.reference_kernels));
    eager_logits_ = runner.value(model_.build(b, step_inputs(b, n, r)));
    last_plan_ = nullptr;
    result = &eager_logits_;
  } else {
    graph::Value logits;
    graph::Plan& plan = plan_for(n, r, max_context, &logits);
    plan.run(*ctx_.pool, data, trace);
    last_plan_ = &plan;
    result = &plan.value(logits);
  }
  for (const graph::Segment& g : segments_) caches[static_cast<size_t>(g.seq)]->length += g.count;
  return *result;
}

}  // namespace lathe
