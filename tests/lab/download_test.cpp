// `lathe lab run --catalog FILE --download` against the loopback fake Hub
// (tests/lab/fake_hub.py): a ranked model within the budget is pulled, run in its own process
// and judged against the reference cache (its fixture's goldens), then removed or kept by the
// policy; one over the budget, one the Hub lacks, one whose download is damaged and one of an
// architecture lathe does not implement are rows saying why.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "io/json.h"
#include "lab/reference.h"
#include "lab/runner.h"
#include "support/fake_hub.h"
#include "support/run.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using lathe::testing::FakeHub;
using lathe::testing::fixture_dir;
using lathe::testing::read_file;
using lathe::testing::run_lathe;
using lathe::testing::ScratchDir;
using lathe::testing::write_file;

constexpr const char* kSmall = "qwen3_tied";
constexpr const char* kBig = "gemma4_text_moe";
constexpr const char* kCommit = "89abcdef0123456789abcdef0123456789abcdef";

int64_t folder_bytes(const fs::path& dir) {
  int64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
  return n;
}

const LabRow& row_of(const std::vector<LabRow>& rows, const std::string& id) {
  for (const auto& r : rows)
    if (r.model_id == id) return r;
  throw std::runtime_error("no row for " + id);
}

class LabDownload : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [name, fixture] : {std::pair{"small", kSmall}, std::pair{"big", kBig}}) {
      const auto built =
          run_lathe(std::string("tiny build ") + fixture_dir(fixture) + " " + repo(name).string());
      ASSERT_EQ(built.exit_code, 0) << built.out;
    }
    small_bytes_ = folder_bytes(repo("small"));
    big_bytes_ = folder_bytes(repo("big"));
    ASSERT_GT(big_bytes_, small_bytes_ * 5 / 4) << "the big fixture must be the larger";
    Json repos = Json::object();
    for (const char* name : {"small", "big"})
      repos[std::string("org/") + name] = {
          {"dir", repo(name).string()}, {"commit", kCommit}, {"refs", {{"main", kCommit}}}};
    // org/broken serves the small model with its weights damaged in transit.
    repos["org/broken"] = repos["org/small"];
    Json spec = {{"repos", repos}};
    spec["faults"] = {{"org/broken/model.safetensors", {{"corrupt", true}}}};
    write_file(dir_ / "repos.json", spec.dump());
    hub_ = std::make_unique<FakeHub>(dir_ / "port", dir_ / "repos.json", "127.0.0.1");
    ASSERT_FALSE(hub_->url().empty()) << "the fake hub did not start";

    // The reference: the small fixture's goldens, in the reference cache under the content
    // of the checkpoint the Hub serves (the lab's own path for a model with no bridge).
    const Json goldens = read_json_file(fs::path(fixture_dir(kSmall)) / "goldens.json");
    prompt_ = goldens["prompt_ids"].get<std::vector<int32_t>>();
    import_golden(fixture_dir(kSmall),
                  reference_key_dir(dir_ / "ref", model_content_hash(repo("small")), prompt_, 32));
    Json models = Json::array();
    models.push_back({{"id", "org/small"},
                      {"rank", 1},
                      {"architecture", "Qwen3ForCausalLM"},
                      {"prompt_ids", prompt_}});
    models.push_back({{"id", "org/big"}, {"rank", 2}, {"architecture", "Gemma4ForCausalLM"}});
    models.push_back({{"id", "org/absent"}, {"rank", 3}, {"architecture", "LlamaForCausalLM"}});
    models.push_back(
        {{"id", "org/exotic"}, {"rank", 4}, {"architecture", "NoSuchArchForCausalLM"}});
    models.push_back({{"id", "org/broken"}, {"rank", 5}, {"architecture", "Qwen3ForCausalLM"}});
    Json ranking = {{"format", 1},
                    {"task", "text-generation"},
                    {"view", "selected"},
                    {"snapshot", "2026-12-01"}};
    ranking["models"] = models;
    write_file(dir_ / "ranking.json", ranking.dump());
    fs::create_directories(cache());
  }

  fs::path repo(const std::string& name) const { return dir_ / "repos" / name; }
  fs::path cache() const { return dir_ / "cache"; }
  // A budget between the small model's files and the big one's, in GB.
  std::string budget_gb() const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9f", static_cast<double>(small_bytes_ + big_bytes_) / 2e9);
    return buf;
  }
  testing::RunResult sweep(const std::string& out, const std::string& extra = "") {
    return testing::run_shell(
        "env -u HF_TOKEN -u HF_HUB_OFFLINE HF_HOME=" + (dir_ / "home").string() +
        " HF_ENDPOINT=" + hub_->url() + " " + LATHE_BINARY + " lab run --quiet --catalog " +
        (dir_ / "ranking.json").string() + " --download --hf-cache " + cache().string() +
        " --max-download-gb " + budget_gb() + " --out " + (dir_ / out).string() +
        " --reference-python none --reference-cache " + (dir_ / "ref").string() + " " + extra +
        " 2>&1");
  }

  ScratchDir dir_{"lab-download"};
  std::unique_ptr<FakeHub> hub_;
  int64_t small_bytes_ = 0, big_bytes_ = 0;
  std::vector<int32_t> prompt_;
};

TEST_F(LabDownload, PullsWhatFitsRunsItAndRemovesItAfterwards) {
  const auto r = sweep("out");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("downloaded 1 models"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 removed after their run"), std::string::npos) << r.out;
  const auto rows = read_rows(dir_ / "out");
  ASSERT_EQ(rows.size(), 5u);

  const LabRow& small = row_of(rows, "org/small");
  EXPECT_EQ(small.status, "pass") << small.error_message << small.judge_verdict;
  EXPECT_EQ(small.source, "hub");
  EXPECT_EQ(small.reference_source, "cache");
  EXPECT_EQ(small.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(small.generated_tokens.size(), 32u);

  const LabRow& big = row_of(rows, "org/big");
  EXPECT_EQ(big.status, "untested");
  EXPECT_EQ(big.stage, "fetch");
  EXPECT_EQ(big.error_type, "over_download_budget");
  EXPECT_NE(big.error_message.find("--max-download-gb"), std::string::npos) << big.error_message;
  EXPECT_NE(big.error_message.find("not downloaded"), std::string::npos) << big.error_message;
  EXPECT_GT(big.weight_bytes, 0);  // from the listing

  const LabRow& absent = row_of(rows, "org/absent");
  EXPECT_EQ(absent.status, "error");
  EXPECT_EQ(absent.stage, "fetch");
  EXPECT_EQ(absent.error_type, "download_error");
  EXPECT_NE(absent.error_message.find("HTTP 404"), std::string::npos) << absent.error_message;

  // A pull that fails (lathe pull refuses the damaged blob): an error row with its message,
  // and nothing of it left in the cache.
  const LabRow& broken = row_of(rows, "org/broken");
  EXPECT_EQ(broken.status, "error");
  EXPECT_EQ(broken.stage, "fetch");
  EXPECT_EQ(broken.error_type, "download_error");
  EXPECT_NE(broken.error_message.find("sha256"), std::string::npos) << broken.error_message;
  EXPECT_NE(broken.log_tail.find("error:"), std::string::npos) << broken.log_tail;
  EXPECT_FALSE(fs::exists(cache() / "models--org--broken"));

  const LabRow& exotic = row_of(rows, "org/exotic");
  EXPECT_EQ(exotic.status, "unsupported");
  EXPECT_EQ(exotic.error_type, "unsupported_architecture");
  EXPECT_NE(exotic.error_message.find("NoSuchArchForCausalLM"), std::string::npos);

  // Only the small model's files were fetched: the big one was sized from its listing, the
  // exotic one never asked for.
  const std::string requests = hub_->requests();
  EXPECT_NE(requests.find("/org/small/resolve/"), std::string::npos) << requests;
  EXPECT_NE(requests.find("/api/models/org/big/revision/main"), std::string::npos) << requests;
  EXPECT_EQ(requests.find("/org/big/resolve/"), std::string::npos) << requests;
  EXPECT_EQ(requests.find("org/exotic"), std::string::npos) << requests;
  // Removed after its run (it was not in the cache before), lock files included.
  EXPECT_FALSE(fs::exists(cache() / "models--org--small"));
  EXPECT_FALSE(fs::exists(cache() / ".locks" / "models--org--small"));

  // Resumed: every row is kept, and nothing is downloaded again.
  const size_t before = requests.size();
  const auto again = sweep("out", "--resume");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(read_rows(dir_ / "out").size(), 5u);
  EXPECT_EQ(hub_->requests().size(), before);
}

TEST_F(LabDownload, KeepDownloadsKeepsThemAndWhatWasCachedStays) {
  auto r = sweep("kept", "--keep-downloads");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("0 removed after their run"), std::string::npos) << r.out;
  const fs::path snapshot = cache() / "models--org--small" / "snapshots" / kCommit;
  EXPECT_TRUE(fs::exists(snapshot / "model.safetensors"));
  EXPECT_EQ(row_of(read_rows(dir_ / "kept"), "org/small").status, "pass");
  // Already in the cache: run from there, not downloaded, and not removed by the default.
  const size_t before = hub_->requests().size();
  r = sweep("cached");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("downloaded 0 models"), std::string::npos) << r.out;
  EXPECT_EQ(row_of(read_rows(dir_ / "cached"), "org/small").status, "pass");
  EXPECT_TRUE(fs::exists(snapshot / "model.safetensors"));
  EXPECT_EQ(hub_->requests().substr(before).find("/org/small/"), std::string::npos);
}

TEST_F(LabDownload, BadOptionsAndIdsAreClearErrors) {
  // The download options need --download (usage errors, exit 2).
  auto r = run_lathe("lab run --max-download-gb 1 --out " + (dir_ / "o1").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--max-download-gb needs --download"), std::string::npos) << r.out;
  r = run_lathe("lab run --download --catalog " + (dir_ / "ranking.json").string() +
                " --max-download-gb -1 --out " + (dir_ / "o2").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--max-download-gb"), std::string::npos) << r.out;
  // A ranked entry that is not a Hub id: one line naming the file and the field, exit 1.
  write_file(dir_ / "bad.json",
             R"({"format": 1, "view": "selected", "models": [{"id": "not-an-id", "rank": 1}]})");
  r = run_lathe("lab run --download --catalog " + (dir_ / "bad.json").string() + " --hf-cache " +
                cache().string() + " --out " + (dir_ / "o3").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("bad.json models[0]: field \"id\""), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "o3" / "rows.jsonl"));
}

}  // namespace
}  // namespace lathe
