// The generation loop: prefill the prompt into a static KV cache, then one token at a time
// (a model may ask for the whole sequence to be run again once, at ModelInfo::rebuild_cache_at).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "generate/sampler.h"
#include "models/engine.h"
#include "models/model.h"

namespace lathe {

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  SamplingOptions sampling;
  std::vector<int32_t> eos_token_ids;  // stop after generating any of these
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids, the stopping eos included (as transformers)
  bool stopped_on_eos = false;
  double prefill_seconds = 0, decode_seconds = 0;
};

// Whether the next decode step of a sequence whose keys and values `cache` holds must run
// the whole sequence again from an empty cache rather than append one token: when the cache
// holds exactly ModelInfo::rebuild_cache_at positions (Phi-3 longrope, as transformers).
bool rebuilds_cache(const Model& model, const KVCache& cache);

// Generates into `cache` (cleared first). `on_token` is called with each new id as it comes.
GenerateResult generate(const Model& model, Context& ctx, KVCache& cache,
                        std::span<const int32_t> prompt, const GenerateOptions& opts,
                        const std::function<void(int32_t)>& on_token = {});

// One request of a batch: its prompt and how many tokens it may generate.
struct BatchRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 32;
};

// Generates for every request at once, each sequence in its own cache (cleared first):
// prompts are prefilled together (split into steps of at most the caches' step size), then
// each step decodes one token for every sequence still running. Each sequence gets its own
// sampler, so the tokens are exactly those of separate runs. `opts.max_new_tokens` is
// ignored in favour of each request's; timings are the batch's. `on_token(i, id)` is called
// for sequence i's new ids as they come.
std::vector<GenerateResult> generate_batch(
    const GraphModel& model, Context& ctx, std::span<KVCache* const> caches,
    std::span<const BatchRequest> requests, const GenerateOptions& opts,
    const std::function<void(size_t, int32_t)>& on_token = {});

}  // namespace lathe
