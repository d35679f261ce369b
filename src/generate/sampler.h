// Choosing the next token from logits, as transformers' generate does: the repetition
// penalty first (for greedy decoding too), then temperature, top-k, top-p and min-p.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace lathe {

struct SamplingOptions {
  bool do_sample = false;  // false: greedy (argmax)
  double temperature = 1.0;
  int64_t top_k = 0;   // 0: off
  double top_p = 1.0;  // 1: off
  double min_p = 0.0;  // 0: off
  double repetition_penalty = 1.0;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& opts);
  // `logits` is modified in place. `context` holds every id so far (prompt and generated)
  // for the repetition penalty.
  int32_t next(std::span<float> logits, std::span<const int32_t> context);

 private:
  SamplingOptions opts_;
  std::mt19937_64 rng_;
};

// The index of the largest value; the first one on ties (as torch.argmax).
int32_t argmax(std::span<const float> values);

}  // namespace lathe
