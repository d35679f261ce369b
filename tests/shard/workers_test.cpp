// Sharded runs as users start them: `lathe ... --tp N` or `--ep N` starts its own workers
// under Open MPI's mpirun (src/shard/worker.h), one process per rank.
//
//   - every tiny fixture that splits passes its transformers goldens at tp 2, tp 4 (more ranks
//     than this machine's cores) and ep 2, with the one-process tolerance and tokens, and
//     at tp 2 with --quantize q8_0 (each rank quantizing its own slices) within Q8_0's;
//   - generate prints the same tokens as one process;
//   - a worker killed, or one that stops answering, ends the run within a bounded time with
//     one error naming that rank and its last message, and no process is left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "io/json.h"
#include "io/tiny_checkpoint.h"
#include "support/run.h"
#include "support/skip.h"

namespace lathe::testing {
namespace {
namespace fs = std::filesystem;

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

struct Split {
  const char* option;
  int at_least;  // fixtures that pass split this way (of 130), measured: 125, 113, 33, 33, 125
};

class TinyCheck : public ::testing::TestWithParam<Split> {};

TEST_P(TinyCheck, EveryFixtureThatSplitsMatchesItsGoldens) {
  const RunResult r = run_lathe(cat("tiny check ", GetParam().option, " --fixtures ",
                                    LATHE_SOURCE_DIR, "/tests/fixtures/tiny"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(count(r.out, std::regex(" FAIL\n")), 0) << r.out;
  EXPECT_GE(count(r.out, std::regex(" PASS\n")), GetParam().at_least) << r.out;
  // The fixtures that do not split say why, naming the model and what stops it.
  EXPECT_EQ(r.out.find("internal"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(cat(fixture_names().size(), " fixtures, 0 failed")), std::string::npos)
      << r.out;
}

INSTANTIATE_TEST_SUITE_P(Shard, TinyCheck,
                         ::testing::Values(Split{"--tp 2", 125}, Split{"--tp 4", 113},
                                           Split{"--ep 2", 33}, Split{"--ep 4", 33},
                                           Split{"--tp 2 --quantize q8_0", 125}),
                         [](const auto& info) {
                           std::string name;  // "tp2", "tp2quantizeq8_0"
                           for (const char* c = info.param.option; *c; ++c)
                             if (std::isalnum(static_cast<unsigned char>(*c)) || *c == '_')
                               name += *c;
                           return name;
                         });

// A built fixture and the generate command line over it.
struct Generate {
  ScratchDir dir{"workers"};
  std::string args;
  explicit Generate(const std::string& fixture) {
    build_tiny_checkpoint(fixture_dir(fixture), dir.path(), {.dtype = DType::F32});
    args = cat("generate ", dir.path().string(),
               " --prompt-ids '[1, 5, 9, 13, 2, 7]' --max-new-tokens 24 --ignore-eos --greedy "
               "--json");
  }
  // Processes still running whose command line names the fixture's folder.
  std::string leftovers() const {
    return run_shell(cat("pgrep -af '", dir.path().string(), "' | grep -v pgrep || true")).out;
  }
};

std::string tokens(const std::string& json) {
  const size_t at = json.find("\"generated_ids\"");
  return at == std::string::npos ? "" : json.substr(at, json.find(']', at) - at);
}

TEST(Workers, GenerateGivesTheOneProcessTokens) {
  for (const char* fixture : {"llama_tied_gqa", "qwen3_moe_headdim_mlp_only"}) {
    SCOPED_TRACE(fixture);
    const Generate g(fixture);
    const SplitRunResult one = run_lathe_split(g.args);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_NE(tokens(one.out), "") << one.out;
    const char* split =
        std::string(fixture).find("moe") != std::string::npos ? " --ep 2" : " --tp 2";
    const SplitRunResult two = run_lathe_split(g.args + split);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(tokens(two.out), tokens(one.out));
  }
}

// --cores: the planner picks the fewest ranks whose memory fits --core-memory, and the run
// goes on with that many (llama_tied_gqa: 469 KiB in one process, 293 KiB per rank of two).
TEST(Workers, CoresFromThePlanner) {
  const Generate g("llama_tied_gqa");
  const SplitRunResult one = run_lathe_split(g.args + " --cores auto");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("cores: 1 (tp"), std::string::npos) << one.err;
  const SplitRunResult two = run_lathe_split(g.args + " --cores auto --core-memory 400K");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("cores: 2 (tp"), std::string::npos) << two.err;
  EXPECT_EQ(tokens(two.out), tokens(one.out));
  const SplitRunResult none = run_lathe_split(g.args + " --cores 2 --core-memory 100K");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("does not fit 100.0 KiB per core on up to 2 cores"), std::string::npos)
      << none.err;
  EXPECT_EQ(run_lathe_split(g.args + " --cores auto --tp 2").exit_code, 2);
}

// A failing worker: the run ends with exit code 1 within `limit` seconds, its error names
// `rank` and its last message, and no process is left.
void expect_bounded_failure(const std::string& env, const std::string& rank_says, double limit) {
  const Generate g("llama_tied_gqa");
  const auto start = std::chrono::steady_clock::now();
  const RunResult failed =
      run_shell(cat(env, " ", LATHE_BINARY, " ", g.args, " --tp 2 2>&1 >/dev/null"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(failed.exit_code, 1) << failed.out;
  EXPECT_LT(seconds, limit) << failed.out;
  EXPECT_NE(failed.out.find(rank_says), std::string::npos) << failed.out;
  EXPECT_NE(failed.out.find("last message"), std::string::npos) << failed.out;
  EXPECT_EQ(g.leftovers(), "");
}

TEST(Workers, AKilledWorkerEndsTheRunNamingIt) {
  expect_bounded_failure("LATHE_SHARD_TEST_FAULT=kill:1:40", "rank 1 ended while running", 60);
}

TEST(Workers, AWorkerThatStopsAnsweringEndsTheRunNamingIt) {
  // Rank 0 waits LATHE_SHARD_TIMEOUT seconds in its next collective, then names rank 1,
  // which is one collective behind.
  expect_bounded_failure("LATHE_SHARD_TIMEOUT=3 LATHE_SHARD_TEST_FAULT=hang:1:40",
                         "rank 1 is at collective 39", 60);
}

// Two hosts under the library's own launcher: mpirun with a host file of two loopback
// addresses starts its daemon for the second through a remote shell (here one that runs it
// on this machine), and the ranks talk over TCP on the loopback interface only. The workers
// are started by mpirun, not by lathe; the tokens are one process's.
TEST(Workers, TwoHostsUnderMpirunGiveTheOneProcessTokens) {
  const Generate g("llama_tied_gqa");
  const SplitRunResult one = run_lathe_split(g.args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_NE(tokens(one.out), "") << one.out;
  write_file(g.dir.path() / "hosts", "127.0.0.1 slots=1\n127.0.0.2 slots=1\n");
  const fs::path rsh_log = g.dir.path() / "rsh.log";
  const RunResult two = run_shell(cat(
      "LATHE_RSH_LOG=", rsh_log.string(),
      " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun -q -np 2 ",
      "--hostfile ", (g.dir.path() / "hosts").string(), " --mca plm_rsh_agent ", LATHE_SOURCE_DIR,
      "/tests/shard/loopback_rsh.sh --mca btl tcp,self --mca btl_tcp_if_include lo ",
      "--mca oob_tcp_if_include lo ", LATHE_BINARY, " ", g.args, " --tp 2 2>/dev/null"));
  ASSERT_EQ(two.exit_code, 0) << two.out;
  EXPECT_EQ(tokens(two.out), tokens(one.out)) << two.out;
  EXPECT_EQ(read_file(rsh_log), "127.0.0.2\n");  // mpirun started a daemon for the second host
  EXPECT_EQ(g.leftovers(), "");
}

// The lab's sharded runs: each model's process runs as workers; rank 0's row records the
// degree, the cores and both verdicts, and a model that does not split says why.
TEST(Workers, LabSweepRunsEachModelSharded) {
  ScratchDir dir{"lab-shard"};
  fs::create_directories(dir.path() / "fixtures");
  for (const char* f : {"llama_tied_gqa", "qwen3_moe_headdim_mlp_only", "mamba2_groups",
                        "ministral3_tied_window_default_rope"})
    fs::create_directory_symlink(fixture_dir(f), dir.path() / "fixtures" / f);
  // Each sweep's rows by model.
  auto sweep = [&](const std::string& split, const std::string& out,
                   const std::string& fixtures = "fixtures") {
    const RunResult r = run_lathe(cat("lab run --no-hf-cache --reference-python none --quiet ",
                                      "--fixtures ", (dir.path() / fixtures).string(), " --out ",
                                      (dir.path() / out).string(), " ", split));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    std::map<std::string, Json> rows;
    std::ifstream journal(dir.path() / out / "rows.jsonl");
    for (std::string line; std::getline(journal, line);) {
      Json row = Json::parse(line);
      rows[row["model_id"].get<std::string>()] = row;
    }
    return rows;
  };
  // One process's peak, against which a sharded row's (the sum of its ranks') is more.
  fs::create_directories(dir.path() / "llama");
  fs::create_directory_symlink(fixture_dir("llama_tied_gqa"), dir.path() / "llama" / "l");
  const int64_t one_process =
      sweep("", "one", "llama")["lathe-tiny/l"]["peak_memory_bytes"].get<int64_t>();
  ASSERT_GT(one_process, 0);
  for (const char* split : {"--tp 2", "--ep 2"}) {
    SCOPED_TRACE(split);
    std::map<std::string, Json> rows = sweep(split, std::string(split).substr(2, 2));
    ASSERT_EQ(rows.size(), 4u);
    const bool tp = std::string(split) == "--tp 2";
    // A hybrid's recurrent mixers run whole on each rank; its row says tp 2 all the same.
    if (tp) {
      EXPECT_EQ(rows["lathe-tiny/mamba2_groups"]["status"], "pass");
      EXPECT_EQ(rows["lathe-tiny/mamba2_groups"]["tp_degree"], 2);
    }
    const Json& runs =
        rows[tp ? "lathe-tiny/llama_tied_gqa" : "lathe-tiny/qwen3_moe_headdim_mlp_only"];
    EXPECT_EQ(runs["status"], "pass") << runs.dump();
    EXPECT_EQ(runs[tp ? "tp_degree" : "ep_degree"], 2);
    EXPECT_EQ(runs[tp ? "ep_degree" : "tp_degree"], 1);
    EXPECT_EQ(runs["cores"], 2);
    EXPECT_GT(runs["peak_memory_bytes"].get<int64_t>(), one_process * 3 / 2) << runs.dump();
    EXPECT_NE(runs["run_script"].get<std::string>().find(split), std::string::npos);
    EXPECT_EQ(runs["fluency_verdict"], "not run: the model has no tokenizer.json");
    const Json& refused =
        rows[tp ? "lathe-tiny/ministral3_tied_window_default_rope" : "lathe-tiny/llama_tied_gqa"];
    EXPECT_EQ(refused["status"], "unsupported") << refused.dump();
    EXPECT_EQ(refused["error_type"], "not_shardable");
    EXPECT_NE(refused["error_message"].get<std::string>().find(tp ? "3 kv heads across 2 ranks"
                                                                  : "no experts"),
              std::string::npos)
        << refused.dump();
  }
}

// The lab's planner: with --cores each model gets the fewest ranks whose memory fits
// --core-memory (llama_tied_gqa: 469 KiB in one process, 293 KiB per rank of two; mamba2's
// fits one; the MoE fixture needs 581 KiB per rank even at tp 2: out of memory, with the
// planner's numbers).
TEST(Workers, LabSweepPlansTheCores) {
  ScratchDir dir{"lab-cores"};
  fs::create_directories(dir.path() / "fixtures");
  for (const char* f : {"llama_tied_gqa", "qwen3_moe_headdim_mlp_only", "mamba2_groups"})
    fs::create_directory_symlink(fixture_dir(f), dir.path() / "fixtures" / f);
  const RunResult r =
      run_lathe(cat("lab run --no-hf-cache --reference-python none --quiet ", "--fixtures ",
                    (dir.path() / "fixtures").string(), " --out ", (dir.path() / "out").string(),
                    " --cores auto --core-memory 400K"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::map<std::string, Json> rows;
  std::ifstream journal(dir.path() / "out" / "rows.jsonl");
  for (std::string line; std::getline(journal, line);) {
    Json row = Json::parse(line);
    rows[row["model_id"].get<std::string>()] = row;
  }
  const Json& llama = rows["lathe-tiny/llama_tied_gqa"];
  EXPECT_EQ(llama["status"], "pass") << llama.dump();
  EXPECT_EQ(llama["tp_degree"], 2);
  const Json& mamba = rows["lathe-tiny/mamba2_groups"];
  EXPECT_EQ(mamba["status"], "pass") << mamba.dump();
  EXPECT_EQ(mamba["tp_degree"], 1);
  const Json& moe = rows["lathe-tiny/qwen3_moe_headdim_mlp_only"];
  EXPECT_EQ(moe["status"], "oom") << moe.dump();
  EXPECT_EQ(moe["stage"], "plan");
  EXPECT_NE(moe["error_message"].get<std::string>().find("does not fit 400.0 KiB per core"),
            std::string::npos);
}

// Each rank's memory budget (LATHE_SHARD_MEMORY; --cores sets it to --core-memory plus
// 256 MiB): SmolLM2 f32 in 3 ranks needs about 300 MiB each, so 150 MiB ends the run with
// one rank's out-of-memory error, and no process is left.
TEST(Workers, ARankPastItsMemoryBudgetEndsTheRun) {
  const char* smollm2 = std::getenv("LATHE_SMOLLM2_DIR");
  if (!smollm2 || !fs::exists(fs::path(smollm2) / "model.safetensors"))
    LATHE_SKIP_OUTSIDE_CI("SmolLM2: set LATHE_SMOLLM2_DIR (tools/test.sh does)");
  const std::string args =
      cat("generate ", smollm2, " --prompt-ids '[1, 2, 3]' --max-new-tokens 4", " --tp 3");
  const RunResult fits =
      run_shell(cat("LATHE_SHARD_MEMORY=400M ", LATHE_BINARY, " ", args, " 2>&1"));
  EXPECT_EQ(fits.exit_code, 0) << fits.out;
  const RunResult over =
      run_shell(cat("LATHE_SHARD_MEMORY=150M ", LATHE_BINARY, " ", args, " 2>&1"));
  EXPECT_EQ(over.exit_code, 1) << over.out;
  EXPECT_NE(over.out.find("out of memory"), std::string::npos) << over.out;
  EXPECT_NE(over.out.find("error: rank "), std::string::npos) << over.out;
  EXPECT_EQ(run_shell(cat("pgrep -af '", LATHE_BINARY, " generate ", smollm2,
                          "' | grep -v pgrep || true"))
                .out,
            "");
}

bool wait_for(const std::function<bool()>& ready, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// The lathe-shard-* folders in `tmp`.
std::vector<std::string> shard_dirs(const fs::path& tmp) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.path().filename().string().starts_with("lathe-shard-"))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// SIGTERM to the launcher used to end the run with nothing on stderr and leave its
// lathe-shard-XXXX folder; failed runs' folders piled up (issue 47, item 9). Now the workers
// are stopped, the folder removed, the exit says why; and a launcher keeps the newest 8
// folders of ended runs.
TEST(Workers, ASignalToTheLauncherStopsTheRunAndRemovesItsFolder) {
  const Generate g("llama_tied_gqa");
  ScratchDir tmp("shard-tmp");
  for (int i = 0; i < 12; ++i) {
    const fs::path d = tmp / cat("lathe-shard-old", 10 + i);
    fs::create_directories(d);
    write_file(d / "launcher.pid", "999999999\n");  // above any pid: that launcher is gone
    fs::last_write_time(d, fs::file_time_type::clock::now() - std::chrono::hours(1 + i));
  }
  const fs::path err = tmp / "err.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd =
        cat("exec env TMPDIR=", tmp.path().string(), " LATHE_SHARD_TEST_FAULT=hang:1:40 ",
            LATHE_BINARY, " ", g.args, " --tp 2 >/dev/null 2>", err.string());
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Until rank 1 hangs at its fault: the run is under way.
  const bool hanging = wait_for(
      [&] {
        for (const auto& name : shard_dirs(tmp.path()))
          if (!name.starts_with("lathe-shard-old") && fs::exists(tmp / name / "rank-1.status") &&
              read_file(tmp / name / "rank-1.status").find("test fault") != std::string::npos)
            return true;
        return false;
      },
      60);
  EXPECT_TRUE(hanging);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(read_file(err),
            "error: stopped by SIGTERM; the workers were stopped and their status folder "
            "removed\n");
  std::vector<std::string> kept;
  for (int i = 0; i < 8; ++i) kept.push_back(cat("lathe-shard-old", 10 + i));
  EXPECT_EQ(shard_dirs(tmp.path()), kept);
  EXPECT_TRUE(wait_for([&] { return g.leftovers().empty(); }, 10)) << g.leftovers();
}

TEST(Workers, MpiWithAnotherCountThanTheDegreeIsRefused) {
  const Generate g("llama_tied_gqa");
  const RunResult r =
      run_shell(cat("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ",
                    "mpirun -q --oversubscribe -np 3 ", LATHE_BINARY, " ", g.args, " --tp 2 2>&1"));
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("MPI started 3 processes for tp=2"), std::string::npos) << r.out;
  EXPECT_EQ(g.leftovers(), "");
}

}  // namespace
}  // namespace lathe::testing
