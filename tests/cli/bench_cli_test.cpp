// Benchmarking from the command line: generate --ignore-eos.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/tiny_checkpoint.h"
#include "support/run.h"

namespace lathe {
namespace {
using testing::run_lathe;
using testing::ScratchDir;
using Json = nlohmann::json;

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    build_tiny_checkpoint(testing::fixture_dir("qwen3_tied"), dir.path(), {});
  }
  std::string model() const { return dir.path().string(); }
  ScratchDir dir{"bench-cli"};
};

// The first greedy token is made the eos: a plain run stops on it, --ignore-eos runs on to
// --max-new-tokens, alone and in --batch.
TEST_F(BenchCli, IgnoreEosGeneratesEveryToken) {
  const std::string base = "generate " + model() + " --json --prompt-ids '[5, 6, 7]' ";
  const auto first = run_lathe(base + "--max-new-tokens 1");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  const int eos = Json::parse(first.out)["generated_ids"][0].get<int>();
  testing::write_file(dir / "generation_config.json",
                      Json{{"eos_token_id", Json::array({eos})}}.dump());

  const auto stops = run_lathe(base + "--max-new-tokens 12");
  ASSERT_EQ(stops.exit_code, 0) << stops.out;
  EXPECT_TRUE(Json::parse(stops.out)["stopped_on_eos"].get<bool>());
  EXPECT_EQ(Json::parse(stops.out)["generated_ids"], Json::array({eos}));

  const auto all = run_lathe(base + "--max-new-tokens 12 --ignore-eos");
  ASSERT_EQ(all.exit_code, 0) << all.out;
  const Json ids = Json::parse(all.out)["generated_ids"];
  EXPECT_FALSE(Json::parse(all.out)["stopped_on_eos"].get<bool>());
  ASSERT_EQ(ids.size(), 12u) << all.out;
  EXPECT_EQ(ids[0].get<int>(), eos);

  testing::write_file(dir / "batch.jsonl",
                      "{\"prompt_ids\": [5, 6, 7], \"max_new_tokens\": 12}\n"
                      "{\"prompt_ids\": [5, 6, 7], \"max_new_tokens\": 5}\n");
  const std::string batch = "generate " + model() + " --batch " + (dir / "batch.jsonl").string();
  auto lines = [](const std::string& out) {
    std::vector<Json> v;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) v.push_back(Json::parse(line));
    return v;
  };
  const auto batch_stops = run_lathe(batch);
  ASSERT_EQ(batch_stops.exit_code, 0) << batch_stops.out;
  for (const Json& r : lines(batch_stops.out)) EXPECT_EQ(r["generated_ids"].size(), 1u);
  const auto batch_all = run_lathe(batch + " --ignore-eos");
  ASSERT_EQ(batch_all.exit_code, 0) << batch_all.out;
  const auto results = lines(batch_all.out);
  ASSERT_EQ(results.size(), 2u) << batch_all.out;
  EXPECT_EQ(results[0]["generated_ids"], ids);
  ASSERT_EQ(results[1]["generated_ids"].size(), 5u);
  EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + 5, results[1]["generated_ids"].begin()));
  EXPECT_FALSE(results[1]["stopped_on_eos"].get<bool>());
}

}  // namespace
}  // namespace lathe
