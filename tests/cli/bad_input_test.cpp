// Every kind of bad checkpoint gets exit code 1 and one message naming the file and the
// tensor or field (issue: foundation, part 2).
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "io/tiny_checkpoint.h"
#include "support/run.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using testing::read_file;
using testing::run_lathe;
using testing::ScratchDir;
using testing::write_file;
using Json = nlohmann::json;

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    build_tiny_checkpoint(testing::fixture_dir("llama_tied_gqa"), dir.path(), {});
  }
  std::string model() const { return (dir / "model.safetensors").string(); }

  // Splits a safetensors file into its header JSON and data, for editing.
  Json header() const {
    const std::string s = read_file(model());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(s[i]);
    return Json::parse(s.substr(8, n));
  }
  std::string data() const {
    const std::string s = read_file(model());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(s[i]);
    return s.substr(8 + n);
  }
  void write_model(const Json& h, const std::string& d) const {
    const std::string text = h.dump();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(text.size() >> (8 * i) & 0xff);
    write_file(model(), out + text + d);
  }
  void edit_config(const std::function<void(Json&)>& f) const {
    Json c = Json::parse(read_file(dir / "config.json"));
    f(c);
    write_file(dir / "config.json", c.dump());
  }
  // `lathe generate` must fail with exit code 1 and one line holding `message`.
  void expect_failure(const std::string& message) const {
    const auto r =
        run_lathe("generate " + dir.path().string() + " --prompt-ids '[1, 5]' --max-new-tokens 2");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos)
        << "expected \"" << message << "\" in: " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one line: " << r.out;
  }

  ScratchDir dir{"bad"};
};

TEST_F(BadInput, GoodCheckpointRuns) {
  const auto r =
      run_lathe("generate " + dir.path().string() + " --prompt-ids '[1, 5]' --max-new-tokens 2");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(BadInput, TruncatedFile) {
  write_file(model(), read_file(model()).substr(0, 5));
  expect_failure("model.safetensors: truncated file of 5 bytes");
}

TEST_F(BadInput, EmptyFile) {
  write_file(model(), "");
  expect_failure("model.safetensors: empty file");
}

TEST_F(BadInput, HeaderLengthBeyondFile) {
  std::string s = read_file(model());
  s[5] = 0x01;  // header length += 2^40
  write_file(model(), s);
  expect_failure("model.safetensors: header length");
}

TEST_F(BadInput, HeaderCutShort) {
  const std::string s = read_file(model());
  write_file(model(), s.substr(0, 40));  // header length now runs past the end
  expect_failure("runs beyond the end of the file");
}

TEST_F(BadInput, MalformedHeaderJson) {
  std::string s = read_file(model());
  s[9] = '!';
  write_file(model(), s);
  expect_failure("model.safetensors (header): malformed JSON");
}

TEST_F(BadInput, OffsetsOutsideData) {
  Json h = header();
  h["model.norm.weight"]["data_offsets"][1] = data().size() + 4;
  write_model(h, data());
  expect_failure("tensor \"model.norm.weight\": data_offsets");
}

TEST_F(BadInput, OverlappingTensors) {
  Json h = header();
  h["model.norm.weight"]["data_offsets"] =
      h["model.layers.0.input_layernorm.weight"]["data_offsets"];
  write_model(h, data());
  expect_failure("overlap");
}

TEST_F(BadInput, ByteCountDisagreesWithShape) {
  Json h = header();
  h["model.norm.weight"]["shape"] = {63};
  write_model(h, data());
  expect_failure(
      "tensor \"model.norm.weight\": shape [63] of F32 needs 252 bytes but data_offsets span 256");
}

TEST_F(BadInput, UnknownDtype) {
  Json h = header();
  h["model.norm.weight"]["dtype"] = "Q9";
  write_model(h, data());
  expect_failure("tensor \"model.norm.weight\": unknown dtype \"Q9\"");
}

TEST_F(BadInput, DtypeLatheCannotComputeWith) {
  Json h = header();
  h["model.norm.weight"]["dtype"] = "I8";  // 64 one-byte values in the first quarter
  const uint64_t begin = h["model.norm.weight"]["data_offsets"][0];
  h["model.norm.weight"]["data_offsets"] = {begin, begin + 64};
  write_model(h, data());
  expect_failure("tensor \"model.norm.weight\" has dtype I8");
}

TEST_F(BadInput, WrongShapeForTheArchitecture) {
  Json h = header();
  h["model.norm.weight"]["shape"] = {8, 8};
  write_model(h, data());
  expect_failure("tensor \"model.norm.weight\" in " + model() + " has shape [8, 8], expected [64]");
}

TEST_F(BadInput, MissingTensor) {
  Json h = header();
  h.erase("model.layers.1.mlp.up_proj.weight");
  write_model(h, data());
  expect_failure("missing tensors for LlamaForCausalLM: model.layers.1.mlp.up_proj.weight");
}

TEST_F(BadInput, UnusedTensor) {
  Json h = header();
  std::string d = data();
  h["model.extra.weight"] = {
      {"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {d.size(), d.size() + 4}}};
  write_model(h, d + std::string(4, '\0'));
  expect_failure("tensors LlamaForCausalLM does not use: model.extra.weight");
}

TEST_F(BadInput, MissingConfig) {
  fs::remove(dir / "config.json");
  expect_failure("config.json: missing file");
}

TEST_F(BadInput, MalformedConfig) {
  write_file(dir / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"],");
  expect_failure("config.json: malformed JSON at byte");
}

TEST_F(BadInput, ConfigFieldOfWrongType) {
  edit_config([](Json& c) { c["hidden_size"] = "sixty-four"; });
  expect_failure("config.json: field \"hidden_size\" must be an integer");
}

TEST_F(BadInput, UnknownArchitecture) {
  edit_config([](Json& c) { c["architectures"] = {"FooForCausalLM"}; });
  expect_failure(
      "config.json: field \"architectures\" names FooForCausalLM, which lathe does not support");
}

TEST_F(BadInput, UnknownRopeType) {
  edit_config([](Json& c) { c["rope_scaling"] = {{"rope_type", "spiral"}, {"factor", 2.0}}; });
  expect_failure("field \"rope_type\" is \"spiral\"");
}

TEST_F(BadInput, UnsupportedActivation) {
  edit_config([](Json& c) { c["hidden_act"] = "gelu"; });
  expect_failure("field \"hidden_act\" is \"gelu\"");
}

TEST_F(BadInput, NoWeightsFile) {
  fs::remove(model());
  expect_failure("no model.safetensors or model.safetensors.index.json");
}

class BadShards : public ::testing::Test {
 protected:
  void SetUp() override {
    build_tiny_checkpoint(testing::fixture_dir("llama_tied_gqa"), dir.path(), {.shards = 2});
  }
  ScratchDir dir{"shards"};
};

TEST_F(BadShards, ShardedCheckpointRuns) {
  const auto r =
      run_lathe("generate " + dir.path().string() + " --prompt-ids '[1]' --max-new-tokens 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// LATHE_CPU_ISA names the kernel level: an unknown one is one clear error before loading.
TEST_F(BadShards, UnknownKernelLevel) {
  const std::string args =
      "generate " + dir.path().string() + " --prompt-ids '[1]' --max-new-tokens 1";
  setenv("LATHE_CPU_ISA", "sse9", 1);
  const auto r = run_lathe(args);
  setenv("LATHE_CPU_ISA", "portable", 1);
  const auto ok = run_lathe(args);
  unsetenv("LATHE_CPU_ISA");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("LATHE_CPU_ISA=sse9 is not a kernel level"), std::string::npos) << r.out;
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

// lathe --cpu-kernels lists the levels this CPU runs and the one in use, which follows
// LATHE_CPU_ISA (tools/test.sh reads it to rerun the engine and golden tests per level).
TEST(KernelLevels, ListedAndChosenByTheEnvironment) {
  const auto r = run_lathe("--cpu-kernels");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("available: portable"), std::string::npos) << r.out;
  setenv("LATHE_CPU_ISA", "portable", 1);
  const auto p = run_lathe("--cpu-kernels");
  unsetenv("LATHE_CPU_ISA");
  EXPECT_NE(p.out.find("active: portable\n"), std::string::npos) << p.out;
}

TEST_F(BadShards, MissingShard) {
  fs::remove(dir / "model-00002-of-00002.safetensors");
  const auto r = run_lathe("generate " + dir.path().string() + " --prompt-ids '[1]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("model-00002-of-00002.safetensors: missing shard (listed in"),
            std::string::npos)
      << r.out;
}

TEST_F(BadShards, IndexNamesTensorAbsentFromShard) {
  Json index = Json::parse(read_file(dir / "model.safetensors.index.json"));
  index["weight_map"]["model.ghost.weight"] = "model-00001-of-00002.safetensors";
  write_file(dir / "model.safetensors.index.json", index.dump());
  const auto r = run_lathe("generate " + dir.path().string() + " --prompt-ids '[1]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("missing tensor \"model.ghost.weight\" (listed in"), std::string::npos)
      << r.out;
}

// A shard name longer than the file system allows (found by fuzz_safetensors: the existence
// check threw std::filesystem_error, which terminated the process) is a missing shard.
TEST_F(BadShards, ShardNameTooLongIsAMissingShard) {
  Json index = Json::parse(read_file(dir / "model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = std::string(300, 'x') + ".safetensors";
  write_file(dir / "model.safetensors.index.json", index.dump());
  const auto r = run_lathe("generate " + dir.path().string() + " --prompt-ids '[1]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(".safetensors: missing shard (listed in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("File name too long"), std::string::npos) << r.out;
}

TEST_F(BadShards, IndexEscapingTheFolder) {
  Json index = Json::parse(read_file(dir / "model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  write_file(dir / "model.safetensors.index.json", index.dump());
  const auto r = run_lathe("generate " + dir.path().string() + " --prompt-ids '[1]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("which is not a file in this folder"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lathe
