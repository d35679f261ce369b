// Benchmarking from the command line: generate --ignore-eos and lathe bench. Timings are
// only checked to be positive, never against a bound.
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

TEST_F(BenchCli, JsonHasEveryFieldAsAsked) {
  // The eos is made the first greedy token after bench's prompt (ids (1 + 7919 i) mod 128):
  // bench must not stop on it.
  Json prompt = Json::array();
  for (int i = 0; i < 16; ++i) prompt.push_back((1 + 7919 * i) % 128);
  const auto first = run_lathe("generate " + model() + " --json --max-new-tokens 1 --prompt-ids '" +
                               prompt.dump() + "'");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  testing::write_file(dir / "generation_config.json",
                      Json{{"eos_token_id", Json::parse(first.out)["generated_ids"]}}.dump());
  const auto r = run_lathe("bench " + model() +
                           " --json --prompt-tokens 16 --new-tokens 8 --repeat 2 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json j = Json::parse(r.out);  // stdout and stderr both: no progress off a terminal
  EXPECT_EQ(j["prompt_tokens"], 16);
  EXPECT_EQ(j["new_tokens"], 8);
  EXPECT_EQ(j["repeat"], 2);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["architecture"], "Qwen3ForCausalLM");
  EXPECT_EQ(j["model_dir"], model());
  EXPECT_EQ(j["max_seq"], 64);
  EXPECT_FALSE(j["lathe_version"].get<std::string>().empty());
  EXPECT_FALSE(j["cpu"].get<std::string>().empty());
  for (const char* field :
       {"load_seconds", "time_to_first_token_seconds", "prefill_tokens_per_second",
        "decode_tokens_per_second", "decode_ms_per_token", "peak_resident_mib", "kv_cache_mib"}) {
    ASSERT_TRUE(j[field].is_number()) << field << ": " << r.out;
    EXPECT_GT(j[field].get<double>(), 0) << field;
  }
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const Json& run : j["runs"]) {
    EXPECT_EQ(run["generated_tokens"], 8) << r.out;
    for (const auto& [name, value] : run.items()) EXPECT_GT(value.get<double>(), 0) << name;
  }

  const auto bf16 = run_lathe("bench " + model() +
                              " --json --prompt-tokens 4 --new-tokens 2 --repeat 1 "
                              "--dtype bf16 --reference-kernels");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.out;
  EXPECT_EQ(Json::parse(bf16.out)["dtype"], "bf16");
  EXPECT_TRUE(Json::parse(bf16.out)["reference_kernels"].get<bool>());
}

// README / docs/performance.md: the KV cache holds --max-seq positions, by default
// min(max_position_embeddings, 4096), in generate as in bench.
TEST_F(BenchCli, MaxSeqDefaultsToThePositionsCappedAt4096) {
  auto max_seq = [&](const std::string& extra) {
    const auto r = run_lathe("bench " + model() +
                             " --json --prompt-tokens 4 --new-tokens 2 --repeat 1 " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const Json j = Json::parse(r.out);
    return std::pair(j["max_seq"].get<int64_t>(), j["kv_cache_mib"].get<double>());
  };
  const auto [small, small_mib] = max_seq("");
  EXPECT_EQ(small, 64);  // the fixture's max_position_embeddings
  Json cfg = Json::parse(testing::read_file(dir / "config.json"));
  for (const int64_t positions : {4095, 4096, 4097, 100000}) {
    cfg["max_position_embeddings"] = positions;
    testing::write_file(dir / "config.json", cfg.dump());
    const auto [n, mib] = max_seq("");
    EXPECT_EQ(n, std::min<int64_t>(positions, 4096)) << positions;
    EXPECT_NEAR(mib, small_mib * static_cast<double>(n) / 64, small_mib * 0.01) << positions;
  }
  // The cap is the default's only: --max-seq goes past it, and generate uses the same default.
  EXPECT_EQ(max_seq("--max-seq 5000").first, 5000);
  const auto g =
      run_lathe("generate " + model() + " --prompt-ids '[1, 2, 3]' --max-new-tokens 4094");
  EXPECT_EQ(g.exit_code, 1) << g.out;
  EXPECT_NE(g.out.find("needs 4097 positions; the KV cache holds 4096"), std::string::npos)
      << g.out;
  const auto zero = run_lathe("bench " + model() + " --max-seq 0");
  EXPECT_EQ(zero.exit_code, 2) << zero.out;
}

// --kv-dtype bf16 stores the KV cache in half the bytes (bench records it as kv_dtype); the
// other commands that run a model take it too, and refuse any other type as a usage error.
TEST_F(BenchCli, KvDtypeBf16HalvesTheCache) {
  auto bench = [&](const std::string& extra) {
    const auto r = run_lathe("bench " + model() +
                             " --json --prompt-tokens 4 --new-tokens 2 --repeat 1 " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return Json::parse(r.out);
  };
  const Json f32 = bench(""), bf16 = bench("--kv-dtype bf16"), same = bench("--kv-dtype f32");
  EXPECT_EQ(f32["kv_dtype"], "f32");
  EXPECT_EQ(same["kv_dtype"], "f32");
  EXPECT_EQ(bf16["kv_dtype"], "bf16");
  EXPECT_EQ(same["kv_cache_mib"], f32["kv_cache_mib"]);
  EXPECT_DOUBLE_EQ(2 * bf16["kv_cache_mib"].get<double>(), f32["kv_cache_mib"].get<double>());
  const auto table = run_lathe("bench " + model() +
                               " --prompt-tokens 4 --new-tokens 2 --repeat 1 --kv-dtype bf16");
  EXPECT_NE(table.out.find("positions in bf16"), std::string::npos) << table.out;

  const std::string ids = " --prompt-ids '[5, 6, 7]' --max-new-tokens 4 --json";
  const auto g = run_lathe("generate " + model() + ids + " --kv-dtype bf16");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  EXPECT_EQ(Json::parse(g.out)["generated_ids"].size(), 4u) << g.out;
  const auto logits = run_lathe("logits " + model() + " --ids '[5, 6, 7]' --kv-dtype bf16 --out " +
                                (dir / "l.safetensors").string());
  EXPECT_EQ(logits.exit_code, 0) << logits.out;
  for (const std::string& cmd :
       {"generate " + model() + ids, "logits " + model() + " --ids '[1]' --out x.safetensors",
        std::string("tiny check --fixtures /nonexistent")}) {
    const auto r = run_lathe(cmd + " --kv-dtype q8");
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("--kv-dtype must be f32 or bf16, got \"q8\""), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << cmd << "\n" << r.out;
  }
}

TEST_F(BenchCli, TableNamesEachFigure) {
  const auto r = run_lathe("bench " + model() + " --prompt-tokens 8 --new-tokens 4 --repeat 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* row : {"load", "time to first token", "prefill", "decode", "tokens/s", "ms",
                          "peak resident memory", "MiB", "Qwen3ForCausalLM"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
}

// Each mistake is one line on stderr: exit code 2 for usage, 1 for what the model decides.
TEST_F(BenchCli, BadArgumentsFailClearly) {
  auto expect = [](const std::string& args, int code, const std::string& message) {
    const auto r = run_lathe(args);
    EXPECT_EQ(r.exit_code, code) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
  };
  const std::string m = "bench " + model();
  expect("bench /nonexistent --prompt-tokens 4", 1, "/nonexistent: not a directory");
  expect(m + " --prompt-tokens many", 2, "--prompt-tokens needs an integer");
  expect(m + " --prompt-tokens 0", 2, "--prompt-tokens must be between 1");
  expect(m + " --new-tokens 1", 2, "--new-tokens must be between 2");
  expect(m + " --repeat -1", 2, "--repeat must be between 1");
  expect(m + " --threads 0", 2, "--threads must be between 1");
  expect(m + " --dtype f64", 2, "--dtype must be f32 or bf16");
  expect(m + " --kv-dtype f16", 2, "--kv-dtype must be f32 or bf16, got \"f16\"");
  expect(m + " --bogus", 2, "unknown option --bogus");
  expect("bench", 2, "expected MODEL");
  // The default 512-token prompt does not fit the tiny model's 64 positions.
  expect(m, 1, "need 544 positions; the KV cache holds 64 (raise --max-seq)");
  expect(m + " --prompt-tokens 16 --max-seq 8", 1, "the KV cache holds 8");

  const auto help = run_lathe("bench --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* field : {"--prompt-tokens", "--new-tokens", "--repeat", "--json", "--threads",
                            "time_to_first_token_seconds", "peak_resident_mib", "VmHWM"})
    EXPECT_NE(help.out.find(field), std::string::npos) << field;
}

}  // namespace
}  // namespace lathe
