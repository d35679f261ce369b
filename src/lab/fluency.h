// The fluency judge of sharded runs (issue 17; docs/lab.md, "The fluency judge"). The
// reference protocol judges a sharded run by whether its text is fluent English; lathe does
// that with a small model it runs itself (SmolLM2-135M-Instruct by default), beside the
// numeric comparison with transformers.
//
// A text's score: its perplexity under the judge model (exp of the mean negative
// log-likelihood of each token given the ones before it), and the share of its word 3-grams
// that are distinct (a decode stuck in a loop is easy to predict, so perplexity alone would
// call it fluent). Fluent: perplexity at most kFluentPerplexity and distinct 3-grams at least
// kFluentDistinct, thresholds calibrated on tests/fixtures/judge (`lathe lab judge
// --calibrate`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace lathe {

// Calibrated on tests/fixtures/judge with SmolLM2-135M-Instruct (f32): docs/lab.md gives the
// figures.
inline constexpr double kFluentPerplexity = 190;
inline constexpr double kFluentDistinct = 0.5;

struct FluencyScore {
  double perplexity = 0;
  double distinct_trigrams = 1;  // distinct word 3-grams / word 3-grams (1 under 3 words)
  int64_t tokens = 0;            // the judge model's tokens scored (the first is given)
  bool fluent = false;
  // "fluent (perplexity 21.4, distinct 3-grams 1.00)" or "not fluent (...)".
  std::string verdict() const;
};

// The share of distinct word 3-grams (words split at whitespace).
double distinct_trigrams(std::string_view text);

class FluencyJudge {
 public:
  // Loads the judge model (a checkpoint folder with tokenizer.json) in f32.
  explicit FluencyJudge(const std::filesystem::path& model_dir, int threads = 1);
  ~FluencyJudge();
  // Scores the first 256 of the text's tokens. Throws lathe::Error for a text of fewer than
  // two tokens.
  FluencyScore score(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The default judge model: $LATHE_JUDGE_MODEL, else the SmolLM2 checkpoint tools/smollm2
// builds (~/.cache/lathe/smollm2-135m-instruct).
std::filesystem::path default_judge_model();

}  // namespace lathe
