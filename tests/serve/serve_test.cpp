// The explorer's server pieces without a socket: the static file resolver's refusals, version
// ordering, and the API over a small snapshot (rankings with untested models, search, paging,
// limits, diff). tests/serve/api_test.py drives the real binary over HTTP.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <thread>

#include "lab/dataset.h"
#include "lab/report.h"
#include "models/registry.h"
#include "serve/api.h"
#include "serve/server.h"
#include "serve/store.h"
#include "support/run.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using lathe::testing::ScratchDir;
using lathe::testing::write_file;

TEST(ServeStatic, ResolvesFilesInsideTheFolderOnly) {
  ScratchDir dir("static");
  fs::create_directories(dir / "web" / "img");
  write_file(dir / "web" / "index.html", "<!doctype html>");
  write_file(dir / "web" / "app.js", "");
  write_file(dir / "web" / "img" / "logo.svg", "<svg/>");
  write_file(dir / "web" / ".secret.txt", "no");
  write_file(dir / "web" / "notes.md", "no");
  write_file(dir / "outside.txt", "secret");
  fs::create_symlink(dir / "outside.txt", dir / "web" / "leak.txt");
  fs::create_symlink(dir / "web" / "app.js", dir / "web" / "alias.js");
  const fs::path web = dir / "web";
  const fs::path root = fs::canonical(web);
  EXPECT_EQ(resolve_static(web, "/"), root / "index.html");
  EXPECT_EQ(resolve_static(web, "/?view=trending"), root / "index.html");
  EXPECT_EQ(resolve_static(web, "/app.js"), root / "app.js");
  EXPECT_EQ(resolve_static(web, "/img/logo.svg"), root / "img" / "logo.svg");
  EXPECT_EQ(resolve_static(web, "/alias.js"), root / "app.js");  // a link that stays inside
  for (const char* bad : {"/../outside.txt",
                          "/img/../../outside.txt",
                          "/%2e%2e/outside.txt",
                          "/%2E%2E/outside.txt",
                          "/..%2foutside.txt",
                          "/..%5coutside.txt",
                          "/%252e%252e/outside.txt",
                          "/..\\outside.txt",
                          "/leak.txt",
                          "/.secret.txt",
                          "/notes.md",
                          "/img",
                          "/img/",
                          "//etc/passwd",
                          "/app.js%00",
                          "/missing.js",
                          "",
                          "app.js",
                          "/%zz",
                          "/./app.js"})
    EXPECT_FALSE(resolve_static(web, bad)) << bad;
}

TEST(ServeStatic, BuiltInPageIsTheWebFolder) {
  for (const auto& e : fs::directory_iterator(fs::path(LATHE_SOURCE_DIR) / "web")) {
    std::ifstream in(e.path(), std::ios::binary);
    const std::string want{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const auto got = builtin_page_file(e.path().filename().string());
    ASSERT_TRUE(got) << e.path();
    EXPECT_EQ(*got, want) << e.path();
  }
  EXPECT_EQ(static_relative_path("/"), "index.html");
  EXPECT_EQ(static_relative_path("/app.js?x=1"), "app.js");
  EXPECT_FALSE(static_relative_path("/../index.html"));
  EXPECT_FALSE(builtin_page_file("../index.html"));
  EXPECT_FALSE(builtin_page_file("nothing.js"));
}

TEST(ServeStatic, ContentTypes) {
  EXPECT_EQ(content_type_of("a/index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_of("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_of("x.exe"), "");
}

TEST(ServeVersions, OrderNumerically) {
  EXPECT_TRUE(version_less("0.9.1", "0.10.0"));
  EXPECT_TRUE(version_less("0.1.0", "0.1.1"));
  EXPECT_FALSE(version_less("1.0.0", "1.0.0"));
  EXPECT_TRUE(version_less("5.2", "5.10"));
}

LabRow row(const std::string& id, const std::string& status, const std::string& lathe,
           const std::string& tf = "5.24.0") {
  LabRow r;
  r.model_id = id;
  r.revision = "main";
  r.task = "text-generation";
  r.architecture = id.find("qwen") != std::string::npos ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
  r.status = status;
  r.stage = "done";
  r.lathe_version = lathe;
  r.transformers_version = tf;
  r.finished_at = "2026-11-30T00:00:00.000000Z";
  return r;
}

void fill(Snapshot& s) {
  s.rows = {row("org/llama-a", "pass", "0.1.0"), row("org/qwen-b", "pass", "0.1.0"),
            row("org/llama-c", "fail", "0.1.0"), row("org/llama-a", "fail", "0.2.0"),
            row("org/qwen-b", "pass", "0.2.0"),  row("org/llama-c", "pass", "0.2.0")};
  Catalog c;
  c.view = "trending";
  c.snapshot = "2026-11-30";
  for (const char* id : {"org/qwen-b", "org/never-run", "org/llama-a"}) {
    CatalogEntry e;
    e.id = id;
    e.rank = static_cast<int64_t>(c.models.size()) + 1;
    c.models.push_back(e);
  }
  s.rankings[{"text-generation", "trending"}] = c;
  index_rows(s);
}

TEST(ServeApi, RankedViewShowsModelsWithoutRowsAsUntested) {
  Snapshot s;
  fill(s);
  const Json j = api_rows(s, {{"view", "trending"}});
  EXPECT_EQ(j["lathe"], "0.2.0");  // the newest by default
  ASSERT_EQ(j["items"].size(), 3u);
  EXPECT_EQ(j["items"][0]["model_id"], "org/qwen-b");
  EXPECT_EQ(j["items"][1]["model_id"], "org/never-run");
  EXPECT_EQ(j["items"][1]["status"], "untested");
  EXPECT_EQ(j["items"][1]["tested"], false);
  EXPECT_EQ(j["items"][2]["status"], "fail");
  EXPECT_EQ(j["counts"]["untested"], 1);
}

TEST(ServeApi, ARankedViewWithoutItsRankingListsNothing) {
  Snapshot s;
  fill(s);
  const Json j = api_rows(s, {{"view", "downloads"}, {"lathe", "0.1.0"}});
  EXPECT_TRUE(j["ranking"].is_null());
  EXPECT_EQ(j["ranking_missing"], true);
  EXPECT_EQ(j["total"], 0);
  const Json all = api_rows(s, {{"view", "all"}, {"lathe", "0.1.0"}});
  EXPECT_EQ(all["ranking_missing"], false);
  EXPECT_EQ(all["total"], 3);
  const Json q = api_rows(s, {{"view", "all"}, {"q", "LLAMA"}});
  EXPECT_EQ(q["total"], 2);
  const Json st = api_rows(s, {{"view", "all"}, {"status", "pass"}});
  EXPECT_EQ(st["total"], 2);
}

TEST(ServeApi, FiltersByParameterCount) {
  Snapshot s;
  fill(s);
  s.rows[0].parameters = 500'000'000;    // org/llama-a
  s.rows[1].parameters = 2'000'000'000;  // org/qwen-b; org/llama-c's count is unknown
  const auto ids = [&](const ApiParams& p) {
    const Json j = api_rows(s, p);
    std::vector<std::string> out;
    for (const auto& i : j["items"]) out.push_back(i["model_id"]);
    return out;
  };
  ApiParams p = {{"view", "all"}, {"lathe", "0.1.0"}};
  p["max_params"] = "1000000000";
  EXPECT_EQ(ids(p), std::vector<std::string>{"org/llama-a"});
  p["min_params"] = "1000000000";
  p["max_params"] = "";
  EXPECT_EQ(ids(p), std::vector<std::string>{"org/qwen-b"});
  p["max_params"] = "2000000000";  // the upper bound is not included
  EXPECT_TRUE(ids(p).empty());
  p = {{"view", "all"}, {"lathe", "0.1.0"}, {"sort", "params"}, {"order", "desc"}};
  EXPECT_EQ(ids(p), (std::vector<std::string>{"org/qwen-b", "org/llama-a", "org/llama-c"}));
  EXPECT_THROW(api_rows(s, {{"min_params", "-1"}}), ApiError);
}

// docs/explorer.md's /api/rows: `arch` keeps one architecture, `transformers` one version
// (`none`: rows without a reference; `any`, the default: the row that finished last per
// model), and every sort key orders by its column, `order=desc` reversed (ties by model id).
TEST(ServeApi, ArchTransformersAndEverySortKey) {
  Snapshot s;
  auto add = [&](const std::string& id, const std::string& arch, const std::string& tf,
                 const std::string& status, double seconds, int64_t memory, double speed,
                 int64_t params, int32_t cores) {
    LabRow r = row(id, status, "0.1.0", tf);
    r.architecture = arch;
    r.total_seconds = seconds;
    r.peak_memory_bytes = memory;
    r.tokens_per_second = speed;
    r.parameters = params;
    r.cores = cores;
    s.rows.push_back(r);
  };
  add("org/a", "LlamaForCausalLM", "5.24.0", "pass", 3, 300, 10, 1'000'000'000, 4);
  add("org/b", "Qwen3ForCausalLM", "5.24.0", "fail", 1, 100, 30, 300'000'000, 1);
  add("org/c", "Gemma3ForCausalLM", "", "oom", 2, 500, 20, 2'000'000'000, 2);
  add("org/d", "LlamaForCausalLM", "5.10.0", "error", 5, 200, 5, 500'000'000, 8);
  add("org/a", "LlamaForCausalLM", "5.10.0", "fail", 9, 900, 1, 1'000'000'000, 16);
  s.rows.back().finished_at = "2026-11-29T00:00:00.000000Z";  // before org/a's 5.24.0 row
  index_rows(s);
  using Ids = std::vector<std::string>;
  const auto ids = [&](ApiParams p) {
    p["view"] = "all";
    Ids out;
    const Json j = api_rows(s, p);  // not a temporary's member in the range-for
    for (const auto& i : j["items"]) out.push_back(i["model_id"]);
    return out;
  };
  EXPECT_EQ(ids({{"arch", "LlamaForCausalLM"}}), (Ids{"org/a", "org/d"}));
  EXPECT_EQ(ids({{"arch", "Qwen3ForCausalLM"}}), (Ids{"org/b"}));
  EXPECT_TRUE(ids({{"arch", "llamaforcausallm"}}).empty());
  const auto status_of_a = [&](const std::string& tf) {
    const Json j = api_rows(s, {{"view", "all"}, {"transformers", tf}});
    for (const auto& i : j["items"])
      if (i["model_id"] == "org/a") return i["status"].get<std::string>();
    return std::string("absent");
  };
  EXPECT_EQ(status_of_a("any"), "pass");  // the 5.24.0 row finished last
  EXPECT_EQ(status_of_a("5.10.0"), "fail");
  EXPECT_EQ(status_of_a("none"), "absent");
  EXPECT_EQ(ids({{"transformers", "5.10.0"}}), (Ids{"org/a", "org/d"}));
  EXPECT_EQ(ids({{"transformers", "none"}}), (Ids{"org/c"}));
  EXPECT_EQ(ids({{"transformers", "5.24.0"}, {"arch", "LlamaForCausalLM"}}), (Ids{"org/a"}));
  EXPECT_EQ(ids({}).size(), 4u);

  // Ascending orders, from the columns above (org/a's 5.24.0 row).
  const std::vector<std::pair<std::string, Ids>> ascending = {
      {"model", {"org/a", "org/b", "org/c", "org/d"}},
      {"time", {"org/b", "org/c", "org/a", "org/d"}},
      {"memory", {"org/b", "org/d", "org/a", "org/c"}},
      {"speed", {"org/d", "org/a", "org/c", "org/b"}},
      {"params", {"org/b", "org/d", "org/a", "org/c"}},
      {"cores", {"org/b", "org/c", "org/a", "org/d"}},
      {"status", {"org/a", "org/b", "org/d", "org/c"}},  // pass, fail, error, oom
      {"architecture", {"org/c", "org/a", "org/d", "org/b"}},
  };
  for (const auto& [key, want] : ascending) {
    EXPECT_EQ(ids({{"sort", key}}), want) << key;
    EXPECT_EQ(ids({{"sort", key}, {"order", "asc"}}), want) << key;
    if (key == "architecture") {  // two Llama rows tie: model id order either way
      EXPECT_EQ(ids({{"sort", key}, {"order", "desc"}}), (Ids{"org/b", "org/a", "org/d", "org/c"}));
      continue;
    }
    EXPECT_EQ(ids({{"sort", key}, {"order", "desc"}}), (Ids(want.rbegin(), want.rend()))) << key;
  }
}

TEST(ServeApi, PagesAndLimits) {
  Snapshot s;
  fill(s);
  const Json j = api_rows(s, {{"view", "all"}, {"limit", "2"}, {"offset", "2"}});
  EXPECT_EQ(j["total"], 3);
  EXPECT_EQ(j["items"].size(), 1u);
  for (const char* bad : {"0", "501", "-1", "ten", "99999999999999"}) {
    try {
      api_rows(s, {{"limit", bad}});
      ADD_FAILURE() << bad;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
    }
  }
  EXPECT_THROW(api_rows(s, {{"view", "nope"}}), ApiError);
  EXPECT_THROW(api_rows(s, {{"sort", "nope"}}), ApiError);
  EXPECT_THROW(api_answer(s, "nope", {}), ApiError);
}

TEST(ServeApi, RowDiffAndSummary) {
  Snapshot s;
  fill(s);
  const Json r = api_row(s, {{"model", "org/llama-a"}, {"lathe", "0.1.0"}});
  EXPECT_EQ(r["row"]["status"], "pass");
  EXPECT_EQ(r["history"].size(), 2u);
  EXPECT_THROW(api_row(s, {{"model", "org/none"}}), ApiError);
  const Json d = api_diff(s, {});  // a: the version before the newest, b: the newest
  EXPECT_EQ(d["a"]["lathe"], "0.1.0");
  EXPECT_EQ(d["regressions_total"], 1);
  EXPECT_EQ(d["fixes_total"], 1);
  EXPECT_EQ(d["regressions"][0]["b"]["model_id"], "org/llama-a");
  const Json sum = api_summary(s, {{"lathe", "0.1.0"}});
  EXPECT_EQ(sum["rows"], 3);
  EXPECT_EQ(sum["coverage"]["passing"], 2);
}

TEST(ServeApi, SummaryCoversTheRankings) {
  Snapshot s;
  fill(s);
  const Json a = api_summary(s, {{"lathe", "0.2.0"}});
  ASSERT_EQ(a["rankings"].size(), 1u);
  EXPECT_EQ(a["rankings"][0]["view"], "trending");
  EXPECT_EQ(a["rankings"][0]["models"], 3);
  EXPECT_EQ(a["rankings"][0]["run"], 2);     // org/never-run has no row
  EXPECT_EQ(a["rankings"][0]["passed"], 1);  // org/llama-a fails in 0.2.0
  EXPECT_EQ(a["transformers_versions"], Json::array({"5.24.0"}));
  EXPECT_EQ(api_summary(s, {{"lathe", "0.1.0"}})["rankings"][0]["passed"], 2);
}

// /api/coverage is the report's ranking coverage over the selected rows, and fixture coverage
// the rows of tiny fixtures alone; a ranked model of an unimplemented architecture lists as
// unsupported without a row.
TEST(ServeApi, CoverageIsTheReportsAndUnimplementedRankedModelsAreUnsupported) {
  Snapshot s;
  fill(s);
  Catalog& c = s.rankings[{"text-generation", "trending"}];
  c.models[0].architecture = "Qwen3ForCausalLM";
  c.models[1].architecture = "NoSuchArchForCausalLM";
  c.models[2].architecture = "LlamaForCausalLM";
  s.rows[1].source = "tiny";  // org/qwen-b in 0.1.0
  const Json cov = api_coverage(s, {{"lathe", "0.1.0"}});
  ASSERT_EQ(cov["rankings"].size(), 1u);
  const std::vector<LabRow> selected = {s.rows[0], s.rows[1], s.rows[2]};
  const Json want = ranking_coverage_json(
      c, selected, [](const std::string& a) { return find_architecture(a) != nullptr; });
  EXPECT_EQ(cov["rankings"][0], want);
  EXPECT_EQ(cov["rankings"][0]["percent"]["models_implemented"], "66.7%");
  EXPECT_EQ(cov["rankings"][0]["percent"]["models_pass"], "66.7%");  // qwen-b, llama-a in 0.1.0
  EXPECT_EQ(cov["rankings"][0]["unimplemented"][0]["architecture"], "NoSuchArchForCausalLM");
  EXPECT_EQ(cov["rows"]["rows"], 3);
  EXPECT_EQ(cov["fixtures"]["rows"], 1);
  EXPECT_EQ(cov["fixtures"]["passing"], 1);
  EXPECT_EQ(cov["fixtures"]["percent"], "100.0%");
  EXPECT_EQ(api_coverage(s, {{"task", "image-text-to-text"}})["rankings"].size(), 0u);

  const Json rows = api_rows(s, {{"view", "trending"}});
  EXPECT_EQ(rows["items"][1]["model_id"], "org/never-run");
  EXPECT_EQ(rows["items"][1]["status"], "unsupported");
  EXPECT_EQ(rows["items"][1]["error_type"], "unsupported_architecture");
  EXPECT_EQ(rows["items"][1]["tested"], false);
  EXPECT_EQ(rows["counts"]["unsupported"], 1);
  EXPECT_EQ(rows["counts"]["untested"], 0);
}

// The explorer answers requests on several threads over one snapshot, whose caches start over
// when full. A request must hold what it reads from them: once, a coverage answer iterated a
// selection that another request's eviction had freed (found by AddressSanitizer in the
// browser test). Many threads, selections that fill the cache, and answers checked each time.
TEST(ServeApi, ConcurrentRequestsSurviveCacheEvictions) {
  Snapshot s;
  constexpr int kRows = 1000;
  for (int i = 0; i < kRows; ++i)
    s.rows.push_back(row("org/llama-" + std::to_string(i), "pass", "0.1.0"));
  index_rows(s);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        // Every third request selects all rows; the others select none, each under its own
        // key, so the caches fill and start over while the large selections are read.
        const int k = t * 1000 + i;
        const bool all = k % 3 == 0;
        const std::string tf = all ? (k % 2 ? "any" : "5.24.0") : "9." + std::to_string(k);
        const int want = all ? kRows : 0;
        if (api_coverage(s, {{"transformers", tf}})["rows"]["rows"] != want) ++wrong;
        if (api_diff(s, {{"b_transformers", tf}})["unchanged"] != want) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ServeStore, NoticesNewFiles) {
  ScratchDir dir("store");
  DataStore store(dir.path(), dir / "catalog");
  EXPECT_EQ(store.get()->rows.size(), 0u);
  EXPECT_FALSE(store.refresh());
  write_file(dir / "broken.parquet", "not parquet");
  EXPECT_TRUE(store.refresh());
  EXPECT_EQ(store.get()->errors.size(), 1u);
}

TEST(ServeStore, RereadsOnlyChangedFiles) {
  ScratchDir dir("store-incremental");
  write_parquet({row("org/a", "pass", "0.1.0")}, dir / "a.parquet");
  write_parquet({row("org/b", "pass", "0.1.0")}, dir / "b.parquet");
  DataStore store(dir.path(), dir / "catalog");
  EXPECT_EQ(store.get()->files_read, 2u);
  EXPECT_EQ(store.get()->rows.size(), 2u);

  write_parquet({row("org/c", "fail", "0.1.0")}, dir / "c.parquet");
  ASSERT_TRUE(store.refresh());
  EXPECT_EQ(store.get()->files_read, 1u);
  EXPECT_EQ(store.get()->rows.size(), 3u);

  // A file rewritten with other rows is read again; the others are kept as they were read.
  write_parquet({row("org/a", "fail", "0.1.0"), row("org/a2", "pass", "0.1.0")}, dir / "a.parquet");
  ASSERT_TRUE(store.refresh());
  auto snap = store.get();
  EXPECT_EQ(snap->files_read, 1u);
  ASSERT_EQ(snap->rows.size(), 4u);
  EXPECT_EQ(snap->rows[0].model_id, "org/a");
  EXPECT_EQ(snap->rows[0].status, "fail");

  fs::remove(dir / "b.parquet");
  ASSERT_TRUE(store.refresh());
  snap = store.get();
  EXPECT_EQ(snap->files_read, 0u);
  EXPECT_EQ(snap->rows.size(), 3u);
  EXPECT_EQ(snap->files.size(), 2u);
  EXPECT_FALSE(store.refresh());
}

// Requests read snapshots while a rescan replaces them (files appear as a sweep publishes):
// each reader sees whole snapshots, never fewer rows than before, and answers from them.
TEST(ServeStore, ReadersSeeWholeSnapshotsWhileFilesAppear) {
  ScratchDir dir("store-concurrent");
  DataStore store(dir.path(), dir / "catalog");
  constexpr int kFiles = 8;
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      size_t seen = 0;
      while (!done.load()) {
        const auto snap = store.get();
        const size_t n = snap->rows.size();
        if (n < seen || n > kFiles || snap->keys.size() != n) ++wrong;
        seen = n;
        if (api_coverage(*snap, {{"lathe", "0.1.0"}})["rows"]["rows"] != static_cast<int>(n))
          ++wrong;
      }
    });
  for (int i = 0; i < kFiles; ++i) {
    write_parquet({row("org/m" + std::to_string(i), "pass", "0.1.0")},
                  dir / ("f" + std::to_string(i) + ".parquet"));
    store.refresh();
  }
  done = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(store.get()->rows.size(), static_cast<size_t>(kFiles));
}

}  // namespace
}  // namespace lathe
