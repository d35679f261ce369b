// `lathe pull` and Hub ids as MODEL arguments, against a loopback stand-in for the Hub
// (tests/lab/fake_hub.py): the cache layout, resumed and verified downloads, the messages for
// HTTP errors, redirects, a SIGKILL mid-pull, and the cache read back by huggingface_hub and
// transformers.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/fake_hub.h"
#include "support/run.h"
#include "support/skip.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::FakeHub;
using testing::read_file;
using testing::run_shell;
using testing::ScratchDir;
using testing::spawn;
using testing::wait_for;
using testing::write_file;

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kFixture = "llama_tied_gqa";

// A scratch cache, a repository folder holding a tiny checkpoint (plus files lathe must not
// take), and a fake Hub serving it as org/tiny.
class HubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "repo";
    const auto built =
        testing::run_lathe("tiny build " + testing::fixture_dir(kFixture) + " " + repo_.string());
    ASSERT_EQ(built.exit_code, 0) << built.out;
    write_file(repo_ / "README.md", "# not for lathe\n");
    write_file(repo_ / "pytorch_model.bin", std::string(1000, 'x'));
    write_file(repo_ / "consolidated.safetensors", std::string(2000, 'y'));
    fs::create_directories(repo_ / "onnx");
    write_file(repo_ / "onnx" / "model.onnx", "onnx");
    fs::create_directories(repo_ / "additional_chat_templates");
    write_file(repo_ / "additional_chat_templates" / "tool_use.jinja", "{{ messages }}");
    write_file(repo_ / "special_tokens_map.json", "{}\n");
    spec_ = {{"repos",
              {{"org/tiny",
                {{"dir", repo_.string()},
                 {"commit", kCommit},
                 {"refs", {{"main", kCommit}, {"v1", kCommit}}}}}}},
             {"faults", Json::object()}};
    save();
    hub_ = std::make_unique<FakeHub>(dir_ / "port", dir_ / "repos.json", "127.0.0.1");
    ASSERT_FALSE(hub_->url().empty()) << "the fake hub did not start";
  }
  void save() { write_file(dir_ / "repos.json", spec_.dump()); }

  // `lathe ARGS` with this test's cache, endpoint and no token; stdout, stderr apart.
  testing::SplitRunResult lathe(const std::string& args, const std::string& env = "") {
    return testing::run_lathe_split_env(
        "env -u HF_TOKEN -u HF_HUB_OFFLINE -u HF_TOKEN_PATH HF_HOME=" + (dir_ / "home").string() +
            " HF_HUB_CACHE=" + cache().string() + " HF_ENDPOINT=" + hub_->url() + " " + env,
        args);
  }
  fs::path cache() const { return dir_ / "cache"; }
  fs::path model_repo() const { return cache() / "models--org--tiny"; }
  fs::path snapshot() const { return model_repo() / "snapshots" / kCommit; }
  std::string blob_sha256() const { return testing::sha256_of(repo_ / "model.safetensors"); }

  ScratchDir dir_{"hub"};
  fs::path repo_;
  Json spec_;
  std::unique_ptr<FakeHub> hub_;
};

std::set<std::string> snapshot_files(const fs::path& snap) {
  std::set<std::string> out;
  std::error_code ec;
  if (!fs::exists(snap, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(snap))
    if (!e.is_directory()) out.insert(e.path().lexically_relative(snap).string());
  return out;
}

size_t lines(const std::string& s) {
  return std::count(s.begin(), s.end(), '\n');
}

TEST_F(HubTest, FullPullMakesTheHuggingFaceCacheLayout) {
  const auto r = lathe("pull org/tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, snapshot().string() + "\n");
  EXPECT_EQ(r.err, "");  // quiet when stderr is not a terminal
  EXPECT_EQ(read_file(model_repo() / "refs" / "main"), kCommit);
  const std::set<std::string> want = {"config.json", "generation_config.json", "model.safetensors",
                                      "special_tokens_map.json",
                                      "additional_chat_templates/tool_use.jinja"};
  EXPECT_EQ(snapshot_files(snapshot()), want);
  // Links relative to blobs/, named by the LFS sha256 or the git blob id.
  EXPECT_EQ(fs::read_symlink(snapshot() / "model.safetensors"), "../../blobs/" + blob_sha256());
  const std::string git_id = run_shell("git hash-object " + (repo_ / "config.json").string()).out;
  EXPECT_EQ(fs::read_symlink(snapshot() / "config.json").string() + "\n", "../../blobs/" + git_id);
  EXPECT_EQ(
      fs::read_symlink(snapshot() / "additional_chat_templates/tool_use.jinja").string(),
      "../../../blobs/" + run_shell("git hash-object " +
                                    (repo_ / "additional_chat_templates/tool_use.jinja").string())
                              .out.substr(0, 40));
  EXPECT_EQ(read_file(snapshot() / "model.safetensors"), read_file(repo_ / "model.safetensors"));
  for (const auto& e : fs::directory_iterator(model_repo() / "blobs"))
    EXPECT_EQ(e.path().extension(), "") << e.path();  // no .incomplete left
  // Only the files lathe reads were asked for.
  const std::string req = hub_->requests();
  EXPECT_NE(req.find("/api/models/org/tiny/revision/main?blobs=true"), std::string::npos) << req;
  for (const char* skipped : {"README.md", "pytorch_model.bin", "consolidated", "onnx"})
    EXPECT_EQ(req.find(skipped), std::string::npos) << skipped << "\n" << req;

  // A second pull downloads nothing; a tag names the same commit in refs/.
  const auto again = lathe("pull org/tiny@v1");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read_file(model_repo() / "refs" / "v1"), kCommit);
  EXPECT_EQ(lines(hub_->requests()), lines(req) + 1) << hub_->requests();
  // Offline, the cache answers without a request.
  const auto offline = lathe("pull org/tiny --offline");
  EXPECT_EQ(offline.exit_code, 0) << offline.err;
  EXPECT_EQ(offline.out, snapshot().string() + "\n");
  const auto env_offline = lathe("pull org/tiny", "HF_HUB_OFFLINE=1");
  EXPECT_EQ(env_offline.out, snapshot().string() + "\n");
  EXPECT_EQ(lines(hub_->requests()), lines(req) + 1);
  const auto missing = lathe("pull org/other --offline");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("offline"), std::string::npos) << missing.err;
}

TEST_F(HubTest, ShardedCheckpointTakesTheShardsItsIndexNames) {
  fs::remove(repo_ / "model.safetensors");
  write_file(repo_ / "model-00001-of-00002.safetensors", std::string(3000, 'a'));
  write_file(repo_ / "model-00002-of-00002.safetensors", std::string(5000, 'b'));
  write_file(repo_ / "model.safetensors.index.json",
             R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                 "b": "model-00002-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
  const auto r = lathe("pull org/tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto files = snapshot_files(snapshot());
  EXPECT_TRUE(files.count("model-00001-of-00002.safetensors"));
  EXPECT_TRUE(files.count("model-00002-of-00002.safetensors"));
  EXPECT_TRUE(files.count("model.safetensors.index.json"));
  EXPECT_FALSE(files.count("consolidated.safetensors"));
  // An index naming a file outside the folder is refused before any weight is fetched.
  write_file(repo_ / "model.safetensors.index.json",
             R"({"weight_map": {"a": "../evil.safetensors"}})");
  const auto bad = lathe("pull org/tiny");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("../evil.safetensors"), std::string::npos) << bad.err;
}

TEST_F(HubTest, CutDownloadResumesWithARangeRequest) {
  // Cut once: the same run resumes from where the cut left the file.
  spec_["faults"]["model.safetensors"] = {{"cut", true}, {"once", true}};
  save();
  const int64_t size = static_cast<int64_t>(fs::file_size(repo_ / "model.safetensors"));
  auto r = lathe("pull org/tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(hub_->requests().find("range=bytes=" + std::to_string(size / 2) + "-"),
            std::string::npos)
      << hub_->requests();
  EXPECT_EQ(testing::sha256_of(snapshot() / "model.safetensors"), blob_sha256());

  // Cut every time: the pull gives up with one line, keeps the partial file, and the next
  // run (with the server mended) resumes it.
  fs::remove_all(cache());
  spec_["faults"]["model.safetensors"] = {{"cut", true}};
  save();
  r = lathe("pull org/tiny");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("run the command again to resume"), std::string::npos) << r.err;
  const fs::path part = model_repo() / "blobs" / (blob_sha256() + ".incomplete");
  ASSERT_TRUE(fs::exists(part));
  const int64_t kept = static_cast<int64_t>(fs::file_size(part));
  EXPECT_GE(kept, size / 2);
  EXPECT_LT(kept, size);
  EXPECT_FALSE(fs::exists(model_repo() / "blobs" / blob_sha256()));
  EXPECT_FALSE(fs::exists(model_repo() / "refs" / "main"));
  spec_["faults"] = Json::object();
  save();
  r = lathe("pull org/tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(hub_->requests().find("range=bytes=" + std::to_string(kept) + "-"), std::string::npos);
  EXPECT_FALSE(fs::exists(part));
  EXPECT_EQ(testing::sha256_of(model_repo() / "blobs" / blob_sha256()), blob_sha256());

  // A server that ignores the Range request: the download starts again and still verifies.
  fs::remove_all(cache());
  spec_["faults"]["model.safetensors"] = {{"cut", true}, {"once", true}, {"ignore_range", true}};
  save();
  r = lathe("pull org/tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::sha256_of(snapshot() / "model.safetensors"), blob_sha256());
}

TEST_F(HubTest, WrongSha256IsRejectedAndNothingIsLinked) {
  spec_["faults"]["model.safetensors"] = {{"corrupt", true}};
  save();
  auto r = lathe("pull org/tiny");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("sha256"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(blob_sha256()), std::string::npos) << r.err;
  EXPECT_TRUE(snapshot_files(model_repo() / "snapshots").empty());
  EXPECT_FALSE(fs::exists(model_repo() / "refs" / "main"));
  for (const auto& e : fs::directory_iterator(model_repo() / "blobs"))
    EXPECT_EQ(e.path().filename().string().find(blob_sha256()), std::string::npos) << e.path();
  // A small file is checked by its git blob id.
  fs::remove_all(cache());
  spec_["faults"] = {{"config.json", {{"corrupt", true}}}};
  save();
  r = lathe("pull org/tiny");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("git blob id"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
  EXPECT_TRUE(snapshot_files(model_repo() / "snapshots").empty());
}

TEST_F(HubTest, HttpErrorsGiveOneClearLineEach) {
  auto expect_one_line = [&](const std::string& args, const std::string& env,
                             const std::vector<std::string>& words) {
    const auto r = lathe(args, env);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
    for (const auto& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << w << ": " << r.err;
  };
  spec_["repos"]["org/tiny"]["gated"] = {"hf_good"};
  save();
  expect_one_line("pull org/tiny", "", {"HTTP 401", "accept its licence", "HF_TOKEN"});
  expect_one_line("pull org/tiny --token hf_other", "", {"HTTP 403", "accept its licence"});
  expect_one_line("pull org/tiny", "HF_TOKEN=hf_other", {"HTTP 403", "/org/tiny"});
  EXPECT_EQ(lathe("pull org/tiny", "HF_TOKEN=hf_good").exit_code, 0);
  EXPECT_NE(hub_->requests().find("auth=Bearer hf_good"), std::string::npos);
  spec_["repos"]["org/tiny"].erase("gated");
  save();
  expect_one_line("pull org/nothing", "", {"HTTP 404", "org/nothing", "does not exist"});
  expect_one_line("pull org/tiny@nobranch", "", {"HTTP 404", "no revision \"nobranch\""});
  spec_["faults"]["api"] = {{"status", 503}};
  save();
  expect_one_line("pull org/tiny@v1", "", {"HTTP 503", "server failed", "again"});
  spec_["faults"] = {{"model.safetensors", {{"status", 500}}}};
  save();
  fs::remove_all(cache());
  expect_one_line("pull org/tiny", "", {"HTTP 500", "model.safetensors", "again"});
  // Nothing listens: the network, HF_ENDPOINT and offline use are named.
  expect_one_line("pull org/tiny", "HF_ENDPOINT=http://127.0.0.1:9", {"HF_HUB_OFFLINE"});
  // Usage errors: not an id, a bad endpoint.
  for (const char* bad : {"../x", "org/a/b", "org/--x", "org/tiny@../x", "org"})
    EXPECT_EQ(lathe(std::string("pull ") + bad).exit_code, 2) << bad;
  EXPECT_EQ(lathe("pull org/tiny --endpoint ftp://x").exit_code, 2);
}

TEST_F(HubTest, RedirectToASecondHostKeepsTheTokenHome) {
  // The second server shares the repositories file; the first redirects LFS files to it.
  FakeHub cdn(dir_ / "port2", dir_ / "repos.json", "127.0.0.2");
  ASSERT_FALSE(cdn.url().empty()) << "the second fake hub (127.0.0.2) did not start";
  spec_["repos"]["org/tiny"]["cdn"] = cdn.url();
  save();
  const auto r = lathe("pull org/tiny --token hf_secret");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::sha256_of(snapshot() / "model.safetensors"), blob_sha256());
  const std::string home = hub_->requests(), far = cdn.requests();
  EXPECT_NE(home.find("/org/tiny/resolve/" + std::string(kCommit) +
                      "/model.safetensors auth=Bearer hf_secret"),
            std::string::npos)
      << home;
  EXPECT_NE(far.find("/cdn/org/tiny/" + std::string(kCommit) + "/model.safetensors auth=-"),
            std::string::npos)
      << far;
  EXPECT_EQ(far.find("hf_secret"), std::string::npos) << far;
}

TEST_F(HubTest, PullKilledMidDownloadThenRepeatedLeavesNoCorruptCache) {
  spec_["faults"]["model.safetensors"] = {{"delay", 0.05}};
  save();
  const fs::path part = model_repo() / "blobs" / (blob_sha256() + ".incomplete");
  const pid_t pid = spawn("env -u HF_TOKEN HF_HUB_CACHE=" + cache().string() +
                          " HF_ENDPOINT=" + hub_->url() + " " + LATHE_BINARY + " pull org/tiny");
  ASSERT_GT(pid, 0);
  const bool started = wait_for([&] {
    std::error_code ec;
    return fs::exists(part, ec) && fs::file_size(part, ec) > 16384;
  });
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(started) << "the download never started";
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(model_repo() / "blobs" / blob_sha256()));
  EXPECT_FALSE(fs::exists(snapshot() / "model.safetensors"));
  EXPECT_FALSE(fs::exists(model_repo() / "refs" / "main"));
  // The same command again: resumed, verified, linked.
  spec_["faults"] = Json::object();
  save();
  const auto r = lathe("pull org/tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::sha256_of(snapshot() / "model.safetensors"), blob_sha256());
  EXPECT_FALSE(fs::exists(part));
  EXPECT_EQ(lathe("inspect org/tiny").exit_code, 0);
}

TEST_F(HubTest, GenerateByIdGivesTheTokensOfTheFolder) {
  const std::string gen = " --prompt-ids '[49, 44, 0, 7]' --max-new-tokens 12 --ignore-eos --json";
  const auto folder = lathe("generate " + repo_.string() + gen);
  ASSERT_EQ(folder.exit_code, 0) << folder.err;
  // Not in the cache: the message names the command that fetches it.
  auto r = lathe("generate org/tiny" + gen);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("lathe pull org/tiny"), std::string::npos) << r.err;
  r = lathe("generate org/tiny@v1" + gen + " --pull --offline");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("lathe pull org/tiny@v1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("offline"), std::string::npos) << r.err;
  EXPECT_EQ(hub_->requests(), "");
  // --pull fetches it; then the cache alone serves it, offline too.
  r = lathe("generate org/tiny" + gen + " --pull");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = Json::parse(r.out), want = Json::parse(folder.out);
  EXPECT_EQ(j["generated_ids"], want["generated_ids"]);
  r = lathe("generate org/tiny@v1" + gen, "HF_HUB_OFFLINE=1");
  EXPECT_NE(r.exit_code, 0);  // v1 was never pulled
  ASSERT_EQ(lathe("pull org/tiny@v1").exit_code, 0);
  r = lathe("generate org/tiny@v1" + gen, "HF_HUB_OFFLINE=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["generated_ids"], want["generated_ids"]);
  r = lathe("generate org/tiny@" + std::string(kCommit) + gen);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["generated_ids"], want["generated_ids"]);
  // The other verbs take the id too.
  const auto inspect = lathe("inspect org/tiny --json");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(Json::parse(inspect.out)["model_dir"], snapshot().string());
  const auto logits = lathe("logits org/tiny --ids '[1, 2]' --out " + (dir_ / "l.st").string());
  EXPECT_EQ(logits.exit_code, 0) << logits.err;
  const auto bench = lathe("bench org/tiny --prompt-tokens 4 --new-tokens 2 --repeat 1 --json");
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
  // tokenize names the tokenizer the snapshot lacks, by its path in the cache.
  const auto tok = lathe("tokenize org/tiny < /dev/null");
  EXPECT_EQ(tok.exit_code, 1);
  EXPECT_NE(tok.err.find(snapshot().string()), std::string::npos) << tok.err;
}

// The Python that reads the cache back: LATHE_REFERENCE_PYTHON (torch and transformers), else
// the test environment's (huggingface_hub and transformers, no torch).
std::string python_with(const std::string& module) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("LATHE_REFERENCE_PYTHON"); p && *p) candidates.push_back(p);
  candidates.push_back(LATHE_PYTHON);
  for (const auto& p : candidates)
    if (run_shell(p + " -c 'import " + module + "' 2>/dev/null").exit_code == 0) return p;
  return "";
}

TEST_F(HubTest, CacheIsReadBackByHuggingFaceHubAndTransformers) {
  const std::string python = python_with("huggingface_hub, transformers");
  if (python.empty())
    LATHE_SKIP_OUTSIDE_CI(
        "no Python with huggingface_hub and transformers (set "
        "LATHE_REFERENCE_PYTHON, or tools/setup.sh --python)");
  const std::string gen = " --prompt-ids '[49, 44, 0, 7]' --max-new-tokens 8 --ignore-eos --json";
  const auto r = lathe("generate org/tiny --pull" + gen);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto read =
      run_shell("env -u HF_TOKEN HF_HUB_OFFLINE=1 HF_HOME=" + (dir_ / "home").string() +
                " HF_HUB_CACHE=" + cache().string() + " " + python + " " + LATHE_SOURCE_DIR +
                "/tests/hub/read_cache.py org/tiny '[49, 44, 0, 7]' 8 2>&1");
  ASSERT_EQ(read.exit_code, 0) << read.out;
  const Json j = Json::parse(read.out.substr(read.out.rfind("\n{") + 1));
  EXPECT_EQ(j["snapshot"], snapshot().string());
  EXPECT_EQ(j["architectures"], Json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["model_sha256"], blob_sha256());
  if (j["generated"].is_null()) {
    std::cerr << "transformers without torch here: the model was not run\n";
  } else {
    EXPECT_EQ(j["generated"], Json::parse(r.out)["generated_ids"]);
  }
}

}  // namespace
}  // namespace lathe
