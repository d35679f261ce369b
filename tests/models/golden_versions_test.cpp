// Stale goldens: every golden names the transformers and torch that made it (the tiny
// fixtures' goldens.json `made_by`, the SmolLM2 goldens' `versions`). With a reference Python
// (LATHE_REFERENCE_PYTHON, the interpreter with torch and transformers that makes goldens),
// each must name that reference's versions, so a reference that moved on is noticed before
// its goldens are trusted. Without one the check is skipped and says so; the comparison itself
// is tested on versions known to be wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/json.h"
#include "support/run.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

struct Versions {
  std::string transformers, torch;
};

// torch's local version tag (+cpu, +cu132) names the wheel's build, not the code: it is left
// out of the comparison.
std::string release(const std::string& version) {
  return version.substr(0, version.find('+'));
}

// Every golden file and the versions it records.
std::map<std::string, Versions> recorded_versions() {
  const fs::path root = fs::path(LATHE_SOURCE_DIR) / "tests/fixtures";
  std::map<std::string, Versions> out;
  for (const auto& e : fs::directory_iterator(root / "tiny")) {
    const fs::path path = e.path() / "goldens.json";
    if (!fs::exists(path)) continue;
    const Json g = read_json_file(path);
    JsonFields made(g.at("made_by"), path.string() + " made_by");
    out[path.string()] = {made.get<std::string>("transformers"), made.get<std::string>("torch")};
  }
  const fs::path smol = root / "smollm2/goldens.json";
  const Json g = read_json_file(smol);
  JsonFields v(g.at("versions"), smol.string() + " versions");
  out[smol.string()] = {v.get<std::string>("transformers"), v.get<std::string>("torch")};
  return out;
}

// One line per golden whose versions differ from `expected`, which `whose` names.
std::vector<std::string> stale_goldens(const std::map<std::string, Versions>& goldens,
                                       const Versions& expected, const std::string& whose) {
  std::vector<std::string> stale;
  for (const auto& [path, v] : goldens)
    if (v.transformers != expected.transformers || release(v.torch) != release(expected.torch))
      stale.push_back(path + ": made by transformers " + v.transformers + ", torch " + v.torch +
                      "; " + whose + " transformers " + expected.transformers + ", torch " +
                      expected.torch);
  return stale;
}

TEST(GoldenVersions, EveryGoldenNamesOneReference) {
  const auto goldens = recorded_versions();
  ASSERT_GE(goldens.size(), 61u);
  // All goldens were made by one reference: a mix means some were not remade with the rest.
  std::map<std::pair<std::string, std::string>, int> count;
  for (const auto& [path, v] : goldens) ++count[{v.transformers, release(v.torch)}];
  const auto most = std::max_element(
      count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  const Versions common{most->first.first, most->first.second};
  EXPECT_FALSE(common.transformers.empty());
  EXPECT_FALSE(common.torch.empty());
  for (const std::string& line : stale_goldens(goldens, common, "most goldens name"))
    ADD_FAILURE() << line;
}

// The comparison on known inputs.
TEST(GoldenVersions, AnotherVersionIsStale) {
  const std::map<std::string, Versions> goldens = {{"a/goldens.json", {"5.24.0", "2.15.0+cu132"}},
                                                   {"b/goldens.json", {"5.24.0", "2.15.0"}}};
  EXPECT_TRUE(stale_goldens(goldens, {"5.24.0", "2.15.0+cu132"}, "the reference has").empty());
  EXPECT_TRUE(stale_goldens(goldens, {"5.24.0", "2.15.0+cpu"}, "the reference has").empty());
  EXPECT_EQ(stale_goldens(goldens, {"5.24.1", "2.15.0"}, "the reference has").size(), 2u);
  const auto stale = stale_goldens(goldens, {"5.24.0", "2.16.0"}, "the reference has");
  ASSERT_EQ(stale.size(), 2u);
  EXPECT_EQ(stale[0],
            "a/goldens.json: made by transformers 5.24.0, torch 2.15.0+cu132; the reference has "
            "transformers 5.24.0, torch 2.16.0");
}

TEST(GoldenVersions, MatchTheReference) {
  const char* python = std::getenv("LATHE_REFERENCE_PYTHON");
  if (!python || !*python)
    GTEST_SKIP() << "not run: set LATHE_REFERENCE_PYTHON to the Python with torch and "
                    "transformers that makes the goldens to compare their versions with it";
  const auto run =
      testing::run_shell(std::string("'") + python +
                         "' -c 'import transformers, torch; print(transformers.__version__); "
                         "print(torch.__version__)' 2>&1");
  ASSERT_EQ(run.exit_code, 0) << "LATHE_REFERENCE_PYTHON=" << python
                              << " cannot import torch and transformers:\n"
                              << run.out;
  Versions reference;
  const size_t nl = run.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << run.out;
  reference.transformers = run.out.substr(0, nl);
  reference.torch = run.out.substr(nl + 1);
  reference.torch.erase(reference.torch.find_last_not_of("\r\n") + 1);
  for (const std::string& line : stale_goldens(recorded_versions(), reference, "the reference has"))
    ADD_FAILURE() << line << " (remake them: tools/reference/make_tiny.py, "
                  << "tools/smollm2/make_goldens.py)";
}

}  // namespace
}  // namespace lathe
