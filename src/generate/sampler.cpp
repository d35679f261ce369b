#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace lathe {

Sampler::Sampler(const SamplingOptions& opts) : opts_(opts), rng_(opts.seed) {
  if (opts.temperature <= 0 && opts.do_sample)
    fail("temperature must be positive when sampling, got ", opts.temperature);
  if (opts.top_p <= 0 || opts.top_p > 1) fail("top_p must be in (0, 1], got ", opts.top_p);
  if (opts.min_p < 0 || opts.min_p > 1) fail("min_p must be in [0, 1], got ", opts.min_p);
  if (opts.top_k < 0) fail("top_k must be >= 0, got ", opts.top_k);
  if (opts.repetition_penalty <= 0)
    fail("repetition_penalty must be positive, got ", opts.repetition_penalty);
}

int32_t argmax(std::span<const float> values) {
  // The largest value over 16 lanes the compiler vectorises (no branch per element, no chain
  // of dependent maxima), then its first index: std::max_element's answer in a fraction of
  // its time over a vocabulary. Both pass over NaNs, unless the first value is one: then
  // nothing equals `largest`, and std::max_element answers (0).
  constexpr size_t kLanes = 16;
  const size_t n = values.size(), whole = n / kLanes * kLanes;
  float lane[kLanes];
  for (float& l : lane) l = n ? values[0] : 0.0f;
  for (size_t i = 0; i < whole; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lane[j] = values[i + j] > lane[j] ? values[i + j] : lane[j];
  float largest = lane[0];
  for (float l : lane) largest = l > largest ? l : largest;
  for (size_t i = whole; i < n; ++i) largest = values[i] > largest ? values[i] : largest;
  for (size_t i = 0; i < n; ++i)
    if (values[i] == largest) return static_cast<int32_t>(i);
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

int32_t Sampler::next(std::span<float> logits, std::span<const int32_t> context) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (opts_.repetition_penalty != 1.0) {
    // transformers RepetitionPenaltyLogitsProcessor: each distinct id seen once.
    const float p = static_cast<float>(opts_.repetition_penalty);
    std::vector<bool> seen(static_cast<size_t>(vocab), false);
    for (int32_t id : context) {
      if (id < 0 || id >= vocab || seen[id]) continue;
      seen[id] = true;
      logits[id] = logits[id] < 0 ? logits[id] * p : logits[id] / p;
    }
  }
  if (!opts_.do_sample) return argmax(logits);

  const float inv_t = static_cast<float>(1.0 / opts_.temperature);
  for (float& l : logits) l *= inv_t;
  // Candidates sorted by logit, descending.
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = order.size();
  if (opts_.top_k > 0) keep = std::min<size_t>(keep, static_cast<size_t>(opts_.top_k));
  const float max_logit = logits[order[0]];
  std::vector<double> probs(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs[i] = std::exp(logits[order[i]] - max_logit);
  for (double& p : probs) p /= total;
  if (opts_.top_p < 1.0) {
    // Keep the smallest prefix whose mass reaches top_p (at least one token).
    double mass = 0;
    size_t n = 0;
    while (n < keep) {
      mass += probs[n++];
      if (mass >= opts_.top_p) break;
    }
    keep = n;
  }
  if (opts_.min_p > 0) {
    // Drop tokens below min_p times the top token's probability.
    const double floor = opts_.min_p * probs[0];
    size_t n = 1;
    while (n < keep && probs[n] >= floor) ++n;
    keep = n;
  }
  std::discrete_distribution<size_t> pick(probs.begin(), probs.begin() + static_cast<long>(keep));
  return order[pick(rng_)];
}

}  // namespace lathe
