// Rotary configuration reading: legacy and current config layouts, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "models/rope.h"

namespace lathe {
namespace {

RopeConfig read(const std::string& text, int64_t head_dim = 16, int64_t max_pos = 64) {
  static Json j;
  j = Json::parse(text);
  return read_rope_config(JsonFields(j, "config.json"), head_dim, max_pos);
}

TEST(Rope, LegacyAndCurrentLayoutsAgree) {
  const RopeConfig a =
      read(R"({"rope_theta": 500.0, "rope_scaling": {"type": "linear", "factor": 2}})");
  const RopeConfig b =
      read(R"({"rope_parameters": {"rope_type": "linear", "rope_theta": 500.0, "factor": 2}})");
  EXPECT_EQ(a.kind, RopeKind::Linear);
  EXPECT_EQ(b.kind, RopeKind::Linear);
  EXPECT_EQ(a.theta, 500.0);
  EXPECT_EQ(b.theta, 500.0);
  float sa, sb;
  EXPECT_EQ(Rope(a).inv_freq(10, &sa), Rope(b).inv_freq(10, &sb));
}

TEST(Rope, DefaultFrequencies) {
  const RopeConfig c = read(R"({})", 8);
  float scale = 0;
  const auto f = Rope(c).inv_freq(1, &scale);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(scale, 1.0f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 8), 1e-7);
}

// Gemma4's proportional rotary: int(partial * head_dim // 2) frequencies theta^(-2i / head_dim)
// (the exponent over the whole head, not the rotated part), the rest 0, all over factor; the
// tables cover the whole head, so the dims with frequency 0 pass through (cos 1, sin 0).
TEST(Rope, ProportionalRotatesTheFirstPairsOfTheWholeHead) {
  const RopeConfig c = read(
      R"({"rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": 0.3,
                              "rope_theta": 100.0, "factor": 2.0}})",
      20);
  EXPECT_EQ(c.kind, RopeKind::Proportional);
  EXPECT_EQ(c.rot_dim, 20);
  EXPECT_EQ(c.rotated_pairs, 3);  // 0.3 * 20 // 2
  float scale = 0;
  const auto f = Rope(c).inv_freq(1, &scale);
  ASSERT_EQ(f.size(), 10u);
  EXPECT_EQ(scale, 1.0f);
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(f[i], i < 3 ? std::pow(100.0, -2.0 * i / 20) / 2 : 0.0, 1e-7) << i;
  Tensor cos, sin;
  Rope(c).tables(5, 2, &cos, &sin);
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t i = 3; i < 10; ++i) {
      EXPECT_EQ(cos.data<float>()[t * 10 + i], 1.0f);
      EXPECT_EQ(sin.data<float>()[t * 10 + i], 0.0f);
    }
  // partial_rotary_factor 0: nothing rotates, and that is no error.
  EXPECT_EQ(read(R"({"rope_parameters": {"rope_type": "proportional", "rope_theta": 100.0,
                                          "partial_rotary_factor": 0.0}})")
                .rotated_pairs,
            0);
}

TEST(Rope, DynamicGrowsBaseOnlyPastMaxPositions) {
  const Rope r(read(R"({"rope_scaling": {"rope_type": "dynamic", "factor": 2}})", 16, 16));
  float s;
  const auto base = r.inv_freq(16, &s), longer = r.inv_freq(32, &s);
  EXPECT_EQ(base, Rope(read("{}", 16, 16)).inv_freq(16, &s));
  EXPECT_LT(longer.back(), base.back());
}

// Longrope (Phi-3): short factors up to original_max_position_embeddings positions, long
// ones past it, each dividing the default frequency; the attention factor is
// sqrt(1 + ln(max / original) / ln(original)) for both.
TEST(Rope, LongRopeTakesTheLongFactorsPastTheOriginalLength) {
  const RopeConfig c = read(R"({"original_max_position_embeddings": 12, "rope_scaling": {
      "rope_type": "longrope", "short_factor": [1, 1.25, 1.5, 2], "long_factor": [1, 3, 6, 12]}})",
                            8, 64);
  const Rope r(c);
  const double short_factor[] = {1, 1.25, 1.5, 2}, long_factor[] = {1, 3, 6, 12};
  const double attention = std::sqrt(1 + std::log(64.0 / 12) / std::log(12.0));
  for (const int64_t len : {1, 12, 13, 40}) {
    float scale = 0;
    const auto f = r.inv_freq(len, &scale);
    ASSERT_EQ(f.size(), 4u);
    EXPECT_NEAR(scale, attention, 1e-6) << len;
    for (int i = 0; i < 4; ++i) {
      const double ext = len > 12 ? long_factor[i] : short_factor[i];
      const double want = 1 / (ext * std::pow(10000.0, 2.0 * i / 8));
      EXPECT_NEAR(f[i], want, 1e-6 * want) << len << " " << i;
    }
  }
}

// Ministral3's llama_4_scaling_beta: the tables are the rotary's times
// 1 + beta * log(1 + floor(pos / length)), 1 before the first `length` positions.
TEST(Rope, Llama4ScaleStepsEveryLengthPositions) {
  const RopeConfig plain = read("{}", 8);
  RopeConfig scaled = plain;
  scaled.llama_4_scaling_beta = 0.5;
  scaled.llama_4_scaling_length = 4;
  constexpr int64_t n = 13, half = 4;
  float cos[2][n * half], sin[2][n * half];
  Rope(plain).fill(0, n, cos[0], sin[0], half);
  Rope(scaled).fill(0, n, cos[1], sin[1], half);
  for (int64_t t = 0; t < n; ++t) {
    const double want = 1 + 0.5 * std::log(1.0 + static_cast<double>(t / 4));
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_NEAR(cos[1][t * half + i], cos[0][t * half + i] * want, 1e-6) << t;
      EXPECT_NEAR(sin[1][t * half + i], sin[0][t * half + i] * want, 1e-6) << t;
    }
  }
  EXPECT_EQ(cos[1][3 * half], cos[0][3 * half]);  // position 3 < length: unscaled
  EXPECT_NE(Rope(plain).hash(), Rope(scaled).hash());
}

// Llama4TextAttention's attn_temperature_tuning as a schedule that rotates nothing: cos is
// log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1 and sin 0, so that rotating the
// queries by it only scales them.
TEST(Rope, Llama4TemperatureScalesWithoutRotating) {
  RopeConfig t;
  t.kind = RopeKind::Proportional;
  t.head_dim = t.rot_dim = 6;
  t.rotated_pairs = 0;
  t.temperature_attn_scale = 0.4;
  t.temperature_floor_scale = 3;
  constexpr int64_t n = 11, half = 3, pos0 = 4;
  float cos[n * half], sin[n * half];
  Rope(t).fill(pos0, n, cos, sin, half);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t p = pos0 + r;
    const double want = std::log1p(static_cast<double>((p + 1) / 3)) * 0.4 + 1;
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_NEAR(cos[r * half + i], want, 1e-6) << p;
      EXPECT_EQ(sin[r * half + i], 0.0f) << p;
    }
  }
  RopeConfig other = t;
  other.temperature_floor_scale = 4;
  EXPECT_NE(Rope(t).hash(), Rope(other).hash());
}

TEST(Rope, Errors) {
  EXPECT_THROW(read(R"({"rope_scaling": {"rope_type": "spiral"}})"), Error);
  EXPECT_THROW(read(R"({"rope_scaling": {"rope_type": "linear"}})"), Error);  // factor missing
  EXPECT_THROW(
      read(
          R"({"rope_scaling": {"rope_type": "longrope", "long_factor": [1], "short_factor": [1]}})"),
      Error);  // needs head_dim / 2 factors
  EXPECT_THROW(read(R"({"partial_rotary_factor": 0.01})"), Error);
}

}  // namespace
}  // namespace lathe
