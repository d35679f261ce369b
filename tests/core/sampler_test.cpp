// The sampler's filters, each checked on a hand-made distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
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

// argmax finds the largest value in a vectorised loop first: it must still answer as
// std::max_element does, on ties, signed zeros, infinities and NaNs anywhere.
TEST(Sampler, GreedyAnswersAsMaxElementDoes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<float> v(1 + rng() % 70);
    for (float& x : v) x = static_cast<float>(small(rng));  // many ties
    if (trial % 5 == 1) v[rng() % v.size()] = -0.0f;
    if (trial % 7 == 2) v[rng() % v.size()] = inf;
    if (trial % 7 == 3) v[rng() % v.size()] = -inf;
    if (trial % 3 == 0) v[rng() % v.size()] = nan;
    if (trial % 11 == 4) v[0] = nan;
    const auto want = std::max_element(v.begin(), v.end()) - v.begin();
    EXPECT_EQ(argmax(v), want) << "trial " << trial;
  }
}

TEST(Sampler, RepetitionPenaltyAppliesToGreedyToo) {
  SamplingOptions o;
  o.repetition_penalty = 2.0;
  // 3.0 / 2 = 1.5 falls below 2.9: the seen token loses.
  EXPECT_EQ(draw(o, kLogits, 1, {1, 1}).begin()->first, 2);
}

// transformers' RepetitionPenaltyLogitsProcessor: a seen token's logit is divided by the
// penalty when positive and multiplied by it when negative (so it always becomes less
// likely), once per distinct id however often it was seen.
TEST(Sampler, RepetitionPenaltyMultipliesNegativeLogitsAndDividesPositiveOnes) {
  SamplingOptions o;
  o.repetition_penalty = 1.5;
  std::vector<float> l = {2.0f, -0.5f, 1.2f, -1.0f, 0.9f};
  const std::vector<int32_t> context = {0, 1, 1, 3, 3, 3};
  Sampler s(o);
  EXPECT_EQ(s.next(l, context), 0);  // 2 / 1.5 = 1.33 still beats 1.2
  EXPECT_FLOAT_EQ(l[0], 2.0f / 1.5f);
  EXPECT_FLOAT_EQ(l[1], -0.5f * 1.5f);
  EXPECT_FLOAT_EQ(l[2], 1.2f);
  EXPECT_FLOAT_EQ(l[3], -1.0f * 1.5f);
  EXPECT_FLOAT_EQ(l[4], 0.9f);
  // Both negative: the seen one, -1 * 1.5 = -1.5, falls below -1.2 (dividing would make it
  // -0.67 and keep it first).
  std::vector<float> negative = {-1.0f, -1.2f};
  EXPECT_EQ(Sampler(o).next(negative, std::vector<int32_t>{0}), 1);
}

// The filters compose as transformers' generate applies them: the penalty, then temperature,
// then top-k, then top-p over the probabilities renormalised to the top-k set, then min-p.
TEST(Sampler, FiltersComposeInTransformersOrder) {
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, -0.5f, -1.0f, 0.2f};
  const std::vector<int32_t> context = {0, 3};
  // Penalty 2: {1.5, 2, 1, -1, -1, 0.2}. Temperature 0.5: {3, 4, 2, -2, -2, 0.4}. Top-k 3
  // keeps ids 1, 0, 2 with probabilities e^0, e^-1, e^-2 over their sum: 0.665, 0.245, 0.090.
  // Top-p 0.9 needs 1 and 0 (0.910; over the whole vocabulary they would reach only 0.891,
  // and 2 would stay). Without the penalty 0 would lead; without the temperature (0.506,
  // 0.307, 0.186) top-p would keep all three.
  SamplingOptions o{.do_sample = true,
                    .temperature = 0.5,
                    .top_k = 3,
                    .top_p = 0.9,
                    .repetition_penalty = 2.0,
                    .seed = 3};
  const int n = 20000;
  const auto c = draw(o, logits, n, context);
  ASSERT_EQ(c.size(), 2u) << "ids 1 and 0 only";
  ASSERT_TRUE(c.count(0) && c.count(1));
  const double p1 = 1.0 / (1.0 + std::exp(-1.0));  // renormalised over the two kept
  EXPECT_NEAR(c.at(1) / double(n), p1, 0.015);     // 0.731; the standard error is 0.003
  EXPECT_NEAR(c.at(0) / double(n), 1 - p1, 0.015);
  // Min-p 0.4 after that: 0's probability is e^-1 = 0.37 of 1's, so only 1 remains.
  o.min_p = 0.4;
  EXPECT_EQ(draw(o, logits, 500, context), (std::map<int32_t, int>{{1, 500}}));
  // Min-p 0.3 keeps both.
  o.min_p = 0.3;
  EXPECT_EQ(draw(o, logits, 500, context).size(), 2u);
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
