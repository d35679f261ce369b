// The lab's pieces: rows as JSON and Parquet, the journal, process isolation, the
// classification of dead processes, catalogs, the reference cache, report and diff.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "core/error.h"
#include "io/durable.h"
#include "lab/catalog.h"
#include "lab/dataset.h"
#include "lab/reference.h"
#include "lab/report.h"
#include "lab/runner.h"
#include "lab/subprocess.h"
#include "support/run.h"

namespace lathe {
namespace {

using lathe::testing::read_file;
using lathe::testing::ScratchDir;
using lathe::testing::write_file;

LabRow sample_row(const std::string& id, const std::string& status) {
  LabRow r;
  r.model_id = id;
  r.revision = "main";
  r.task = "text-generation";
  r.architecture = "LlamaForCausalLM";
  r.source = "hub";
  r.status = status;
  r.stage = status == "pass" ? "done" : "load";
  r.error_type = status == "pass" ? "" : "load_error";
  r.error_message =
      status == "pass" ? "" : "model.safetensors: truncated <script>alert(1)</script>";
  r.signal = status == "error" ? std::optional<int32_t>(11) : std::nullopt;
  r.exit_code = 0;
  r.peak_memory_bytes = 123456789;
  r.memory_limit_bytes = int64_t{8} << 30;
  r.timeout_seconds = 600;
  r.parameters = 135000000;
  r.weight_bytes = 540000000;
  r.stage_seconds = {{"fetch", 0.001}, {"inspect", 0.002}, {"load", 1.5}};
  r.total_seconds = 2.25;
  r.tokens_per_second = 17.5;
  r.reference_source = "cache";
  r.prompt_ids = {1, 2, 3};
  r.reference_tokens = {4, 5, 6};
  r.generated_tokens = {4, 5, 7};
  r.first_mismatch = 2;
  r.logits_nmse = 1.5e-7;
  r.logits_max_abs_error = 0.01;
  r.top1_agreement = 0.9;
  r.first_diverging_layer = "layer.3.out";
  r.judge_verdict = "tokens differ from step 2";
  r.lathe_version = "0.1.0";
  r.lathe_commit = "abc";
  r.transformers_version = "5.24.0";
  r.torch_version = "2.15.0";
  r.stack = {{"lathe", "0.1.0"}, {"icu", "72.1"}};
  r.extra_packages = {"einops==0.8"};
  r.run_script = "build/lathe generate MODEL --prompt-ids '[1, 2, 3]'\n";
  r.reference_script = "python tools/reference/bridge.py MODEL";
  r.catalog_snapshot = "2026-11-30";
  r.started_at = "2026-11-30T06:01:02.123456Z";
  r.finished_at = "2026-11-30T06:01:04.373456Z";
  r.host = "vm";
  return r;
}

TEST(LabRow, JsonRoundTripKeepsEveryField) {
  const LabRow r = sample_row("org/model", "error");
  const Json j = row_to_json(r);
  EXPECT_EQ(row_to_json(row_from_json(j, "test")), j);
}

TEST(LabRow, UnknownStatusIsAnErrorNamingTheField) {
  Json j = row_to_json(sample_row("org/model", "pass"));
  j["status"] = "great";
  try {
    row_from_json(j, "rows.jsonl line 3");
    FAIL() << "accepted an unknown status";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows.jsonl line 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("status"), std::string::npos) << e.what();
  }
}

// Integers out of their field's range used to wrap silently (cores 2^32 + 1 read as 1).
TEST(LabRow, OutOfRangeIntegersAreErrorsNotWrapped) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, Json>>{{"cores", Json(uint64_t{4294967297})},
                                                 {"signal", Json(int64_t{-3000000000})},
                                                 {"weight_bytes", Json(uint64_t{1} << 63)},
                                                 {"prompt_ids", Json::array({1, 4294967296})}}) {
    Json j = row_to_json(sample_row("org/model", "pass"));
    j[key] = value;
    try {
      row_from_json(j, "rows.jsonl line 2");
      FAIL() << key << " = " << value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("field \"" + key + "\""), std::string::npos) << e.what();
    }
  }
  Json j = row_to_json(sample_row("org/model", "pass"));
  j["cores"] = 2147483647;
  EXPECT_EQ(row_from_json(j, "rows.jsonl line 2").cores, 2147483647);
}

TEST(Dataset, ParquetRoundTripKeepsEveryFieldAndNulls) {
  ScratchDir dir("parquet");
  std::vector<LabRow> rows = {sample_row("a/one", "pass"), sample_row("b/two", "error")};
  rows[0].first_mismatch.reset();
  rows[0].logits_nmse.reset();
  rows[0].first_diverging_layer.reset();
  rows[0].started_at.clear();
  const auto file = dir / "x.parquet";
  write_parquet(rows, file);
  const auto back = read_parquet(file);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(row_to_json(back[i]).dump(1), row_to_json(rows[i]).dump(1));
}

// Times before 1970 used to print a negative fraction ("1970-01-01T00:00:00.-750000Z"), and a
// year beyond 9999 overflowed int64 on the way to microseconds.
TEST(Dataset, TimestampsBefore1970AndOutOfRangeYears) {
  ScratchDir dir("times");
  std::vector<LabRow> rows = {sample_row("a/one", "pass"), sample_row("b/two", "pass")};
  rows[0].started_at = "1969-12-31T23:59:59.250000Z";
  rows[1].started_at = "999999999-01-01T00:00:00.000000Z";
  write_parquet(rows, dir / "x.parquet");
  const auto back = read_parquet(dir / "x.parquet");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].started_at, "1969-12-31T23:59:59.250000Z");
  EXPECT_EQ(back[1].started_at, "1970-01-01T00:00:00.000000Z");  // unreadable: the epoch
}

TEST(Dataset, OneFilePerVersionPair) {
  ScratchDir dir("pairs");
  std::vector<LabRow> rows = {sample_row("a", "pass"), sample_row("b", "pass"),
                              sample_row("c", "untested")};
  rows[2].transformers_version.clear();
  const auto files = write_dataset(rows, dir.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(read_parquet(dir / "lathe-0.1.0_transformers-5.24.0.parquet").size(), 2u);
  EXPECT_EQ(read_parquet(dir / "lathe-0.1.0_transformers-none.parquet").size(), 1u);
}

TEST(Dataset, CorruptParquetIsAnErrorNamingTheFile) {
  ScratchDir dir("badpq");
  write_file(dir / "bad.parquet", "PAR1 this is not a parquet file PAR1");
  try {
    read_parquet(dir / "bad.parquet");
    FAIL() << "read a corrupt file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.parquet"), std::string::npos) << e.what();
  }
}

TEST(Journal, CutShortLastLineIsDroppedAndRepaired) {
  ScratchDir dir("journal");
  const auto file = dir / "rows.jsonl";
  {
    AppendLog log(file);
    log.append(row_to_json(sample_row("a", "pass")).dump());
    log.append(row_to_json(sample_row("b", "fail")).dump());
  }
  const std::string whole = read_file(file);
  write_file(file, whole + row_to_json(sample_row("c", "pass")).dump().substr(0, 40));
  EXPECT_EQ(read_journal(file, false).size(), 2u);
  EXPECT_EQ(read_journal(file, true).size(), 2u);
  EXPECT_EQ(read_file(file), whole);  // the partial line is gone
  AppendLog(file).append(row_to_json(sample_row("c", "pass")).dump());
  const auto rows = read_journal(file, false);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].model_id, "c");
}

TEST(Durable, AtomicWriteReplacesWholeFile) {
  ScratchDir dir("atomic");
  write_file_atomic(dir / "f.json", "first");
  write_file_atomic(dir / "f.json", "second");
  EXPECT_EQ(read_file(dir / "f.json"), "second");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += !e.path().empty();
  EXPECT_EQ(files, 1u);  // no temporary left behind
}

TEST(Subprocess, TimeoutKillsTheWholeGroup) {
  ScratchDir dir("timeout");
  ProcessOptions p;
  // The child starts a grandchild that would outlive it; the group kill must take both.
  p.argv = {"/bin/sh", "-c", "sleep 30 & echo started; wait"};
  p.log_file = dir / "log";
  p.timeout_seconds = 0.5;
  const ProcessResult r = run_process(p);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_LT(r.seconds, 10);
  EXPECT_NE(read_file(dir / "log").find("started"), std::string::npos);
}

TEST(Subprocess, ReportsExitCodeAndSignal) {
  ProcessOptions p;
  p.argv = {"/bin/sh", "-c", "exit 3"};
  EXPECT_EQ(run_process(p).exit_code, 3);
  p.argv = {"/bin/sh", "-c", "kill -SEGV $$"};
  const ProcessResult r = run_process(p);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_FALSE(r.exit_code);
}

TEST(Subprocess, MemoryLimitMakesLargeAllocationsFail) {
  ScratchDir dir("memlimit");
  ProcessOptions p;
  // Python's bytearray of 2 GiB cannot be had under a 512 MiB address-space limit.
  p.argv = {"python3", "-c",
            "import sys\ntry:\n  b = bytearray(2 << 30)\nexcept MemoryError:\n  sys.exit(42)\n"};
  p.log_file = dir / "log";
  p.memory_limit_bytes = int64_t{512} << 20;
  EXPECT_EQ(run_process(p).exit_code, 42) << read_file(dir / "log");
  p.memory_limit_bytes = 0;
  EXPECT_EQ(run_process(p).exit_code, 0) << read_file(dir / "log");
}

TEST(DeadProcess, ClassifiedByHowItEnded) {
  LabRow base = sample_row("m", "pass");
  base.memory_limit_bytes = int64_t{1} << 30;
  base.timeout_seconds = 5;
  LabRow t = row_for_dead_process(base, "generate", true, SIGKILL, std::nullopt, 1 << 20, 5.1);
  EXPECT_EQ(t.status, "timeout");
  EXPECT_EQ(t.stage, "generate");
  LabRow o =
      row_for_dead_process(base, "load", false, SIGKILL, std::nullopt, int64_t{1000} << 20, 2);
  EXPECT_EQ(o.status, "oom");
  LabRow c = row_for_dead_process(base, "load", false, SIGSEGV, std::nullopt, 1 << 20, 2);
  EXPECT_EQ(c.status, "error");
  EXPECT_EQ(c.error_type, "crash");
  EXPECT_EQ(c.signal, SIGSEGV);
  LabRow x = row_for_dead_process(base, "", false, std::nullopt, 2, 1 << 20, 0.1);
  EXPECT_EQ(x.status, "error");
  EXPECT_EQ(x.stage, "fetch");
  EXPECT_EQ(x.exit_code, 2);
}

TEST(Catalog, ReadsEntriesAndResolvesPathsFromItsFolder) {
  ScratchDir dir("catalog");
  write_file(dir / "c.json", R"({"format": 1, "task": "text-generation", "view": "selected",
    "snapshot": "2026-11-30", "models": [
      {"id": "org/a", "rank": 1, "architecture": "LlamaForCausalLM"},
      {"id": "local/b", "revision": "local", "path": "models/b", "timeout_seconds": 5,
       "memory_limit_mb": 100, "inject": "hang", "prompt_ids": [1, 2]}]})");
  const Catalog c = read_catalog(dir / "c.json");
  ASSERT_EQ(c.models.size(), 2u);
  EXPECT_EQ(c.view, "selected");
  EXPECT_EQ(c.models[0].rank, 1);
  EXPECT_EQ(c.models[0].task, "text-generation");
  EXPECT_EQ(c.models[1].path, dir / "models/b");
  EXPECT_EQ(c.models[1].memory_limit_bytes, int64_t{100} << 20);
  EXPECT_EQ(c.models[1].prompt_ids, (std::vector<int32_t>{1, 2}));
  write_catalog(c, dir / "again.json");
  EXPECT_EQ(catalog_to_json(read_catalog(dir / "again.json")), catalog_to_json(c));
}

TEST(Catalog, MalformedEntriesNameTheField) {
  ScratchDir dir("badcatalog");
  const std::pair<const char*, const char*> cases[] = {
      {R"({"models": [{"rank": 1}]})", "id"},
      {R"({"models": [{"id": "a", "inject": "explode"}]})", "inject"},
      {R"({"models": [{"id": "a", "fixture": "f", "inject": "config:rope_theta"}]})", "inject"},
      {R"({"models": [{"id": "a", "fixture": "f", "inject": "config:rope_theta+x"}]})", "inject"},
      {R"({"models": [{"id": "a", "fixture": "f", "inject": "kv:1.5"}]})", "inject"},
      {R"({"models": [{"id": "a", "inject": "kv:1"}]})", "fixture"},
      {R"({"models": [{"id": "a", "prompt_ids": [-1]}]})", "prompt_ids"},
      {R"({"models": [{"id": "a", "memory_limit_mb": -5}]})", "memory_limit_mb"},
      {R"({"models": {}})", "models"},
      {R"({"format": 9, "models": []})", "format"},
  };
  for (const auto& [text, field] : cases) {
    write_file(dir / "c.json", text);
    try {
      read_catalog(dir / "c.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("c.json"), std::string::npos) << e.what();
    }
  }
}

TEST(Catalog, NumericFaultsParse) {
  using K = NumericFault::Kind;
  EXPECT_EQ(numeric_fault("").kind, K::None);
  EXPECT_EQ(numeric_fault("hang").kind, K::None);
  const NumericFault w = numeric_fault("perturb:model.norm.weight");
  EXPECT_EQ(w.kind, K::Weight);
  EXPECT_EQ(w.target, "model.norm.weight");
  const NumericFault rope = numeric_fault("config:rope_theta+1");
  EXPECT_EQ(rope.kind, K::Config);
  EXPECT_EQ(rope.target, "rope_theta");
  EXPECT_EQ(rope.factor, 1.0);
  EXPECT_EQ(rope.offset, 1.0);
  const NumericFault eps = numeric_fault("config:rms_norm_eps*10");
  EXPECT_EQ(eps.target, "rms_norm_eps");
  EXPECT_EQ(eps.factor, 10.0);
  EXPECT_EQ(eps.offset, 0.0);
  const NumericFault kv = numeric_fault("kv:3");
  EXPECT_EQ(kv.kind, K::Cache);
  EXPECT_EQ(kv.layer, 3);
  EXPECT_THROW(numeric_fault("config:*2"), Error);
  EXPECT_THROW(numeric_fault("kv:-1"), Error);
}

TEST(Catalog, FindsSnapshotsInTheHuggingFaceCacheLayout) {
  ScratchDir dir("hfcache");
  const auto repo = dir / "models--org--name";
  std::filesystem::create_directories(repo / "snapshots" / "abc123");
  std::filesystem::create_directories(repo / "refs");
  write_file(repo / "refs" / "main", "abc123\n");
  write_file(repo / "snapshots" / "abc123" / "config.json", "{}");
  EXPECT_EQ(find_in_hf_cache(dir.path(), "org/name", "main"), repo / "snapshots" / "abc123");
  EXPECT_EQ(find_in_hf_cache(dir.path(), "org/other", "main"), std::nullopt);
  const Catalog c = default_catalog(dir / "no-fixtures", {}, dir.path());
  ASSERT_EQ(c.models.size(), 1u);
  EXPECT_EQ(c.models[0].id, "org/name");
  EXPECT_EQ(c.models[0].revision, "abc123");
}

TEST(ReferenceCache, KeyedByModelAndPromptAndNewestVersionWins) {
  ScratchDir dir("refcache");
  const auto k1 = reference_key_dir(dir.path(), "aaaa", {1, 2, 3}, 32);
  EXPECT_NE(k1, reference_key_dir(dir.path(), "aaaa", {1, 2, 4}, 32));
  EXPECT_NE(k1, reference_key_dir(dir.path(), "bbbb", {1, 2, 3}, 32));
  EXPECT_NE(k1, reference_key_dir(dir.path(), "aaaa", {1, 2, 3}, 16));
  EXPECT_FALSE(lookup_reference(k1));
  const std::string fixture = lathe::testing::fixture_dir("llama_tied_gqa");
  import_golden(fixture, k1);
  auto ref = lookup_reference(k1);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->source, "cache");
  EXPECT_EQ(ref->transformers_version, "5.24.0");
  EXPECT_EQ(ref->greedy_tokens.size(), 32u);
  EXPECT_EQ(ref->logits.dim(0), static_cast<int64_t>(ref->teacher_forced_ids.size()));
  EXPECT_FALSE(ref->hidden.empty());
  // A newer transformers' entry is preferred over an older one.
  std::filesystem::copy(ref->dir, k1 / "transformers-5.100.0_torch-2.15.0",
                        std::filesystem::copy_options::recursive);
  std::filesystem::copy(ref->dir, k1 / "transformers-5.3.0_torch-2.15.0",
                        std::filesystem::copy_options::recursive);
  EXPECT_EQ(lookup_reference(k1)->dir.filename(), "transformers-5.100.0_torch-2.15.0");
}

// The disk fills while the reference cache stores an entry (RLIMIT_FSIZE below the goldens'
// size, in a child process): a clear error naming the cache, no entry and no temporary folder
// left, and the next try stores the entry whole.
TEST(ReferenceCache, FullDiskLeavesNoEntryAndTheNextTryStoresIt) {
  ScratchDir dir("refcache-full");
  const auto key = reference_key_dir(dir.path(), "cccc", {1, 2, 3}, 32);
  const std::string fixture = lathe::testing::fixture_dir("llama_tied_gqa");
  ASSERT_GT(std::filesystem::file_size(fixture + "/goldens.safetensors"), 16u << 10);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{16 << 10, 16 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 4;
    try {
      import_golden(fixture, key);
      code = 0;
    } catch (const Error& e) {
      const std::string what = e.what();
      code = what.find(key.string()) != std::string::npos &&
                     what.find("cannot store the reference") != std::string::npos
                 ? 1
                 : 2;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "0: stored, 1: clear error, 2: unclear, 3: other throw";
  EXPECT_FALSE(lookup_reference(key));
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();

  import_golden(fixture, key);
  const auto ref = lookup_reference(key);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->greedy_tokens.size(), 32u);
}

TEST(Report, CoverageCountsArchitecturesWithAPass) {
  std::vector<LabRow> rows = {sample_row("a", "pass"), sample_row("b", "fail"),
                              sample_row("c", "unsupported")};
  rows[2].architecture = "FooForCausalLM";
  const Json j = report_json(rows);
  EXPECT_EQ(j["rows"], 3);
  EXPECT_EQ(j["by_status"]["pass"], 1);
  EXPECT_EQ(j["by_status"]["unsupported"], 1);
  EXPECT_EQ(j["coverage"]["architectures"], 2);
  EXPECT_EQ(j["coverage"]["passing"], 1);
  const std::string md = report_markdown(rows);
  EXPECT_NE(md.find("1 of 2 architectures pass"), std::string::npos) << md;
}

// A ranking's coverage as the reference system counts it: models and distinct architectures
// implemented (from the catalog's architecture field), verified pass by the rows, and the
// unimplemented architectures most used first; a model of no known architecture apart.
TEST(Report, RankingCoverageCountsImplementedAndPassingArchitectures) {
  Catalog c;
  c.task = "image-text-to-text";
  c.view = "selected";
  c.snapshot = "2026-11-30";
  const std::vector<std::pair<std::string, std::string>> models = {
      {"org/a1", "AForCausalLM"}, {"org/a2", "AForCausalLM"}, {"org/b", "BForCausalLM"},
      {"org/x1", "XModel"},       {"org/x2", "XModel"},       {"org/y", "YModel"},
      {"org/unknown", ""}};
  for (const auto& [id, arch] : models) {
    CatalogEntry e;
    e.id = id;
    e.architecture = arch;
    c.models.push_back(e);
  }
  std::vector<LabRow> rows = {sample_row("org/a2", "pass"), sample_row("org/b", "fail"),
                              sample_row("org/unknown", "pass"), sample_row("other", "pass")};
  const auto implemented = [](const std::string& a) { return a.ends_with("ForCausalLM"); };
  const Json j = ranking_coverage_json(c, rows, implemented);
  EXPECT_EQ(j["models"], 7);
  EXPECT_EQ(j["models_unknown_architecture"], 1);
  EXPECT_EQ(j["models_implemented"], 3);
  EXPECT_EQ(j["models_pass"], 2);  // org/a2 and org/unknown
  EXPECT_EQ(j["architectures"], 4);
  EXPECT_EQ(j["architectures_implemented"], 2);
  EXPECT_EQ(j["architectures_pass"], 1);
  ASSERT_EQ(j["unimplemented"].size(), 2u);
  EXPECT_EQ(j["unimplemented"][0]["architecture"], "XModel");
  EXPECT_EQ(j["unimplemented"][0]["models"], 2);
  EXPECT_EQ(j["unimplemented"][1]["architecture"], "YModel");
  const std::string md = report_markdown(rows, {j});
  EXPECT_NE(md.find("| image-text-to-text / selected | 2026-11-30 | 7 | 42.9% | 28.6% | 4 | "
                    "50.0% | 25.0% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("XModel (2), YModel (1)"), std::string::npos) << md;
  // The rows' own coverage comes after, labelled as such.
  EXPECT_LT(md.find("Coverage of the rankings"), md.find("Coverage of the rows' own"));
}

TEST(Diff, FindsRegressionsFixesAndModelsOnOneSide) {
  const std::vector<LabRow> a = {sample_row("x", "pass"), sample_row("y", "fail"),
                                 sample_row("z", "pass"), sample_row("only-a", "pass")};
  const std::vector<LabRow> b = {sample_row("x", "error"), sample_row("y", "pass"),
                                 sample_row("z", "pass"), sample_row("only-b", "pass")};
  const Json d = diff_json(a, b);
  ASSERT_EQ(d["regressions"].size(), 1u);
  EXPECT_EQ(d["regressions"][0]["a"]["model_id"], "x");
  ASSERT_EQ(d["fixes"].size(), 1u);
  EXPECT_EQ(d["fixes"][0]["b"]["model_id"], "y");
  EXPECT_EQ(d["unchanged"], 1);
  EXPECT_EQ(d["only_in_a"].size(), 1u);
  EXPECT_EQ(d["only_in_b"].size(), 1u);
}

}  // namespace
}  // namespace lathe
