#include "tokenizer/fixtures.h"

#include <fstream>
#include <stdexcept>

#include "io/json.h"

namespace lathe::test {

namespace fs = std::filesystem;

fs::path fixtures_dir() {
  return fs::path(LATHE_SOURCE_DIR) / "tests/fixtures/tokenizers";
}

namespace {

std::vector<Json> read_jsonl(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(Json::parse(line));
  return out;
}

}  // namespace

std::vector<std::string> read_corpus() {
  std::vector<std::string> out;
  for (const auto& j : read_jsonl(fixtures_dir() / "corpus.jsonl"))
    out.push_back(j["text"].get<std::string>());
  return out;
}

std::vector<GoldenLine> read_goldens(const Fixture& f, const std::vector<std::string>& corpus) {
  std::vector<GoldenLine> out;
  for (const auto& j : read_jsonl(f.goldens)) {
    GoldenLine g;
    if (j.contains("decode")) {
      g.is_decode = true;
      g.ids_special = j["decode"].get<std::vector<int32_t>>();
    } else {
      g.input = corpus.at(j["i"].get<size_t>());
      g.ids = j["ids"].get<std::vector<int32_t>>();
      g.ids_special = j["ids_special"].get<std::vector<int32_t>>();
    }
    g.text = j["text"].get<std::string>();
    g.text_skip = j["text_skip"].get<std::string>();
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<Fixture> all_fixtures() {
  const Json meta = read_json_file(fixtures_dir() / "meta.json");
  std::vector<Fixture> out;
  for (const auto& [name, info] : meta["fixtures"].items())
    out.push_back({name, fixtures_dir() / name, fixtures_dir() / name / "goldens.jsonl",
                   info["vocab_size"].get<int64_t>()});
  for (const char* name : {"qwen3", "spm-bpe-32k", "gpt-oss"}) {
    const fs::path dir = fs::path(LATHE_SHARED_DIR) / "data/tokenizers" / name;
    Fixture f{std::string("real-") + name, fs::exists(dir / "tokenizer.json") ? dir : fs::path(),
              fixtures_dir() / (std::string("real-") + name) / "goldens.jsonl", -1};
    if (meta["real"].contains(name)) f.vocab_size = meta["real"][name]["vocab_size"].get<int64_t>();
    out.push_back(f);
  }
  return out;
}

}  // namespace lathe::test
