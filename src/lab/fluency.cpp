#include "lab/fluency.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/checkpoint.h"
#include "models/registry.h"
#include "tokenizer/tokenizer.h"

namespace lathe {

namespace fs = std::filesystem;

std::string FluencyScore::verdict() const {
  char figures[96];
  std::snprintf(figures, sizeof figures, "perplexity %.1f, distinct 3-grams %.2f", perplexity,
                distinct_trigrams);
  return cat(fluent ? "fluent (" : "not fluent (", figures, ")");
}

double distinct_trigrams(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.size() < 3) return 1;
  std::set<std::string> seen;
  for (size_t i = 0; i + 2 < words.size(); ++i)
    seen.insert(words[i] + ' ' + words[i + 1] + ' ' + words[i + 2]);
  return static_cast<double>(seen.size()) / static_cast<double>(words.size() - 2);
}

struct FluencyJudge::Impl {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  std::unique_ptr<ThreadPool> pool;
};

namespace {
const fs::path& checked(const fs::path& model_dir) {
  if (!fs::exists(model_dir / "config.json"))
    fail(model_dir.string(),
         ": no judge model here (config.json missing): build SmolLM2 with "
         "tools/smollm2/build_checkpoint.py, or give --judge-model DIR");
  return model_dir;
}
}  // namespace

FluencyJudge::FluencyJudge(const fs::path& model_dir, int threads)
    : impl_(new Impl{load_model(Checkpoint::open(checked(model_dir)), {.dtype = DType::F32}),
                     Tokenizer::load(model_dir),
                     std::make_unique<ThreadPool>(std::max(1, threads))}) {}

FluencyJudge::~FluencyJudge() = default;

FluencyScore FluencyJudge::score(std::string_view text) const {
  std::vector<int32_t> ids = impl_->tokenizer.encode(text, false);
  if (ids.size() > 256) ids.resize(256);
  if (ids.size() < 2) fail("the judge needs a text of at least two tokens, got ", ids.size());
  Context ctx{impl_->pool.get()};
  KVCache cache = impl_->model->new_cache(static_cast<int64_t>(ids.size()));
  const Tensor logits = impl_->model->forward(ctx, ids, cache, true);
  const int64_t vocab = logits.dim(1);
  double nll = 0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = logits.data<float>() + static_cast<int64_t>(t) * vocab;
    const float top = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
    nll -= static_cast<double>(row[ids[t + 1]]) - top - std::log(sum);
  }
  FluencyScore s;
  s.tokens = static_cast<int64_t>(ids.size()) - 1;
  s.perplexity = std::exp(nll / static_cast<double>(s.tokens));
  s.distinct_trigrams = distinct_trigrams(text);
  s.fluent = s.perplexity <= kFluentPerplexity && s.distinct_trigrams >= kFluentDistinct;
  return s;
}

fs::path default_judge_model() {
  if (const char* m = std::getenv("LATHE_JUDGE_MODEL"); m && *m) return m;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path root = cache && *cache ? fs::path(cache) : fs::path(home ? home : ".") / ".cache";
  return root / "lathe" / "smollm2-135m-instruct";
}

}  // namespace lathe
