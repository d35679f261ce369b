// The fluency judge of sharded runs (src/lab/fluency.h): its 3-gram count on hand-made texts,
// and, with the SmolLM2 checkpoint (LATHE_SMOLLM2_DIR, which tools/test.sh builds), its
// calibration set: every fluent sample judged fluent and every garbled one not, through
// `lathe lab judge --calibrate`; a text too short to score is one clear error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "core/error.h"
#include "lab/fluency.h"
#include "support/run.h"
#include "support/skip.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

TEST(Fluency, DistinctTrigramsCountLoops) {
  EXPECT_DOUBLE_EQ(distinct_trigrams("one two"), 1.0);
  EXPECT_DOUBLE_EQ(distinct_trigrams("the cat sat on the mat"), 1.0);
  // "a b c" four times: 10 trigrams, 3 distinct.
  EXPECT_DOUBLE_EQ(distinct_trigrams("a b c a b c a b c a b c"), 0.3);
  EXPECT_DOUBLE_EQ(distinct_trigrams("x x x x x"), 1.0 / 3.0);
}

std::string smollm2() {
  const char* dir = std::getenv("LATHE_SMOLLM2_DIR");
  return dir && fs::exists(fs::path(dir) / "model.safetensors") ? dir : "";
}

TEST(Fluency, CalibrationSetIsJudgedAsLabelled) {
  if (smollm2().empty())
    LATHE_SKIP_OUTSIDE_CI("the judge model: set LATHE_SMOLLM2_DIR (tools/test.sh does)");
  const testing::RunResult r =
      testing::run_lathe(cat("lab judge --judge-model ", smollm2(), " --calibrate ",
                             LATHE_SOURCE_DIR, "/tests/fixtures/judge"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\n0 wrong;"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("WRONG"), std::string::npos) << r.out;
  // 24 fluent and 24 garbled samples, each on its own line.
  const std::regex judged("(^|\n)(fluent|garbled) +right ");
  const auto right = std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), judged),
                                   std::sregex_iterator());
  EXPECT_EQ(right, 48) << r.out;
}

TEST(Fluency, ATextTooShortIsOneError) {
  if (smollm2().empty())
    LATHE_SKIP_OUTSIDE_CI("the judge model: set LATHE_SMOLLM2_DIR (tools/test.sh does)");
  const testing::SplitRunResult r =
      testing::run_lathe_split(cat("lab judge --judge-model ", smollm2(), " Hi"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("at least two tokens"), std::string::npos) << r.err;
  const testing::SplitRunResult none =
      testing::run_lathe_split("lab judge --judge-model /nonexistent 'Some text here.'");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("/nonexistent: no judge model here"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace lathe
