// The sampler's filters, each checked on a hand-made distribution.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "generate/sampler.h"

namespace lathe {
namespace {

// Token counts over many draws from fresh logits.
std::map<int32_t, int> draw(const SamplingOptions& o, const std::vector<float>& logits, int n,
                            const std::vector<int32_t>& context = {}) {
  Sampler s(o);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    counts[s.next(l, context)]++;
  }
  return counts;
}

const std::vector<float> kLogits = {1.0f, 3.0f, 2.9f, -1.0f, 0.5f};

TEST(Sampler, GreedyPicksTheFirstMaximum) {
  EXPECT_EQ(draw({}, kLogits, 1).begin()->first, 1);
  EXPECT_EQ(argmax(std::vector<float>{2, 5, 5}), 1);
}

TEST(Sampler, RepetitionPenaltyAppliesToGreedyToo) {
  SamplingOptions o;
  o.repetition_penalty = 2.0;
  // 3.0 / 2 = 1.5 falls below 2.9: the seen token loses.
  EXPECT_EQ(draw(o, kLogits, 1, {1, 1}).begin()->first, 2);
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  SamplingOptions o{.do_sample = true, .temperature = 1.0, .top_k = 2};
  const auto c = draw(o, kLogits, 2000);
  for (const auto& [id, n] : c) EXPECT_TRUE(id == 1 || id == 2) << id;
  EXPECT_EQ(c.size(), 2u);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // p(1) ~ 0.44, p(2) ~ 0.40: top_p 0.5 needs both, top_p 0.3 needs only the first.
  SamplingOptions o{.do_sample = true, .top_p = 0.5};
  EXPECT_EQ(draw(o, kLogits, 2000).size(), 2u);
  o.top_p = 0.3;
  EXPECT_EQ(draw(o, kLogits, 200).size(), 1u);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingOptions o{.do_sample = true, .min_p = 0.5};  // keeps tokens >= half the best
  const auto c = draw(o, kLogits, 2000);
  EXPECT_EQ(c.size(), 2u);
}

TEST(Sampler, LowTemperatureApproachesGreedy) {
  SamplingOptions o{.do_sample = true, .temperature = 0.01};
  const auto c = draw(o, kLogits, 500);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.begin()->first, 1);
}

TEST(Sampler, SeedMakesDrawsRepeatable) {
  SamplingOptions o{.do_sample = true, .seed = 42};
  EXPECT_EQ(draw(o, kLogits, 300), draw(o, kLogits, 300));
  SamplingOptions other = o;
  other.seed = 43;
  EXPECT_NE(draw(o, kLogits, 300), draw(other, kLogits, 300));
}

TEST(Sampler, RejectsBadSettings) {
  EXPECT_THROW(Sampler({.do_sample = true, .temperature = 0}), std::exception);
  EXPECT_THROW(Sampler({.top_p = 1.5}), std::exception);
  EXPECT_THROW(Sampler({.repetition_penalty = 0}), std::exception);
}

}  // namespace
}  // namespace lathe
