#include "generate/generate.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/error.h"

namespace lathe {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool is_eos(const GenerateOptions& opts, int32_t id) {
  return std::find(opts.eos_token_ids.begin(), opts.eos_token_ids.end(), id) !=
         opts.eos_token_ids.end();
}

}  // namespace

bool rebuilds_cache(const Model& model, const KVCache& cache) {
  const int64_t at = model.info().rebuild_cache_at;
  return at > 0 && cache.length == at;
}

std::vector<GenerateResult> generate_batch(const GraphModel& model, Context& ctx,
                                           std::span<KVCache* const> caches,
                                           std::span<const BatchRequest> requests,
                                           const GenerateOptions& opts,
                                           const std::function<void(size_t, int32_t)>& on_token) {
  const size_t count = requests.size();
  if (caches.size() != count)
    fail("internal: generate_batch: ", count, " requests with ", caches.size(), " caches");
  for (size_t i = 0; i < count; ++i) {
    const BatchRequest& r = requests[i];
    if (r.prompt.empty()) fail("request ", i + 1, ": the prompt is empty: give at least one token");
    const int64_t needed = static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
    if (needed > caches[i]->max_seq)
      fail("request ", i + 1, ": prompt of ", r.prompt.size(), " tokens plus ", r.max_new_tokens,
           " new tokens needs ", needed, " positions; the KV cache holds ", caches[i]->max_seq,
           " (raise --max-seq)");
    caches[i]->clear();
  }
  std::vector<GenerateResult> results(count);
  std::vector<Sampler> samplers;
  std::vector<std::vector<int32_t>> contexts;
  for (const BatchRequest& r : requests) {
    samplers.emplace_back(opts.sampling);
    contexts.push_back(r.prompt);
  }
  Engine engine(model, ctx);
  std::vector<int32_t> tokens, positions, seq, rows;
  std::vector<size_t> row_seq;        // the sequence each logit row belongs to
  std::vector<size_t> fed(count, 0);  // prompt tokens already run
  std::vector<bool> running(count, true);
  // Picks each row's next token; a sequence stops at eos or its max_new_tokens.
  auto take = [&](const Tensor& logits) {
    const int64_t vocab = logits.dim(-1);
    for (size_t r = 0; r < row_seq.size(); ++r) {
      const size_t i = row_seq[r];
      std::span<float> row(
          const_cast<float*>(logits.data<float>()) + static_cast<int64_t>(r) * vocab,
          static_cast<size_t>(vocab));
      const int32_t id = samplers[i].next(row, contexts[i]);
      results[i].tokens.push_back(id);
      contexts[i].push_back(id);
      if (on_token) on_token(i, id);
      if (is_eos(opts, id)) results[i].stopped_on_eos = true;
      if (results[i].stopped_on_eos ||
          static_cast<int64_t>(results[i].tokens.size()) >= requests[i].max_new_tokens)
        running[i] = false;
    }
  };

  // Prefill time is the prompt's steps alone; picking the first tokens counts as decode, as
  // in the single-sequence loop before batches.
  const auto start = std::chrono::steady_clock::now();
  double prefill = 0;
  // Prefill: the next slice of every unfinished prompt, one step at a time.
  for (bool more = true; more;) {
    more = false;
    tokens.clear(), positions.clear(), seq.clear(), rows.clear(), row_seq.clear();
    for (size_t i = 0; i < count; ++i) {
      const auto& p = requests[i].prompt;
      if (fed[i] == p.size()) continue;
      const size_t n =
          std::min<size_t>(p.size() - fed[i], static_cast<size_t>(caches[i]->max_step_tokens()));
      for (size_t t = 0; t < n; ++t) {
        tokens.push_back(p[fed[i] + t]);
        positions.push_back(static_cast<int32_t>(caches[i]->length + static_cast<int64_t>(t)));
        seq.push_back(static_cast<int32_t>(i));
      }
      fed[i] += n;
      if (fed[i] == p.size()) {
        if (requests[i].max_new_tokens > 0) {
          rows.push_back(static_cast<int32_t>(tokens.size() - 1));
          row_seq.push_back(i);
        } else {
          running[i] = false;
        }
      } else {
        more = true;
      }
    }
    if (tokens.empty()) break;
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor& logits = engine.step(tokens, positions, seq, rows, caches);
    prefill += seconds_since(t0);
    take(logits);
  }
  // Empties sequence i's cache and runs its context again, alone, up to the last step's worth
  // of tokens (more than one step only where sliding rings bound the step); returns where
  // the rest of the context starts.
  auto rebuild = [&](size_t i) {
    caches[i]->clear();
    const std::vector<int32_t>& c = contexts[i];
    const size_t chunk = static_cast<size_t>(caches[i]->max_step_tokens());
    std::vector<int32_t> pos, one_seq;
    size_t from = 0;
    for (; c.size() - from > chunk; from += chunk) {
      pos.resize(chunk);
      std::iota(pos.begin(), pos.end(), static_cast<int32_t>(from));
      one_seq.assign(chunk, static_cast<int32_t>(i));
      const int32_t last = static_cast<int32_t>(chunk - 1);
      engine.step(std::span(c).subspan(from, chunk), pos, one_seq, {&last, 1}, caches);
    }
    return from;
  };
  // Decode: one token for every running sequence per step, or its whole context where the
  // model asks for its cache to be rebuilt.
  for (;;) {
    tokens.clear(), positions.clear(), seq.clear(), rows.clear(), row_seq.clear();
    for (size_t i = 0; i < count; ++i) {
      if (!running[i]) continue;
      const size_t from = rebuilds_cache(model, *caches[i]) ? rebuild(i) : contexts[i].size() - 1;
      for (size_t t = from; t < contexts[i].size(); ++t) {
        tokens.push_back(contexts[i][t]);
        positions.push_back(
            static_cast<int32_t>(caches[i]->length + static_cast<int64_t>(t - from)));
        seq.push_back(static_cast<int32_t>(i));
      }
      rows.push_back(static_cast<int32_t>(tokens.size() - 1));
      row_seq.push_back(i);
    }
    if (tokens.empty()) break;
    take(engine.step(tokens, positions, seq, rows, caches));
  }
  const double decode = seconds_since(start) - prefill;
  for (GenerateResult& r : results) r.prefill_seconds = prefill, r.decode_seconds = decode;
  return results;
}

GenerateResult generate(const Model& model, Context& ctx, KVCache& cache,
                        std::span<const int32_t> prompt, const GenerateOptions& opts,
                        const std::function<void(int32_t)>& on_token) {
  const auto* graph_model = dynamic_cast<const GraphModel*>(&model);
  if (!graph_model) fail("internal: ", model.info().architecture, " builds no step graph");
  if (prompt.empty()) fail("the prompt is empty: give at least one token");
  const int64_t needed = static_cast<int64_t>(prompt.size()) + opts.max_new_tokens;
  if (needed > cache.max_seq)
    fail("prompt of ", prompt.size(), " tokens plus ", opts.max_new_tokens, " new tokens needs ",
         needed, " positions; the KV cache holds ", cache.max_seq, " (raise --max-seq)");
  KVCache* caches[] = {&cache};
  const BatchRequest request{{prompt.begin(), prompt.end()}, opts.max_new_tokens};
  auto each = [&](size_t, int32_t id) {
    if (on_token) on_token(id);
  };
  return generate_batch(*graph_model, ctx, caches, {&request, 1}, opts, each).at(0);
}

}  // namespace lathe
