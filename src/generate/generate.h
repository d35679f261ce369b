// The generation loop: prefill the prompt into a static KV cache, then one token at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "generate/sampler.h"
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

// Generates into `cache` (cleared first). `on_token` is called with each new id as it comes.
GenerateResult generate(const Model& model, Context& ctx, KVCache& cache,
                        std::span<const int32_t> prompt, const GenerateOptions& opts,
                        const std::function<void(int32_t)>& on_token = {});

}  // namespace lathe
