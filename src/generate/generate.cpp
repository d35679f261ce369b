#include "generate/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace lathe {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerateResult generate(const Model& model, Context& ctx, KVCache& cache,
                        std::span<const int32_t> prompt, const GenerateOptions& opts,
                        const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) fail("the prompt is empty: give at least one token");
  const int64_t needed = static_cast<int64_t>(prompt.size()) + opts.max_new_tokens;
  if (needed > cache.max_seq)
    fail("prompt of ", prompt.size(), " tokens plus ", opts.max_new_tokens, " new tokens needs ",
         needed, " positions; the KV cache holds ", cache.max_seq, " (raise --max-seq)");
  cache.clear();
  GenerateResult r;
  Sampler sampler(opts.sampling);
  std::vector<int32_t> context(prompt.begin(), prompt.end());

  auto t0 = std::chrono::steady_clock::now();
  Tensor logits = model.forward(ctx, prompt, cache, false);
  r.prefill_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < opts.max_new_tokens; ++step) {
    std::span<float> row(logits.mut<float>(), static_cast<size_t>(logits.dim(-1)));
    const int32_t id = sampler.next(row, context);
    r.tokens.push_back(id);
    context.push_back(id);
    if (on_token) on_token(id);
    if (std::find(opts.eos_token_ids.begin(), opts.eos_token_ids.end(), id) !=
        opts.eos_token_ids.end()) {
      r.stopped_on_eos = true;
      break;
    }
    if (step + 1 < opts.max_new_tokens) logits = model.forward(ctx, {&id, 1}, cache, false);
  }
  r.decode_seconds = seconds_since(t0);
  return r;
}

}  // namespace lathe
