// lathe lab judge: the fluency judge of sharded runs (src/lab/fluency.h), on a text, a file of
// texts, or the calibration set.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "io/json.h"
#include "lab/fluency.h"

namespace lathe {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  if (!in) fail(file.string(), ": cannot read file");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

Json score_json(const std::string& text, const FluencyScore& s) {
  return {{"text", text},       {"perplexity", s.perplexity},
          {"tokens", s.tokens}, {"distinct_trigrams", s.distinct_trigrams},
          {"fluent", s.fluent}, {"verdict", s.verdict()}};
}

// --calibrate DIR: every line of DIR/fluent.txt must be judged fluent and every line of
// DIR/garbled.txt not; prints each score and the margins of the thresholds.
int calibrate(const FluencyJudge& judge, const fs::path& dir, bool json) {
  Json out = {{"perplexity_threshold", kFluentPerplexity}, {"distinct_threshold", kFluentDistinct}};
  int wrong = 0;
  double fluent_max_ppl = 0, garbled_min_ppl = 1e300;
  for (const char* set : {"fluent", "garbled"}) {
    const bool expect = std::string(set) == "fluent";
    Json rows = Json::array();
    for (const std::string& text : lines_of(dir / cat(set, ".txt"))) {
      const FluencyScore s = judge.score(text);
      wrong += s.fluent != expect;
      if (expect) fluent_max_ppl = std::max(fluent_max_ppl, s.perplexity);
      if (!expect && s.distinct_trigrams >= kFluentDistinct)
        garbled_min_ppl = std::min(garbled_min_ppl, s.perplexity);
      rows.push_back(score_json(text, s));
      if (!json)
        std::printf("%-8s %-7s %9.1f %6.2f  %.60s\n", set, s.fluent == expect ? "right" : "WRONG",
                    s.perplexity, s.distinct_trigrams, text.c_str());
    }
    out[set] = rows;
  }
  out["wrong"] = wrong;
  out["fluent_max_perplexity"] = fluent_max_ppl;
  out["garbled_min_perplexity_of_varied_text"] = garbled_min_ppl;
  if (json)
    std::cout << out.dump(2) << "\n";
  else
    std::printf(
        "%d wrong; fluent perplexity up to %.1f, garbled text with varied 3-grams from %.1f "
        "(threshold %.0f, distinct 3-grams at least %.2f)\n",
        wrong, fluent_max_ppl, garbled_min_ppl, kFluentPerplexity, kFluentDistinct);
  return wrong ? 1 : 0;
}

}  // namespace

int lab_judge(int argc, char** argv) {
  Args args("lab judge",
            "The fluency judge of sharded runs (docs/lab.md): a small model lathe runs "
            "(SmolLM2-135M-Instruct) scores whether a text is fluent English by its perplexity "
            "and the share of distinct word 3-grams. Exit code 0 when every text is fluent (with "
            "--calibrate: when every sample is judged as labelled), 1 otherwise.",
            {"TEXT..."},
            {{"file", "FILE", "score each non-empty line of FILE"},
             {"calibrate", "DIR",
              "score DIR/fluent.txt and DIR/garbled.txt (tests/fixtures/judge) and report "
              "how the thresholds separate them"},
             {"judge-model", "DIR",
              "the judge model (default $LATHE_JUDGE_MODEL, else "
              "~/.cache/lathe/smollm2-135m-instruct)"},
             {"threads", "N", "threads (default 2)"},
             {"json", "", "print JSON"}});
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  const FluencyJudge judge(args.get_or("judge-model", default_judge_model().string()),
                           static_cast<int>(args.get_int("threads", 2, 1, 1024)));
  if (auto dir = args.get("calibrate")) return calibrate(judge, *dir, args.flag("json"));
  std::vector<std::string> texts = args.positionals();
  if (auto file = args.get("file"))
    for (std::string& line : lines_of(*file)) texts.push_back(std::move(line));
  if (texts.empty()) throw UsageError("lab judge: give a TEXT, --file FILE or --calibrate DIR");
  bool all = true;
  Json out = Json::array();
  for (const std::string& text : texts) {
    const FluencyScore s = judge.score(text);
    all = all && s.fluent;
    if (args.flag("json"))
      out.push_back(score_json(text, s));
    else
      std::cout << s.verdict() << "\n";
  }
  if (args.flag("json")) std::cout << out.dump(2) << "\n";
  return all ? 0 : 1;
}

}  // namespace lathe
