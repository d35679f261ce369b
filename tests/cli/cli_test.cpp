// The command line: help, usage errors (exit 2), and each command's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/version.h"
#include "io/safetensors.h"
#include "io/tiny_checkpoint.h"
#include "support/run.h"

namespace lathe {
namespace {
using testing::run_lathe;
using testing::ScratchDir;
using Json = nlohmann::json;

TEST(Cli, HelpAndUsageErrors) {
  EXPECT_EQ(run_lathe("--help").exit_code, 0);
  auto r = run_lathe("generate --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--prompt-ids"), std::string::npos);
  EXPECT_EQ(run_lathe("").exit_code, 2);
  EXPECT_EQ(run_lathe("frobnicate").exit_code, 2);
  r = run_lathe("generate /nonexistent --bogus-flag");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown option --bogus-flag"), std::string::npos) << r.out;
  EXPECT_EQ(run_lathe("generate /x --prompt-ids '[1]' --threads zero").exit_code, 2);
  r = run_lathe("generate /nonexistent --prompt-ids '[1]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("/nonexistent: not a directory"), std::string::npos) << r.out;
}

// A catalog names every model a sweep runs; --model and --fixtures were silently dropped
// beside it (with an empty catalog: nothing ran, exit 0). Issue 47, item 10.
TEST(Cli, LabRunRefusesCatalogWithModelOrFixtures) {
  ScratchDir dir("catalog-and-model");
  testing::write_file(dir / "empty.json", R"({"format": 1, "models": []})");
  std::filesystem::create_directories(dir / "m");
  const std::string base = "lab run --quiet --catalog " + (dir / "empty.json").string() +
                           " --out " + (dir / "out").string();
  for (const std::string& option :
       {"--model " + (dir / "m").string(), "--fixtures " + testing::fixture_dir("qwen3_tied")}) {
    const auto r = testing::run_lathe_split(base + " " + option);
    EXPECT_EQ(r.exit_code, 2) << option << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(option.substr(0, option.find(' '))), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--catalog"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "out")) << option;
  }
}

// Every command and subcommand answers --help (and `lathe help ...`) with exit code 0 and
// its full help, no line longer than 100 columns; usage lines say which arguments are optional.
TEST(Cli, EveryHelpExitsZeroWithFullHelpWrapped) {
  const std::vector<std::string> commands = {"",
                                             "generate",
                                             "logits",
                                             "bench",
                                             "inspect",
                                             "tokenize",
                                             "detokenize",
                                             "chat-template",
                                             "architectures",
                                             "tiny",
                                             "tiny build",
                                             "tiny check",
                                             "lab",
                                             "lab run",
                                             "lab report",
                                             "lab diff",
                                             "lab merge",
                                             "lab catalog",
                                             "lab catalog refresh",
                                             "lab serve",
                                             "pull"};
  for (const auto& c : commands) {
    const auto r = testing::run_lathe_split(c + (c.empty() ? "" : " ") + "--help");
    EXPECT_EQ(r.exit_code, 0) << c << ": " << r.out << r.err;
    EXPECT_EQ(r.err, "") << c;
    EXPECT_EQ(r.out.rfind("usage: lathe " + (c.empty() ? "COMMAND" : c), 0), 0u) << c << r.out;
    EXPECT_GT(std::count(r.out.begin(), r.out.end(), '\n'), 4) << c << ": not the full help";
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      EXPECT_LE(line.size(), 100u) << c << ": " << line;
    if (!c.empty()) {
      const auto h = testing::run_lathe_split("help " + c);
      EXPECT_EQ(h.exit_code, 0) << c;
      EXPECT_EQ(h.out, r.out) << "lathe help " << c << " differs from " << c << " --help";
    }
  }
  EXPECT_NE(run_lathe("--help").out.find("serve"), std::string::npos);
  EXPECT_NE(run_lathe("lab report --help").out.find("usage: lathe lab report [PATH ...] "),
            std::string::npos);
  EXPECT_NE(run_lathe("lab merge --help").out.find("usage: lathe lab merge OUT IN [IN ...] "),
            std::string::npos);
  // Without a subcommand: a usage error, with the help on stderr.
  for (const char* c : {"tiny", "lab", "lab catalog"}) {
    const auto r = testing::run_lathe_split(c);
    EXPECT_EQ(r.exit_code, 2) << c;
    EXPECT_NE(r.err.find("usage: lathe"), std::string::npos) << c << r.err;
  }
  EXPECT_EQ(run_lathe("help frobnicate").exit_code, 2);
}

TEST(Cli, VersionPrintsTheVersionAndCommit) {
  const auto r = testing::run_lathe_split("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(std::string("lathe ") + kLatheVersion + " (commit ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

// Apache Arrow, libcurl and Open MPI are loaded when first needed (docs/architecture.md,
// "Plug-ins"): the binary links none of them, a command that needs none runs without them, and
// one that needs one gets one error naming it when it cannot be loaded.
TEST(Cli, ArrowCurlAndMpiAreLoadedOnlyWhenNeeded) {
  const testing::RunResult ldd = testing::run_shell(std::string("ldd ") + LATHE_BINARY);
  ASSERT_EQ(ldd.exit_code, 0) << ldd.out;
  for (const char* lib : {"libarrow", "libparquet", "libcurl", "libmpi"})
    EXPECT_EQ(ldd.out.find(lib), std::string::npos) << lib << " is linked: " << ldd.out;

  testing::ScratchDir dir("plugin");
  testing::write_file(dir / "liblathe_dataset.so", "not a shared library\n");
  testing::write_file(dir / "libcurl.so.4", "not a shared library\n");
  testing::write_file(dir / "liblathe_mpi.so", "not a shared library\n");
  testing::write_file(dir / "rows.parquet", "PAR1");
  // The plug-ins from LATHE_PLUGIN_DIR; libcurl.so.4 from LD_LIBRARY_PATH.
  const std::string env =
      "env LATHE_PLUGIN_DIR=" + dir.path().string() + " LD_LIBRARY_PATH=" + dir.path().string();
  EXPECT_EQ(testing::run_lathe_split_env(env, "--help").exit_code, 0);
  const std::vector<std::pair<std::string, std::string>> failing = {
      {"lab report " + (dir / "rows.parquet").string(),
       "liblathe_dataset.so: cannot load the Parquet plug-in"},
      {"pull org/model --endpoint http://127.0.0.1:9 --cache " + (dir / "hub").string(),
       "cannot load libcurl.so.4"},
      {"generate " + std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/tiny/llama_tied_gqa" +
           " --prompt-ids '[1, 2]' --max-new-tokens 2 --tp 2",
       "liblathe_mpi.so: cannot load the MPI plug-in"},
  };
  for (const auto& [args, says] : failing) {
    const auto r = testing::run_lathe_split_env(env, args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.out << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << args << ": " << r.err;
  }
}

// The support table is generated from the registry: regenerate with
// `build/lathe architectures --markdown > docs/architectures.md`.
TEST(Cli, ArchitecturesDocIsTheRegistry) {
  const auto r = run_lathe("architectures --markdown");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, testing::read_file(std::string(LATHE_SOURCE_DIR) + "/docs/architectures.md"))
      << "docs/architectures.md is stale: regenerate it with lathe architectures --markdown";
  const auto plain = run_lathe("architectures");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_NE(plain.out.find("LlamaForCausalLM\tllama"), std::string::npos) << plain.out;
}

class CliModel : public ::testing::Test {
 protected:
  void SetUp() override {
    build_tiny_checkpoint(testing::fixture_dir("qwen3_tied"), dir.path(), {});
  }
  ScratchDir dir{"cli"};
};

// --batch: one JSON result per input line, in order, each what a separate run prints.
TEST_F(CliModel, GenerateBatchMatchesSeparateRuns) {
  const std::vector<std::pair<std::string, int>> lines = {
      {"[3, 14, 15, 92, 65]", 7}, {"[2]", 12}, {"[27, 18, 28, 18, 28, 45, 90, 45]", 3}};
  std::string batch;
  for (const auto& [ids, n] : lines)
    batch += "{\"prompt_ids\": " + ids + ", \"max_new_tokens\": " + std::to_string(n) + "}\n";
  batch += "\n";  // blank lines are skipped
  testing::write_file(dir / "batch.jsonl", batch);
  const auto r =
      run_lathe("generate " + dir.path().string() + " --batch " + (dir / "batch.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::istringstream out(r.out);
  std::string line;
  for (const auto& [ids, n] : lines) {
    ASSERT_TRUE(std::getline(out, line)) << r.out;
    const Json got = Json::parse(line);
    const auto alone = run_lathe("generate " + dir.path().string() + " --json --prompt-ids '" +
                                 ids + "' --max-new-tokens " + std::to_string(n));
    ASSERT_EQ(alone.exit_code, 0) << alone.out;
    const Json want = Json::parse(alone.out);
    EXPECT_EQ(got["prompt_ids"], want["prompt_ids"]);
    EXPECT_EQ(got["generated_ids"], want["generated_ids"]) << ids;
    EXPECT_EQ(got["stopped_on_eos"], want["stopped_on_eos"]);
    if (!got["stopped_on_eos"]) {
      EXPECT_EQ(got["generated_ids"].size(), static_cast<size_t>(n));
    }
  }
  EXPECT_FALSE(std::getline(out, line)) << "one line per request";

  testing::write_file(dir / "bad.jsonl", "{\"prompt_ids\": [1]}\n{\"prompt_ids\": \"x\"}\n");
  const auto bad =
      run_lathe("generate " + dir.path().string() + " --batch " + (dir / "bad.jsonl").string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("bad.jsonl:2"), std::string::npos) << bad.out;
  testing::write_file(dir / "none.jsonl", "{\"max_new_tokens\": 3}\n");
  const auto none =
      run_lathe("generate " + dir.path().string() + " --batch " + (dir / "none.jsonl").string());
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("none.jsonl:1: give one of"), std::string::npos) << none.out;
  EXPECT_EQ(
      run_lathe("generate " + dir.path().string() + " --batch x --prompt-ids '[1]'").exit_code, 2);
}

// The graph hash is stable across processes and tells step shapes apart.
TEST_F(CliModel, InspectGraphHashIsStableAcrossRuns) {
  auto hash = [&](int tokens) {
    const auto r =
        run_lathe("inspect " + dir.path().string() + " --json --graph " + std::to_string(tokens));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const Json j = Json::parse(r.out);
    EXPECT_GT(j["graph"]["nodes"].get<int>(), 10);
    EXPECT_LT(j["graph"]["arena_bytes"].get<int64_t>(),
              j["graph"]["unplanned_bytes"].get<int64_t>());
    return j["graph"]["hash"].get<std::string>();
  };
  const std::string five = hash(5);
  EXPECT_EQ(five.size(), 16u);
  EXPECT_EQ(five, hash(5));
  EXPECT_NE(five, hash(6));
  const auto dump = run_lathe("inspect " + dir.path().string() + " --graph 3");
  ASSERT_EQ(dump.exit_code, 0) << dump.out;
  EXPECT_NE(dump.out.find("layer.0.attn_out"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("= attention("), std::string::npos) << dump.out;
}

TEST_F(CliModel, GenerateJsonMatchesGoldenTokens) {
  const Json golden =
      Json::parse(testing::read_file(testing::fixture_dir("qwen3_tied") + "/goldens.json"));
  const auto r = run_lathe("generate " + dir.path().string() + " --json --prompt-ids '" +
                           golden["prompt_ids"].dump() + "' --max-new-tokens 32");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json out = Json::parse(r.out);
  EXPECT_EQ(out["generated_ids"], golden["greedy_tokens"]);
  EXPECT_EQ(out["prompt_ids"], golden["prompt_ids"]);
  EXPECT_GT(out["timings"]["decode_tokens_per_second"].get<double>(), 0);
}

TEST_F(CliModel, GenerateRejectsIdsOutsideVocabulary) {
  const auto r = run_lathe("generate " + dir.path().string() + " --prompt-ids '[1, 9999]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("token id 9999 is outside the vocabulary of 128"), std::string::npos)
      << r.out;
}

TEST_F(CliModel, GenerateNeedsRoomInTheCache) {
  const auto r = run_lathe("generate " + dir.path().string() +
                           " --prompt-ids '[1, 2, 3]' --max-new-tokens 10 --max-seq 8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("raise --max-seq"), std::string::npos) << r.out;
}

TEST_F(CliModel, SamplingIsSeededAndStopsOnEos) {
  const std::string base = "generate " + dir.path().string() +
                           " --json --prompt-ids '[5, 6, 7]' --max-new-tokens 20 --sample "
                           "--temperature 2 --top-k 50 --top-p 0.95 --min-p 0.01 ";
  const auto a = run_lathe(base + "--seed 7"), b = run_lathe(base + "--seed 7");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(Json::parse(a.out)["generated_ids"], Json::parse(b.out)["generated_ids"]);
  // Over several seeds the sampler must produce more than one distinct sequence.
  std::set<std::string> seen;
  for (int seed = 0; seed < 6; ++seed)
    seen.insert(Json::parse(run_lathe(base + "--seed " + std::to_string(seed)).out)["generated_ids"]
                    .dump());
  EXPECT_GT(seen.size(), 1u);
  for (const auto& s : seen) {
    const Json ids = Json::parse(s);
    // eos (2) ends generation: it can only appear last.
    for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_NE(ids[i].get<int>(), 2);
  }
}

TEST_F(CliModel, LogitsWritesEveryPositionAndHiddenStates) {
  const auto out = (dir / "logits.safetensors").string();
  const auto r = run_lathe("logits " + dir.path().string() + " --ids '[3, 1, 4, 1, 5]' --out " +
                           out + " --hidden-states");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto f = SafetensorsFile::open(out);
  EXPECT_EQ(f.entries().at("logits").shape, (Shape{5, 128}));
  EXPECT_EQ(f.entries().at("hidden.layer.1.out").shape, (Shape{5, 64}));
  EXPECT_TRUE(f.contains("hidden.embed"));
}

// The values, not only the shapes: teacher-forced over the fixture's own ids, the logits and
// every named state `lathe logits` writes must be what transformers computed for the
// fixture (tests/fixtures/tiny/qwen3_tied/goldens.safetensors), within the f32 tolerance.
TEST_F(CliModel, LogitsAreTransformersLogits) {
  const std::string fixture = testing::fixture_dir("qwen3_tied");
  const Json golden = Json::parse(testing::read_file(fixture + "/goldens.json"));
  const auto out = (dir / "values.safetensors").string();
  const auto r =
      run_lathe("logits " + dir.path().string() + " --ids '" + golden["teacher_forced_ids"].dump() +
                "' --out " + out + " --hidden-states");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto got = SafetensorsFile::open(out);
  const auto want = SafetensorsFile::open(fixture + "/goldens.safetensors");
  // NMSE = sum (a - b)^2 / sum b^2 with b the reference (docs/testing.md).
  const auto nmse = [](const float* a, const float* b, int64_t n) {
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      ref += double(b[i]) * b[i];
    }
    return err / ref;
  };
  const Tensor logits = got.tensor("logits"), ref_logits = want.tensor("logits").to(DType::F32);
  ASSERT_EQ(logits.shape(), ref_logits.shape());
  EXPECT_LE(nmse(logits.data<float>(), ref_logits.data<float>(), logits.numel()), 1e-9);
  const int64_t vocab = logits.dim(1);
  for (int64_t row = 0; row < logits.dim(0); ++row) {
    const float* a = logits.data<float>() + row * vocab;
    const float* b = ref_logits.data<float>() + row * vocab;
    EXPECT_EQ(std::max_element(a, a + vocab) - a, std::max_element(b, b + vocab) - b) << row;
  }
  const Tensor states = want.tensor("hidden_states");
  const int64_t per_state = states.numel() / states.dim(0);
  ASSERT_EQ(golden["hidden_state_names"].size(), static_cast<size_t>(states.dim(0)));
  for (size_t i = 0; i < golden["hidden_state_names"].size(); ++i) {
    const std::string name = "hidden." + golden["hidden_state_names"][i].get<std::string>();
    ASSERT_TRUE(got.contains(name)) << name;
    const Tensor t = got.tensor(name);
    ASSERT_EQ(t.numel(), per_state) << name;
    EXPECT_LE(nmse(t.data<float>(), states.data<float>() + i * per_state, per_state), 1e-9) << name;
  }
}

TEST_F(CliModel, InspectReportsSupport) {
  auto r = run_lathe("inspect " + dir.path().string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["architecture"], "Qwen3ForCausalLM");
  EXPECT_TRUE(j["supported"].get<bool>());
  EXPECT_EQ(j["layers"], 2);
  Json cfg = Json::parse(testing::read_file(dir / "config.json"));
  cfg["architectures"] = {"MambaForCausalLM"};
  testing::write_file(dir / "config.json", cfg.dump());
  r = run_lathe("inspect " + dir.path().string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("supported:    no: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MambaForCausalLM"), std::string::npos) << r.out;
  // An unsupported architecture with feature signals: the missing features are named (a
  // mixture of experts is not one: lathe routes experts).
  cfg["architectures"] = {"PhimoeForCausalLM"};
  cfg["num_local_experts"] = 8;
  cfg["quantization_config"] = {{"quant_method", "awq"}};
  cfg["vision_config"] = {{"hidden_size", 32}};
  testing::write_file(dir / "config.json", cfg.dump());
  r = run_lathe("inspect " + dir.path().string() + " --json");
  EXPECT_EQ(r.exit_code, 1);
  const Json moe = Json::parse(r.out.substr(0, r.out.rfind('}') + 1));
  ASSERT_EQ(moe["missing_features"].size(), 2u) << r.out;
  EXPECT_EQ(moe["missing_features"][0]["feature"], "a vision encoder (image inputs)");
  EXPECT_EQ(moe["missing_features"][0]["evidence"], "config.json field \"vision_config\" = {...}");
  EXPECT_EQ(moe["missing_features"][1]["feature"], "quantized weights");
  r = run_lathe("inspect " + dir.path().string());
  EXPECT_NE(r.out.find("missing:      quantized weights"), std::string::npos) << r.out;
}

// Non-finite or out-of-range sampling parameters are usage errors (exit 2, one line naming
// the option), checked before the model is loaded; nan once made every token 0.
TEST_F(CliModel, SamplingParametersMustBeFiniteAndInRange) {
  for (const std::string bad :
       {"--temperature nan", "--temperature inf", "--temperature -inf", "--temperature 1e999",
        "--temperature 0", "--temperature -1", "--top-p nan", "--top-p inf", "--top-p 0",
        "--top-p 1.5", "--min-p nan", "--min-p -0.1", "--min-p 2", "--repetition-penalty nan",
        "--repetition-penalty 0", "--repetition-penalty -1", "--top-k -1", "--top-k nan"}) {
    for (const std::string& model : {dir.path().string(), std::string("/nonexistent")}) {
      const auto r =
          testing::run_lathe_split("generate " + model + " --prompt-ids '[1, 2]' --sample " + bad);
      EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
      EXPECT_NE(r.err.find(bad.substr(0, bad.find(' '))), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_EQ(r.out, "") << bad;
    }
  }
  const auto ok = run_lathe("generate " + dir.path().string() +
                            " --prompt-ids '[1, 2]' --sample --temperature 0.5 --top-p 1 "
                            "--min-p 0 --repetition-penalty 1.1 --max-new-tokens 2");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

// --ids and --prompt-ids take JSON or @FILE; a bare file name is answered with the hint.
TEST_F(CliModel, IdsWithoutTheAtSignSayHowToReadAFile) {
  const auto file = dir / "ids.json";
  testing::write_file(file, "[1, 2, 3]");
  auto r = run_lathe("logits " + dir.path().string() + " --ids " + file.string() + " --out " +
                     (dir / "l.safetensors").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("use @" + file.string() + " to read a file"), std::string::npos) << r.out;
  r = run_lathe("generate " + dir.path().string() + " --prompt-ids no-such-ids.json");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("use @FILE to read a file"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("json.exception"), std::string::npos) << r.out;
  r = run_lathe("generate " + dir.path().string() + " --prompt-ids @" + file.string() +
                " --max-new-tokens 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// No failure of `lathe logits` leaves its temporary file (or a partial output) behind.
TEST_F(CliModel, LogitsFailuresLeaveNoTemporaryFile) {
  namespace fs = std::filesystem;
  auto leftovers = [&](const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder))
      if (e.path().filename().string().find(".tmp") != std::string::npos)
        names.push_back(e.path().filename().string());
    return names;
  };
  // --out names an existing folder.
  fs::create_directories(dir / "out" / "taken");
  auto r = run_lathe("logits " + dir.path().string() + " --ids '[3, 1, 4]' --out " +
                     (dir / "out" / "taken").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("taken: is a folder"), std::string::npos) << r.out;
  EXPECT_TRUE(leftovers(dir / "out").empty());
  // The disk fills while the file is written.
  const auto target = dir / "out" / "logits.safetensors";
  r = testing::run_lathe_with_full_disk(
      8, "logits " + dir.path().string() + " --ids '[3, 1, 4, 1, 5, 9, 2, 6]' --hidden-states " +
             "--out " + target.string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("logits.safetensors: cannot write"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(leftovers(dir / "out").empty()) << leftovers(dir / "out")[0];
}

// docs/errors.md: every failing command writes its error to stderr, one line for exit code 1.
TEST_F(CliModel, EveryFailingCommandWritesItsErrorToStderr) {
  namespace fs = std::filesystem;
  ScratchDir scratch("failing");
  // An unsupported checkpoint: inspect prints its report on stdout and the reason on stderr.
  fs::copy(dir.path(), scratch / "mamba");
  Json cfg = Json::parse(testing::read_file(scratch / "mamba" / "config.json"));
  cfg["architectures"] = {"MambaForCausalLM"};
  testing::write_file(scratch / "mamba" / "config.json", cfg.dump());
  // A fixture whose goldens disagree with what lathe computes.
  fs::create_directories(scratch / "fixtures");
  fs::copy(testing::fixture_dir("qwen3_tied"), scratch / "fixtures" / "qwen3_tied");
  Json golden = Json::parse(testing::read_file(scratch / "fixtures/qwen3_tied/goldens.json"));
  for (auto& t : golden["greedy_tokens"]) t = (t.get<int>() + 1) % 128;
  testing::write_file(scratch / "fixtures/qwen3_tied/goldens.json", golden.dump());
  fs::create_directories(scratch / "empty");
  const std::string model = dir.path().string(), s = scratch.path().string();
  const std::vector<std::pair<std::string, std::string>> failing = {
      {"inspect " + s + "/mamba", "MambaForCausalLM"},
      {"inspect " + s + "/mamba --json", "MambaForCausalLM"},
      {"inspect /nonexistent", "/nonexistent"},
      {"generate /nonexistent --prompt-ids '[1]'", "/nonexistent"},
      {"generate " + model + " --prompt-ids '[1, 999]'", "999"},
      {"logits " + model + " --ids '[]' --out " + s + "/l.safetensors", "empty"},
      {"tokenize /nonexistent < /dev/null", "/nonexistent"},
      {"detokenize /nonexistent < /dev/null", "/nonexistent"},
      {"chat-template " + model + " < /dev/null", "no chat template"},
      {"tiny build /nonexistent " + s + "/t", "/nonexistent"},
      {"tiny check --fixtures " + s + "/fixtures", "1 of 1 tiny fixtures"},
      {"tiny check --fixtures " + s + "/empty", "no tiny fixtures"},
      {"lab report " + s + "/empty", "no lab rows"},
      {"lab diff " + s + "/empty " + s + "/empty", "no lab rows"},
      {"lab merge " + s + "/merged " + s + "/empty", "no lab rows"},
      {"lab run --fixtures /nonexistent --out " + s + "/o", "/nonexistent"},
      {"lab serve --port 0 --web " + s + "/empty", "index.html"},
  };
  for (const auto& [args, names] : failing) {
    const auto r = testing::run_lathe_split(args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.out << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << ": stderr is \"" << r.err << "\"";
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << args << ": " << r.err;
  }
  // Usage errors: exit code 2, the message on stderr.
  for (const std::string& args :
       std::vector<std::string>{"generate " + model, "architectures --bogus", "lab diff x",
                                "lab run --shard 3/2", "tiny frobnicate"}) {
    const auto r = testing::run_lathe_split(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
}  // namespace lathe
