// `lathe lab` end to end through the binary: the bundled sweep, deliberately broken entries,
// kill and resume, shard and merge, the Parquet files read by pyarrow, pandas and DuckDB,
// and catalog refresh against a loopback stand-in for the Hub's listing API.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "core/sanitizers.h"
#include "io/json.h"
#include "lab/runner.h"
#include "lab/tolerances.h"
#include "support/run.h"

extern char** environ;

namespace lathe {
namespace {

namespace fs = std::filesystem;
using lathe::testing::fixture_dir;
using lathe::testing::read_file;
using lathe::testing::run_lathe;
using lathe::testing::run_lathe_with_full_disk;
using lathe::testing::ScratchDir;
using lathe::testing::write_file;

size_t fixture_count() {
  size_t n = 0;
  for (const auto& e :
       fs::directory_iterator(std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/tiny"))
    n += fs::exists(e.path() / "goldens.json");
  return n;
}

const LabRow& find_row(const std::vector<LabRow>& rows, const std::string& id) {
  for (const auto& r : rows)
    if (r.model_id == id) return r;
  throw std::runtime_error("no row for " + id);
}

// A catalog file of the given models (JSON objects as text).
void write_catalog_file(const fs::path& file, const std::vector<std::string>& models) {
  std::string text = R"({"format": 1, "task": "text-generation", "view": "local", "models": [)";
  for (size_t i = 0; i < models.size(); ++i) text += (i ? "," : "") + models[i];
  write_file(file, text + "]}");
}

std::string tiny(const std::string& name, const std::string& extra = "") {
  return R"({"id": "lathe-tiny/)" + name + R"(", "revision": "fixture", "fixture": ")" +
         fixture_dir(name) + "\"" + extra + "}";
}

TEST(LabSweep, BundledCatalogPassesAndIsReadableByPyarrowPandasDuckdb) {
  ScratchDir dir("bundled");
  const auto r = run_lathe("lab run --quiet --json --out " + (dir / "out").string() +
                           " --reference-python none --reference-cache " + (dir / "ref").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json report = parse_json(r.out, "report");
  const size_t n = fixture_count();
  EXPECT_EQ(report["rows"], n);
  EXPECT_EQ(report["by_status"]["pass"], n) << r.out;
  EXPECT_EQ(report["coverage"]["share"], 1.0);
  const auto rows = read_rows(dir / "out" / "dataset");
  ASSERT_EQ(rows.size(), n);
  for (const auto& row : rows) {
    EXPECT_EQ(row.status, "pass") << row.model_id << ": " << row.judge_verdict;
    EXPECT_EQ(row.reference_source, "cache");
    EXPECT_EQ(row.generated_tokens, row.reference_tokens) << row.model_id;
    EXPECT_LE(*row.logits_nmse, kF32Nmse) << row.model_id;
    EXPECT_FALSE(row.first_diverging_layer) << row.model_id;
    ASSERT_TRUE(row.decode_logits_nmse) << row.model_id << ": no decode steps compared";
    EXPECT_LE(*row.decode_logits_nmse, kF32Nmse) << row.model_id;
    EXPECT_FALSE(row.decode_first_diverging_step) << row.model_id;
    // Compiled, the lab's default: the modules used, and the command that fetches them.
    EXPECT_GT(row.compile_seconds, 0) << row.model_id;
    EXPECT_EQ(row.compile_cache_key.rfind("MODULE_", 0), 0u) << row.model_id;
    EXPECT_EQ(row.compile_cache_fetch.rfind("build/lathe cache fetch --from ", 0), 0u);
    EXPECT_NE(row.compile_cache_fetch.find(" --key " + row.compile_cache_key.substr(0, 20)),
              std::string::npos);
    EXPECT_NE(row.run_script.find(" --compiled"), std::string::npos);
    EXPECT_GT(row.peak_memory_bytes, 0);
    EXPECT_NE(row.run_script.find("lathe generate"), std::string::npos);
    EXPECT_EQ(row.stage_seconds.size(), 9u) << row.model_id;  // fetch .. done
  }
  const std::string cmd = std::string(LATHE_PYTHON) + " " + LATHE_SOURCE_DIR +
                          "/tests/lab/read_dataset.py " + (dir / "out" / "dataset").string() +
                          " --rows " + std::to_string(n) + " --passed " + std::to_string(n) +
                          " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  char buf[4096];
  std::string out;
  for (size_t k; (k = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
  EXPECT_EQ(pclose(p), 0) << out;
}

TEST(LabSweep, BrokenEntriesGetTheRightStatusAndStage) {
  ScratchDir dir("broken");
  // A corrupt checkpoint: a tiny model whose safetensors file is cut short.
  ASSERT_EQ(run_lathe("tiny build " + fixture_dir("qwen3_tied") + " " + (dir / "corrupt").string())
                .exit_code,
            0);
  const auto st = dir / "corrupt" / "model.safetensors";
  fs::resize_file(st, fs::file_size(st) / 2);
  // An unsupported architecture.
  fs::create_directories(dir / "unsupported");
  write_file(dir / "unsupported" / "config.json", R"({"architectures": ["FooForCausalLM"]})");
  // A model without a reference: a copy of a tiny checkpoint under another name.
  ASSERT_EQ(
      run_lathe("tiny build " + fixture_dir("llama_tied_gqa") + " " + (dir / "noref").string())
          .exit_code,
      0);
  write_catalog_file(
      dir / "catalog.json",
      {tiny("llama_tied_gqa"),
       R"({"id": "local/corrupt", "revision": "local", "path": "corrupt", "prompt_ids": [1, 2]})",
       R"({"id": "local/unsupported", "revision": "local", "path": "unsupported"})",
       R"({"id": "local/noref", "revision": "local", "path": "noref", "prompt_ids": [5, 6, 7]})",
       tiny("qwen3_tied", R"(, "id": "x/hang", "inject": "hang", "timeout_seconds": 2)"),
       tiny("qwen3_tied", R"(, "id": "x/oom", "inject": "oom", "memory_limit_mb": 1024)"),
       tiny("qwen3_tied", R"(, "id": "x/crash", "inject": "crash")"),
       tiny("qwen3_tied", R"(, "id": "x/alloc", "inject": "alloc")"),
       R"({"id": "local/too-big", "revision": "local", "path": "big", "memory_limit_mb": 1})"});
  // A checkpoint whose 3 MiB of weights cannot fit its 1 MiB limit: the plan refuses it.
  fs::create_directories(dir / "big");
  fs::copy_file(dir / "noref" / "config.json", dir / "big" / "config.json");
  write_file(dir / "big" / "model.safetensors", "");
  fs::resize_file(dir / "big" / "model.safetensors", 3 << 20);
  const auto r = run_lathe("lab run --quiet --catalog " + (dir / "catalog.json").string() +
                           " --out " + (dir / "out").string() +
                           " --reference-python none --reference-cache " + (dir / "ref").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto rows = read_rows(dir / "out");
  ASSERT_EQ(rows.size(), 9u);
  EXPECT_EQ(find_row(rows, "lathe-tiny/llama_tied_gqa").status, "pass");

  const LabRow& corrupt = find_row(rows, "local/corrupt");
  EXPECT_EQ(corrupt.status, "error");
  EXPECT_EQ(corrupt.stage, "load");
  EXPECT_NE(corrupt.error_message.find("model.safetensors"), std::string::npos)
      << corrupt.error_message;

  const LabRow& unsupported = find_row(rows, "local/unsupported");
  EXPECT_EQ(unsupported.status, "unsupported");
  EXPECT_EQ(unsupported.stage, "inspect");
  EXPECT_NE(unsupported.error_message.find("FooForCausalLM"), std::string::npos);

  const LabRow& noref = find_row(rows, "local/noref");
  EXPECT_EQ(noref.status, "untested");
  EXPECT_EQ(noref.stage, "reference");
  EXPECT_EQ(noref.reference_source, "unavailable");
  EXPECT_EQ(noref.generated_tokens.size(), 32u);

  const LabRow& hang = find_row(rows, "x/hang");
  EXPECT_EQ(hang.status, "timeout");
  EXPECT_EQ(hang.stage, "plan");
  EXPECT_EQ(hang.signal, SIGKILL);
  EXPECT_LT(hang.total_seconds, 10);

  const LabRow& oom = find_row(rows, "x/oom");
  EXPECT_EQ(oom.status, "oom");
  EXPECT_EQ(oom.error_type, "out_of_memory");
  EXPECT_EQ(oom.memory_limit_bytes, int64_t{1024} << 20);

  const LabRow& crash = find_row(rows, "x/crash");
  EXPECT_EQ(crash.status, "error");
  EXPECT_EQ(crash.error_type, "crash");
  // Under AddressSanitizer (abort_on_error=1, as tools/test-sanitize.sh runs it), ASan's SEGV
  // handler reports the crash and aborts.
  EXPECT_EQ(crash.signal, kAddressSanitizer ? SIGABRT : SIGSEGV);
  EXPECT_EQ(crash.stage, "plan");

  // A tensor allocation that fails at load is `oom`, not `error` (issue 19 item 7).
  const LabRow& alloc = find_row(rows, "x/alloc");
  EXPECT_EQ(alloc.status, "oom");
  EXPECT_EQ(alloc.stage, "load");
  EXPECT_EQ(alloc.error_type, "out_of_memory");

  const LabRow& big = find_row(rows, "local/too-big");
  EXPECT_EQ(big.status, "oom");
  EXPECT_EQ(big.stage, "plan");
  EXPECT_EQ(big.error_type, "exceeds_memory_limit");

  // The report counts them all; the dataset has a file for rows without a reference.
  const auto rep = run_lathe("lab report --json " + (dir / "out").string());
  ASSERT_EQ(rep.exit_code, 0) << rep.out;
  const Json j = parse_json(rep.out, "report");
  EXPECT_EQ(j["by_status"]["pass"], 1);
  EXPECT_EQ(j["by_status"]["error"], 2);
  EXPECT_EQ(j["by_status"]["oom"], 3);
  EXPECT_EQ(j["by_status"]["timeout"], 1);
  EXPECT_EQ(j["by_status"]["unsupported"], 1);
  EXPECT_EQ(j["by_status"]["untested"], 1);
  EXPECT_TRUE(fs::exists(dir / "out" / "dataset" / "lathe-0.1.0_transformers-none.parquet"));

  // With a folder of ranking files, the report leads with their coverage: llama_tied_gqa passes,
  // and lathe implements one of the two architectures (FooBarForCausalLM it does not).
  fs::create_directories(dir / "rankings");
  write_file(dir / "rankings" / "text-generation-selected.json",
             R"({"format": 1, "task": "text-generation", "view": "selected",
                 "snapshot": "2026-11-30", "models": [
                 {"id": "lathe-tiny/llama_tied_gqa", "rank": 1, "architecture": "LlamaForCausalLM"},
                 {"id": "org/foo", "rank": 2, "architecture": "FooBarForCausalLM"}]})");
  const auto ranked = run_lathe("lab report --catalog " + (dir / "rankings").string() + " " +
                                (dir / "out").string());
  ASSERT_EQ(ranked.exit_code, 0) << ranked.out;
  EXPECT_NE(ranked.out.find("| text-generation / selected | 2026-11-30 | 2 | 50.0% | 50.0% | 2 | "
                            "50.0% | 50.0% |"),
            std::string::npos)
      << ranked.out;
  EXPECT_NE(ranked.out.find("FooBarForCausalLM (1)"), std::string::npos) << ranked.out;
  EXPECT_NE(
      run_lathe("lab report --catalog " + (dir / "missing").string() + " " + (dir / "out").string())
          .out.find("not a folder of ranking files"),
      std::string::npos);
}

// A 1% change to one weight fails the row, and the first diverging node names the part of the
// layer it sits in (each layer's attention and MLP outputs are compared with transformers').
TEST(LabSweep, PerturbedWeightFailsAtTheNodeItReaches) {
  ScratchDir dir("perturbed");
  write_catalog_file(
      dir / "catalog.json",
      {tiny("llama_tied_gqa"),
       tiny("llama_tied_gqa",
            R"(, "id": "x/mlp", "inject": "perturb:model.layers.1.mlp.down_proj.weight")"),
       tiny("llama_tied_gqa",
            R"(, "id": "x/attn", "inject": "perturb:model.layers.0.self_attn.o_proj.weight")")});
  const auto r = run_lathe("lab run --quiet --catalog " + (dir / "catalog.json").string() +
                           " --out " + (dir / "out").string() +
                           " --reference-python none --reference-cache " + (dir / "ref").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto rows = read_rows(dir / "out");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(find_row(rows, "lathe-tiny/llama_tied_gqa").status, "pass");
  EXPECT_FALSE(find_row(rows, "lathe-tiny/llama_tied_gqa").first_diverging_layer);
  for (const auto& [id, node] :
       {std::pair{"x/mlp", "layer.1.mlp_out"}, {"x/attn", "layer.0.attn_out"}}) {
    const LabRow& row = find_row(rows, id);
    EXPECT_EQ(row.status, "fail") << id << ": " << row.judge_verdict;
    EXPECT_EQ(row.error_type, "numerics") << id;
    ASSERT_TRUE(row.first_diverging_layer) << id;
    EXPECT_EQ(*row.first_diverging_layer, node) << id;
  }
}

// The other must-fail fixtures: a rope base 0.1% off and a wrong norm eps (config.json, the
// weights untouched) fail at the first node they reach; a cache bug that shifts the decode
// steps' logits without flipping a token fails on the decode check alone, at the first step
// that reads the edited cache.
TEST(LabSweep, ConfigAndCacheFaultsFailTheJudge) {
  ScratchDir dir("faults");
  write_catalog_file(
      dir / "catalog.json",
      {tiny("llama_tied_gqa", R"(, "id": "x/rope", "inject": "config:rope_theta*1.001")"),
       tiny("llama_tied_gqa", R"(, "id": "x/eps", "inject": "config:rms_norm_eps*10")"),
       tiny("llama_tied_gqa", R"(, "id": "x/kv", "inject": "kv:1")")});
  const auto r = run_lathe("lab run --quiet --catalog " + (dir / "catalog.json").string() +
                           " --out " + (dir / "out").string() +
                           " --reference-python none --reference-cache " + (dir / "ref").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto rows = read_rows(dir / "out");
  ASSERT_EQ(rows.size(), 3u);
  for (const char* id : {"x/rope", "x/eps"}) {
    const LabRow& row = find_row(rows, id);
    EXPECT_EQ(row.status, "fail") << id << ": " << row.judge_verdict;
    EXPECT_EQ(row.error_type, "numerics") << id;
    ASSERT_TRUE(row.logits_nmse && row.first_diverging_layer) << id << ": " << row.judge_verdict;
    EXPECT_GT(*row.logits_nmse, kF32Nmse) << id;
    EXPECT_EQ(*row.first_diverging_layer, "layer.0.attn_out") << id;
  }
  const LabRow& kv = find_row(rows, "x/kv");
  EXPECT_EQ(kv.status, "fail") << kv.judge_verdict;
  EXPECT_EQ(kv.error_type, "numerics");
  EXPECT_EQ(kv.generated_tokens, kv.reference_tokens);
  ASSERT_TRUE(kv.logits_nmse && kv.decode_logits_nmse) << kv.judge_verdict;
  EXPECT_LE(*kv.logits_nmse, kF32Nmse) << "the prompt's logits do not read the edited cache";
  EXPECT_FALSE(kv.first_diverging_layer);
  EXPECT_GT(*kv.decode_logits_nmse, kF32Nmse);
  EXPECT_EQ(kv.decode_first_diverging_step, 1) << kv.judge_verdict;
}

TEST(LabSweep, KilledSweepResumesWithEveryRowExactlyOnce) {
  ScratchDir dir("resume");
  std::vector<std::string> models = {
      tiny("llama_tied_gqa"),
      tiny("qwen2_tied"),
      tiny("gemma_tied"),
      tiny("qwen3_tied", R"(, "id": "x/slow", "inject": "hang", "timeout_seconds": 3)"),
      tiny("mistral_window"),
      tiny("olmo2_untied")};
  write_catalog_file(dir / "catalog.json", models);
  const std::string out = (dir / "out").string();
  std::vector<std::string> args = {LATHE_BINARY,
                                   "lab",
                                   "run",
                                   "--quiet",
                                   "--catalog",
                                   (dir / "catalog.json").string(),
                                   "--out",
                                   out,
                                   "--reference-cache",
                                   (dir / "ref").string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, LATHE_BINARY, &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  // Kill the sweep while the fourth model hangs (three rows journaled).
  const auto journal = dir / "out" / "rows.jsonl";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         (!fs::exists(journal) || read_journal(journal, false).size() < 3))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(read_journal(journal, false).size(), 3u);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);

  // Without --resume the folder is refused and nothing is lost.
  const auto refused =
      run_lathe("lab run --quiet --catalog " + (dir / "catalog.json").string() + " --out " + out +
                " --reference-python none --reference-cache " + (dir / "ref").string());
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.out.find("--resume"), std::string::npos) << refused.out;
  EXPECT_EQ(read_journal(journal, false).size(), 3u);

  const auto resumed = run_lathe(
      "lab run --quiet --resume --catalog " + (dir / "catalog.json").string() + " --out " + out +
      " --reference-python none --reference-cache " + (dir / "ref").string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("3 rows resumed"), std::string::npos) << resumed.out;
  const auto rows = read_journal(journal, false);
  ASSERT_EQ(rows.size(), models.size());
  std::set<std::string> keys;
  for (const auto& r : rows) keys.insert(r.key());
  EXPECT_EQ(keys.size(), models.size());
  EXPECT_EQ(find_row(rows, "x/slow").status, "timeout");
  EXPECT_EQ(read_rows(dir / "out" / "dataset").size(), models.size());
}

// One sweep per folder: a second `lab run` into a folder a live sweep holds is refused with
// one line (with --resume too), and the lock dies with its process, however it dies.
TEST(LabSweep, ASecondSweepIntoALiveSweepsFolderIsRefused) {
  ScratchDir dir("locked");
  write_catalog_file(
      dir / "catalog.json",
      {tiny("llama_tied_gqa"),
       tiny("qwen3_tied", R"(, "id": "x/slow", "inject": "hang", "timeout_seconds": 8)"),
       tiny("qwen2_tied")});
  const std::string out = (dir / "out").string();
  const std::string sweep = "lab run --catalog " + (dir / "catalog.json").string() + " --out " +
                            out + " --reference-python none --reference-cache " +
                            (dir / "ref").string();
  // The lock taken by another process (this test): nothing is written, one error line.
  fs::create_directories(dir / "out");
  const int held = ::open((dir / "out" / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  for (const std::string extra : {"", " --resume", " --quiet"}) {
    const auto r = lathe::testing::run_lathe_split(sweep + extra);
    EXPECT_EQ(r.exit_code, 1) << extra << r.out << r.err;
    EXPECT_EQ(r.err.rfind("error: " + out + ": another lathe process", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(".lock"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "rows.jsonl"));
  EXPECT_FALSE(fs::exists(dir / "out" / "catalog.json"));
  ::close(held);

  // A live sweep holds it: the second is refused, naming the first's pid.
  std::vector<std::string> args = {
      "/bin/sh", "-c", std::string("exec ") + LATHE_BINARY + " " + sweep + " --quiet > /dev/null"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ), 0);
  const auto journal = dir / "out" / "rows.jsonl";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         (!fs::exists(journal) || read_journal(journal, false).empty()))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(read_journal(journal, false).size(), 1u);  // the first sweep is in x/slow now
  const auto second = lathe::testing::run_lathe_split(sweep + " --resume");
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_NE(second.err.find("(pid " + std::to_string(pid) + ")"), std::string::npos) << second.err;
  EXPECT_EQ(read_journal(journal, false).size(), 1u);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  waitpid(pid, nullptr, 0);

  // Killed, the first sweep holds nothing: --resume runs the rest, every row once.
  const auto resumed = run_lathe(sweep + " --quiet --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  const auto rows = read_journal(journal, false);
  ASSERT_EQ(rows.size(), 3u);
  std::set<std::string> keys;
  for (const auto& r : rows) keys.insert(r.key());
  EXPECT_EQ(keys.size(), 3u);
  EXPECT_EQ(read_rows(dir / "out" / "dataset").size(), 3u);

  // `lab merge` takes the same lock on its output folder.
  fs::create_directories(dir / "merged");
  const int merge_lock =
      ::open((dir / "merged" / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_EQ(::flock(merge_lock, LOCK_EX | LOCK_NB), 0);
  const auto merge = run_lathe("lab merge " + (dir / "merged").string() + " " + out);
  EXPECT_EQ(merge.exit_code, 1) << merge.out;
  EXPECT_NE(merge.out.find("another lathe process"), std::string::npos) << merge.out;
  EXPECT_FALSE(fs::exists(dir / "merged" / "rows.jsonl"));
  ::close(merge_lock);
}

// A journal holding a key twice (as two sweeps sharing a folder used to write it) is
// reported, resumed and published with the key once.
TEST(LabSweep, AKeyJournaledTwiceIsPublishedOnce) {
  ScratchDir dir("twice");
  write_catalog_file(dir / "catalog.json", {tiny("llama_tied_gqa"), tiny("qwen2_tied")});
  const std::string sweep = "lab run --quiet --catalog " + (dir / "catalog.json").string() +
                            " --out " + (dir / "out").string() +
                            " --reference-python none --reference-cache " + (dir / "ref").string();
  ASSERT_EQ(run_lathe(sweep).exit_code, 0);
  const auto journal = dir / "out" / "rows.jsonl";
  const std::string text = read_file(journal);
  write_file(journal, text + text.substr(0, text.find('\n') + 1));
  ASSERT_EQ(read_journal(journal, false).size(), 3u);
  const auto rep = run_lathe("lab report --json " + (dir / "out").string());
  ASSERT_EQ(rep.exit_code, 0) << rep.out;
  EXPECT_EQ(parse_json(rep.out, "report")["rows"], 2) << rep.out;
  const auto resumed = run_lathe(sweep + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("2 rows resumed"), std::string::npos) << resumed.out;
  const auto rows = read_rows(dir / "out" / "dataset");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NE(rows[0].key(), rows[1].key());
}

// A folder named on the command line that is not there is an error naming it, not a sweep
// of nothing that exits 0.
TEST(LabSweep, MissingFixturesOrModelFoldersAreErrors) {
  ScratchDir dir("missing");
  fs::create_directories(dir / "empty");
  for (const auto& [option, path] :
       {std::pair<std::string, std::string>{"--fixtures", "/nonexistent/fixtures"},
        {"--fixtures", (dir / "empty").string()},
        {"--model", "/nonexistent/model"},
        {"--model", fixture_dir("qwen3_tied") + ",/nonexistent/model"},
        {"--hf-cache", "/nonexistent/hub"}}) {
    const auto r = lathe::testing::run_lathe_split("lab run --reference-python none " + option +
                                                   " " + path + " --out " + (dir / "out").string());
    EXPECT_EQ(r.exit_code, 1) << option << " " << path << ": " << r.out << r.err;
    const std::string named = path.substr(path.rfind(',') + 1);
    EXPECT_EQ(r.err.rfind("error: " + named + ": ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(option), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir / "out")) << option;
  }
}

// A folder with one copy of a fixture, for a sweep of only it (--fixtures).
fs::path one_fixture(const ScratchDir& dir, const std::string& name) {
  fs::create_directories(dir / "fixtures");
  fs::copy(fixture_dir(name), dir / "fixtures" / name);
  return dir / "fixtures";
}

// `lab run --model DIR` runs a local folder through the protocol beside the fixtures: here
// qwen3_tied's checkpoint, built into a folder of its own with a word-level tokenizer that
// turns the --prompt into the fixture's prompt ids, so the fixture's goldens (imported into
// the reference cache by its own row, keyed by the same files) are its reference too.
TEST(LabSweep, ModelFoldersRunBesideTheFixtures) {
  ScratchDir dir("model-folder");
  const Json golden = read_json_file(fixture_dir("qwen3_tied") + "/goldens.json");
  const fs::path model = dir / "my-model";
  ASSERT_EQ(run_lathe("tiny build " + fixture_dir("qwen3_tied") + " " + model.string()).exit_code,
            0);
  Json vocab = Json::object();
  for (int i = 0; i < 128; ++i) vocab["t" + std::to_string(i)] = i;
  write_file(model / "tokenizer.json",
             Json{{"version", "1.0"},
                  {"added_tokens", Json::array()},
                  {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                  {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "t0"}}}}
                 .dump());
  std::string prompt;
  for (const auto& id : golden["prompt_ids"]) prompt += "t" + std::to_string(id.get<int>()) + " ";
  const auto r = run_lathe("lab run --quiet --fixtures " + one_fixture(dir, "qwen3_tied").string() +
                           " --model " + model.string() + " --prompt '" + prompt +
                           "' --no-hf-cache --reference-python none --reference-cache " +
                           (dir / "ref").string() + " --out " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto rows = read_rows(dir / "out" / "dataset");
  ASSERT_EQ(rows.size(), 2u);
  const LabRow& row = find_row(rows, "my-model");
  EXPECT_EQ(row.revision, "local");
  EXPECT_EQ(row.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(row.status, "pass") << row.judge_verdict << row.error_message;
  EXPECT_EQ(row.reference_source, "cache");
  EXPECT_EQ(Json(row.prompt_ids), golden["prompt_ids"]);
  EXPECT_EQ(Json(row.generated_tokens), golden["greedy_tokens"]);
  ASSERT_TRUE(row.logits_nmse);
  EXPECT_LE(*row.logits_nmse, kF32Nmse);
}

// `lab run --dtype bf16` runs the models in bf16 and judges them against the f32 reference
// with the bf16 tolerance: the rounding shows (NMSE above f32's 1e-9) and stays within 5e-4.
TEST(LabSweep, Bf16RunsInBf16AndIsJudgedByTheBf16Tolerance) {
  ScratchDir dir("bf16");
  const auto r = run_lathe("lab run --quiet --dtype bf16 --fixtures " +
                           one_fixture(dir, "qwen3_tied").string() +
                           " --no-hf-cache --reference-python none --reference-cache " +
                           (dir / "ref").string() + " --out " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto rows = read_rows(dir / "out" / "dataset");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].dtype, "bf16");
  EXPECT_EQ(rows[0].status, "pass") << rows[0].judge_verdict;
  ASSERT_TRUE(rows[0].logits_nmse);
  EXPECT_GT(*rows[0].logits_nmse, kF32Nmse) << "no bf16 rounding: the run was not bf16";
  EXPECT_LE(*rows[0].logits_nmse, kBf16Nmse);
  ASSERT_TRUE(rows[0].decode_logits_nmse);
  EXPECT_GT(*rows[0].decode_logits_nmse, kF32Nmse);
  EXPECT_LE(*rows[0].decode_logits_nmse, kBf16Nmse);
  EXPECT_EQ(run_lathe("lab run --dtype f16 --out " + (dir / "x").string()).exit_code, 2);
}

TEST(LabSweep, ShardsMergeIntoTheWholeSweep) {
  ScratchDir dir("shards");
  std::vector<std::string> models = {tiny("llama_tied_gqa"), tiny("qwen2_tied"), tiny("gemma_tied"),
                                     tiny("mistral_window"), tiny("olmo2_untied")};
  write_catalog_file(dir / "catalog.json", models);
  for (int i = 0; i < 2; ++i) {
    const auto r =
        run_lathe("lab run --quiet --shard " + std::to_string(i) + "/2 --catalog " +
                  (dir / "catalog.json").string() + " --out " +
                  (dir / ("shard" + std::to_string(i))).string() +
                  " --reference-python none --reference-cache " + (dir / "ref").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  EXPECT_EQ(read_rows(dir / "shard0").size(), 3u);
  EXPECT_EQ(read_rows(dir / "shard1").size(), 2u);
  const auto m =
      run_lathe("lab merge " + (dir / "merged").string() + " " + (dir / "shard0").string() + " " +
                (dir / "shard1").string() + " " + (dir / "shard1").string());
  ASSERT_EQ(m.exit_code, 0) << m.out;
  const auto rows = read_rows(dir / "merged" / "dataset");
  ASSERT_EQ(rows.size(), models.size());
  std::set<std::string> ids;
  for (const auto& r : rows) {
    ids.insert(r.model_id);
    EXPECT_EQ(r.status, "pass");
  }
  EXPECT_EQ(ids.size(), models.size());
  // diff of a sweep against itself: nothing changed.
  const auto d = run_lathe("lab diff --json " + (dir / "merged").string() + " " +
                           (dir / "merged" / "dataset").string());
  ASSERT_EQ(d.exit_code, 0) << d.out;
  const Json diff = parse_json(d.out, "diff");
  EXPECT_EQ(diff["unchanged"], models.size());
  EXPECT_TRUE(diff["regressions"].empty());
}

TEST(LabSweep, RankedModelsRunFromTheHuggingFaceCacheOrStayUntested) {
  ScratchDir dir("ranked");
  const auto snap = dir / "hub" / "models--org--tiny" / "snapshots" / "c0ffee";
  fs::create_directories(dir / "hub" / "models--org--tiny" / "refs");
  write_file(dir / "hub" / "models--org--tiny" / "refs" / "main", "c0ffee");
  ASSERT_EQ(run_lathe("tiny build " + fixture_dir("qwen3_tied") + " " + snap.string()).exit_code,
            0);
  write_catalog_file(dir / "ranking.json",
                     {R"({"id": "org/tiny", "rank": 1, "prompt_ids": [3, 4, 5]})",
                      R"({"id": "org/elsewhere", "rank": 2})"});
  const auto r =
      run_lathe("lab run --quiet --catalog " + (dir / "ranking.json").string() + " --hf-cache " +
                (dir / "hub").string() + " --out " + (dir / "out").string() +
                " --reference-python none --reference-cache " + (dir / "ref").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("1 catalog models are not on this machine"), std::string::npos) << r.out;
  const auto rows = read_rows(dir / "out");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].model_id, "org/tiny");
  EXPECT_EQ(rows[0].source, "hub");
  EXPECT_EQ(rows[0].status, "untested");  // ran, but no reference is cached for this prompt
  EXPECT_EQ(rows[0].generated_tokens.size(), 32u);
  EXPECT_NE(rows[0].run_script.find("hf download org/tiny --revision main"), std::string::npos)
      << rows[0].run_script;
}

TEST(LabSweep, FullDiskLosesNothingAndTheNextRunRecovers) {
  ScratchDir dir("diskfull");
  std::vector<std::string> models;
  for (const char* name : {"llama_tied_gqa", "qwen2_tied", "gemma_tied", "mistral_window",
                           "olmo2_untied", "qwen3_tied"}) {
    ASSERT_EQ(
        run_lathe(std::string("tiny build ") + fixture_dir(name) + " " + (dir / name).string())
            .exit_code,
        0);
    models.push_back(std::string(R"({"id": "local/)") + name +
                     R"(", "revision": "local", "path": ")" + name +
                     R"(", "prompt_ids": [1, 2, 3]})");
  }
  write_catalog_file(dir / "catalog.json", models);
  const std::string sweep = "lab run --quiet --catalog " + (dir / "catalog.json").string() +
                            " --out " + (dir / "out").string() +
                            " --reference-python none --reference-cache " + (dir / "ref").string();
  const auto journal = dir / "out" / "rows.jsonl";

  // The disk fills while rows are journaled: a clear error, and only whole rows are kept.
  const auto full = run_lathe_with_full_disk(12, sweep);
  EXPECT_EQ(full.exit_code, 1) << full.out;
  EXPECT_NE(full.out.find("rows.jsonl"), std::string::npos) << full.out;
  const size_t kept = read_journal(journal, false).size();
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, models.size());
  EXPECT_EQ(read_file(journal).back(), '\n');

  // With space again, --resume runs the rest: every row exactly once.
  const auto resumed = run_lathe(sweep + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  auto rows = read_journal(journal, false);
  ASSERT_EQ(rows.size(), models.size());
  std::set<std::string> keys;
  for (const auto& r : rows) keys.insert(r.key());
  EXPECT_EQ(keys.size(), models.size());
  const auto dataset = dir / "out" / "dataset" / "lathe-0.1.0_transformers-none.parquet";
  const std::string before = read_file(dataset);
  ASSERT_FALSE(before.empty());

  // The disk fills while the Parquet file is rewritten: the old file stays whole, no
  // temporary file is left, and the next run writes it again.
  const auto pq_full = run_lathe_with_full_disk(4, sweep + " --resume");
  EXPECT_EQ(pq_full.exit_code, 1) << pq_full.out;
  EXPECT_NE(pq_full.out.find(".parquet"), std::string::npos) << pq_full.out;
  EXPECT_EQ(read_file(dataset), before);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "out" / "dataset")) files += !e.path().empty();
  EXPECT_EQ(files, 1u);
  EXPECT_EQ(read_rows(dir / "out" / "dataset").size(), models.size());
  ASSERT_EQ(run_lathe(sweep + " --resume").exit_code, 0);
  EXPECT_EQ(read_rows(dir / "out" / "dataset").size(), models.size());
}

TEST(LabSweep, BadShardAndMissingCatalogAreClearErrors) {
  ScratchDir dir("badargs");
  const auto shard = run_lathe("lab run --shard 2/2 --out " + (dir / "o").string());
  EXPECT_EQ(shard.exit_code, 2) << shard.out;
  EXPECT_NE(shard.out.find("--shard"), std::string::npos) << shard.out;
  const auto missing = run_lathe("lab run --catalog " + (dir / "nope.json").string() + " --out " +
                                 (dir / "o").string());
  EXPECT_EQ(missing.exit_code, 1) << missing.out;
  EXPECT_NE(missing.out.find("nope.json"), std::string::npos) << missing.out;
  const auto report = run_lathe("lab report " + (dir / "empty").string());
  EXPECT_EQ(report.exit_code, 1) << report.out;
}

// Starts tests/lab/fake_hub.py; returns its process id and endpoint.
std::pair<pid_t, std::string> start_fake_hub(const fs::path& port_file) {
  const std::string server = std::string(LATHE_PYTHON) + " " + LATHE_SOURCE_DIR +
                             "/tests/lab/fake_hub.py " + port_file.string();
  std::vector<std::string> args = {"/bin/sh", "-c", "exec " + server};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start fake_hub.py");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(port_file) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return {pid, "http://127.0.0.1:" + read_file(port_file)};
}

TEST(LabCatalog, RefreshReadsTheHubListingShape) {
  ScratchDir dir("refresh");
  const auto port_file = dir / "port";
  const auto [pid, endpoint] = start_fake_hub(port_file);
  const auto r = run_lathe("lab catalog refresh --endpoint " + endpoint + " --limit 2 --out " +
                           (dir / "catalog").string());
  const auto bad = run_lathe("lab catalog refresh --endpoint " + endpoint +
                             "/nothing-here --task text-generation --view trending --out " +
                             (dir / "bad").string());
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json dl = read_json_file(dir / "catalog" / "text-generation-downloads.json");
  ASSERT_EQ(dl["models"].size(), 2u);
  EXPECT_EQ(dl["models"][0]["id"], "org-b/qwen-tiny");
  EXPECT_EQ(dl["models"][0]["rank"], 1);
  EXPECT_EQ(dl["models"][0]["architecture"], "Qwen3ForCausalLM");
  EXPECT_EQ(dl["models"][0]["revision"], "bbb222");
  EXPECT_EQ(dl["models"][1]["id"], "org-a/llama-small");
  const Json tr = read_json_file(dir / "catalog" / "text-generation-trending.json");
  EXPECT_EQ(tr["view"], "trending");
  EXPECT_EQ(tr["models"][0]["id"], "org-c/no-config");
  EXPECT_EQ(tr["models"][0]["revision"], "main");
  const Json it = read_json_file(dir / "catalog" / "image-text-to-text-downloads.json");
  ASSERT_EQ(it["models"].size(), 1u);
  EXPECT_EQ(it["models"][0]["architecture"], "Gemma3ForConditionalGeneration");
  const std::string requests = read_file(fs::path(port_file.string() + ".requests"));
  EXPECT_NE(requests.find("pipeline_tag=text-generation&sort=trendingScore"), std::string::npos)
      << requests;
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("404"), std::string::npos) << bad.out;
}

// docs/limits.md: the Hub listing may be 64 MiB; a byte more is an error naming the limit.
TEST(LabCatalog, RefreshRefusesAListingAbove64MiB) {
  ScratchDir dir("refresh-limit");
  const auto [pid, endpoint] = start_fake_hub(dir / "port");
  auto refresh = [&, endpoint = endpoint](int64_t bytes, const std::string& out) {
    return run_lathe("lab catalog refresh --endpoint " + endpoint + "/pad/" +
                     std::to_string(bytes) + " --task text-generation --view trending --out " +
                     (dir / out).string());
  };
  constexpr int64_t kLimit = int64_t{64} << 20;
  const auto at = refresh(kLimit, "at"), over = refresh(kLimit + 1, "over");
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(at.exit_code, 0) << at.out;
  EXPECT_TRUE(fs::exists(dir / "at" / "text-generation-trending.json"));
  EXPECT_EQ(over.exit_code, 1) << over.out;
  EXPECT_NE(over.out.find("the listing is larger than 64 MiB"), std::string::npos) << over.out;
  EXPECT_FALSE(fs::exists(dir / "over" / "text-generation-trending.json"));
}

}  // namespace
}  // namespace lathe
