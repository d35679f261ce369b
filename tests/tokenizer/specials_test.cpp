// Which special tokens encode(text, add_special_tokens=true) adds, per tokenizer and
// tokenizer_config.json variant, against transformers 5.x's AutoTokenizer
// (tests/fixtures/tokenizers/specials.json, tools/tokenizer_goldens/special_goldens.py).
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "io/json.h"
#include "support/skip.h"
#include "tokenizer/fixtures.h"
#include "tokenizer/tokenizer.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

TEST(Specials, AddedTokensMatchTransformers5) {
  const Json gold = read_json_file(test::fixtures_dir() / "specials.json");
  std::map<std::string, fs::path> dirs;
  for (const auto& f : test::all_fixtures()) dirs[f.name] = f.tokenizer_dir;
  const fs::path tmp = fs::path(::testing::TempDir()) / "lathe-specials";
  fs::create_directories(tmp);
  size_t checked = 0, missing = 0;
  for (const Json& c : gold["cases"]) {
    const std::string name = c["tokenizer"].get<std::string>();
    const std::string label =
        name + " / " + c["variant"].get<std::string>() + " (" + c["class"].get<std::string>() + ")";
    const fs::path dir = dirs.at(name);
    if (dir.empty()) {
      ++missing;
      continue;
    }
    fs::path config = dir / "tokenizer_config.json";
    if (c.contains("config")) {
      config = tmp / "tokenizer_config.json";
      std::ofstream(config) << c["config"].dump();
    }
    const Tokenizer tok = Tokenizer::load_files(dir / "tokenizer.json", config);
    const auto prefix = c["prefix"].get<std::vector<int32_t>>();
    const auto suffix = c["suffix"].get<std::vector<int32_t>>();
    for (const Json& text : gold["texts"]) {
      std::vector<int32_t> want = prefix;
      const auto plain = tok.encode(text.get<std::string>(), false);
      want.insert(want.end(), plain.begin(), plain.end());
      want.insert(want.end(), suffix.begin(), suffix.end());
      EXPECT_EQ(tok.encode(text.get<std::string>(), true), want) << label;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100u);
  if (missing)
    LATHE_SKIP_OUTSIDE_CI(missing << " cases need tokenizers from " << LATHE_SHARED_DIR
                                  << "/data/tokenizers (a clone without ../shared)");
}

}  // namespace
}  // namespace lathe
