// The oracle itself, on inputs with known answers: every golden test and lab row is judged
// by these functions, so they must be able to say "different".
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "lab/compare.h"
#include "lab/protocol.h"

namespace lathe {
namespace {

Tensor rows_of(int64_t rows, int64_t cols, std::vector<float> v) {
  Tensor t = Tensor::zeros(DType::F32, {rows, cols});
  std::copy(v.begin(), v.end(), t.mut<float>());
  return t;
}

TEST(Oracle, NmseKnownAnswers) {
  const std::vector<float> ref = {1, 2}, same = {1, 2}, doubled = {2, 4}, zeros = {0, 0};
  EXPECT_EQ(nmse(same, ref), 0.0);
  EXPECT_DOUBLE_EQ(nmse(doubled, ref), 1.0);  // (1 + 4) / (1 + 4)
  EXPECT_DOUBLE_EQ(nmse(zeros, ref), 1.0);
  EXPECT_EQ(nmse(zeros, zeros), 0.0);
  EXPECT_TRUE(std::isinf(nmse(ref, zeros)));
  const std::vector<float> nan = {1, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(nmse(nan, ref)));
  EXPECT_THROW(nmse(std::vector<float>{1}, ref), Error);
  EXPECT_DOUBLE_EQ(max_abs_error(doubled, ref), 2.0);
  EXPECT_TRUE(std::isnan(max_abs_error(nan, ref)));
}

TEST(Oracle, CompareLogitsFindsTheFirstDisagreeingRow) {
  // Row 0 agrees (argmax 2), row 1 disagrees (1 vs 0), row 2 agrees (argmax 0).
  const Tensor ref = rows_of(3, 3, {0, 1, 5, 3, 1, 0, 9, 1, 1});
  const Tensor act = rows_of(3, 3, {0, 1, 5, 1, 3, 0, 9, 1, 1.5f});
  const LogitComparison c = compare_logits(act, ref);
  EXPECT_EQ(c.rows, 3);
  ASSERT_TRUE(c.first_top1_mismatch);
  EXPECT_EQ(*c.first_top1_mismatch, 1);
  EXPECT_DOUBLE_EQ(c.top1_agreement, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 2.0);
  EXPECT_GT(c.nmse, 0.0);
  const LogitComparison exact = compare_logits(ref, ref);
  EXPECT_EQ(exact.nmse, 0.0);
  EXPECT_EQ(exact.top1_agreement, 1.0);
  EXPECT_FALSE(exact.first_top1_mismatch);
  // NaN logits are an error figure, not a perfect match.
  Tensor bad = ref.clone();
  bad.mut<float>()[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(compare_logits(bad, ref).max_abs_error));
  EXPECT_THROW(compare_logits(rows_of(1, 3, {1, 2, 3}), ref), Error);
}

TEST(Oracle, FirstRowPastJudgesEachRowAlone) {
  // Row 0 exact, row 1 off by 1e-3 of its scale (NMSE 1e-6 on its own, less overall).
  const Tensor ref = rows_of(3, 2, {1, 0, 1, 0, 1, 0});
  const Tensor act = rows_of(3, 2, {1, 0, 1.001f, 0, 1, 0});
  EXPECT_EQ(first_row_past(act, ref, 1e-7), 1);
  EXPECT_FALSE(first_row_past(act, ref, 1e-5));
  EXPECT_FALSE(first_row_past(ref, ref, 0));
  Tensor nan = ref.clone();
  nan.mut<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(first_row_past(nan, ref, 1), 2);
  EXPECT_THROW(first_row_past(rows_of(1, 2, {1, 0}), ref, 1), Error);
}

TEST(Oracle, FirstTokenMismatch) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 9, 4}, prefix = {1, 2};
  EXPECT_FALSE(first_token_mismatch(a, a));
  EXPECT_EQ(first_token_mismatch(a, b), 2);
  EXPECT_EQ(first_token_mismatch(a, prefix), 2);
  EXPECT_EQ(first_token_mismatch(prefix, a), 2);
  EXPECT_EQ(first_token_mismatch({}, a), 0);
}

TEST(Oracle, CompareLayersNamesTheFirstDivergingOneAndRefusesGaps) {
  const Tensor base = rows_of(1, 2, {1, 2});
  const Tensor off = rows_of(1, 2, {1, 2.1f});
  const Tensor way_off = rows_of(1, 2, {5, 2});
  const std::vector<std::pair<std::string, Tensor>> reference = {
      {"embed", base}, {"layer.0.attn_out", base}, {"layer.0.out", base}, {"final_norm", base}};
  // Lathe traces more than the reference (and in another order): extra names are fine.
  std::vector<std::pair<std::string, Tensor>> actual = {{"layer.0.q", way_off},
                                                        {"embed", base},
                                                        {"layer.0.out", way_off},
                                                        {"layer.0.attn_out", off},
                                                        {"final_norm", way_off}};
  LayerReport r = compare_layers(actual, reference, 1e-2);
  ASSERT_EQ(r.layers.size(), 4u);
  EXPECT_EQ(r.layers[1].name, "layer.0.attn_out");
  EXPECT_NEAR(r.layers[1].nmse, 0.01 / 5.0, 1e-7);
  ASSERT_TRUE(r.first_diverging);
  EXPECT_EQ(*r.first_diverging, "layer.0.out");  // attn_out's 2e-3 is within 1e-2
  r = compare_layers(actual, reference, 1e-3);
  EXPECT_EQ(*r.first_diverging, "layer.0.attn_out");
  // NaN diverges.
  actual[1].second = rows_of(1, 2, {std::numeric_limits<float>::quiet_NaN(), 2});
  EXPECT_EQ(*compare_layers(actual, reference, 1.0).first_diverging, "embed");
  // A reference layer lathe did not trace is an error naming it, never a skip.
  actual.erase(actual.begin() + 3);
  try {
    compare_layers(actual, reference, 1e-2);
    FAIL() << "a missing layer was skipped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.0.attn_out"), std::string::npos) << e.what();
  }
  actual.push_back({"layer.0.attn_out", rows_of(1, 3, {1, 2, 3})});
  EXPECT_THROW(compare_layers(actual, reference, 1e-2), Error);
}

// The judge turns the figures into pass or fail.
TEST(Oracle, JudgeFailsWhatItShould) {
  Reference ref;
  ref.greedy_margins = {1.0, 0.01, 1.0};
  auto row = [] {
    LabRow r;
    r.generated_tokens = {1, 2, 3};
    r.logits_nmse = 1e-12;
    r.top1_agreement = 1.0;
    return r;
  };
  LabRow good = row();
  judge(good, ref, true);
  EXPECT_EQ(good.status, "pass");
  LabRow nan = row();
  nan.logits_nmse = std::numeric_limits<double>::quiet_NaN();
  judge(nan, ref, true);
  EXPECT_EQ(nan.status, "fail") << "NaN logits passed";
  LabRow loose = row();
  loose.logits_nmse = 2 * kF32Nmse;
  judge(loose, ref, true);
  EXPECT_EQ(loose.status, "fail");
  LabRow argmax = row();
  argmax.top1_agreement = 23.0 / 24.0;
  EXPECT_NE(judge(argmax, ref, true).find("top-1 agreement"), std::string::npos);
  EXPECT_EQ(argmax.status, "fail");
  // Decode steps: an NMSE past the tolerance, or one step past it in f32.
  LabRow decode = row();
  decode.decode_logits_nmse = 1e-12;
  judge(decode, ref, true);
  EXPECT_EQ(decode.status, "pass");
  decode.decode_logits_nmse = 2 * kF32Nmse;
  EXPECT_NE(judge(decode, ref, true).find("decode logit NMSE"), std::string::npos);
  EXPECT_EQ(decode.status, "fail");
  decode.decode_logits_nmse = 1e-12;
  decode.decode_first_diverging_step = 3;
  EXPECT_NE(judge(decode, ref, true).find("decode step 3"), std::string::npos);
  EXPECT_EQ(decode.status, "fail");
  LabRow layer = row();
  layer.first_diverging_layer = "layer.1.mlp_out";
  EXPECT_NE(judge(layer, ref, true).find("layer.1.mlp_out"), std::string::npos);
  EXPECT_EQ(layer.status, "fail");
  // Tokens that part: a failure, except in bf16 after a reference near-tie.
  LabRow parted = row();
  parted.first_mismatch = 1;
  judge(parted, ref, true);
  EXPECT_EQ(parted.status, "fail");
  judge(parted, ref, false);
  EXPECT_EQ(parted.status, "pass");
  parted.first_mismatch = 2;
  judge(parted, ref, false);
  EXPECT_EQ(parted.status, "fail");
}

}  // namespace
}  // namespace lathe
