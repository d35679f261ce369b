#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/json.h"

namespace lathe {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Json, NamesFileFieldAndPosition) {
  EXPECT_NE(
      error_of([] { parse_json("{\"a\": }", "x.json"); }).find("x.json: malformed JSON at byte 7"),
      std::string::npos);
  const Json j = parse_json(R"({"n": "7", "f": 1.5, "i": 3.0, "b": true})", "c.json");
  JsonFields f(j, "c.json");
  EXPECT_EQ(f.get<int64_t>("i"), 3);
  EXPECT_EQ(f.get_or<int64_t>("missing", 9), 9);
  EXPECT_EQ(error_of([&] { f.get<int64_t>("n"); }),
            "c.json: field \"n\" must be an integer, found \"7\"");
  EXPECT_EQ(error_of([&] { f.get<int64_t>("f"); }),
            "c.json: field \"f\" must be an integer, found 1.5");
  EXPECT_EQ(error_of([&] { f.get<std::string>("zz"); }), "c.json: missing field \"zz\"");
}

TEST(Json, RejectsDeepNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of([&] { parse_json(deep, "deep.json"); }).find("nested deeper than"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { read_json_file("/nonexistent/config.json"); }).find("/nonexistent/config.json"),
      std::string::npos);
}

// A number beyond double's range made nlohmann throw out_of_range, which escaped as a crash
// (found by fuzz_config: "vocab_size": 11e308).
TEST(Json, NumberOverflowIsAnErrorNamingTheFile) {
  EXPECT_NE(error_of([] {
              parse_json(R"({"vocab_size": 11e308})", "config.json");
            }).find("config.json: malformed JSON"),
            std::string::npos);
  EXPECT_EQ(parse_json("[1e308]", "ok.json")[0].get<double>(), 1e308);
}

// Issue 19 item 5: a 50 MB file of nested arrays (each under the depth limit) took 1.7 GB as a
// DOM. Parsed in a child process, so that its peak resident memory can be read on its own.
TEST(Json, MemoryOfPathologicalFileIsBoundedByItsSize) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "lathe-nested-arrays.json";
  {
    std::ofstream out(path, std::ios::binary);
    out << '[';
    const std::string one = std::string(400, '[') + std::string(400, ']');
    for (int k = 0; k < 62500; ++k) out << (k ? "," : "") << one;  // 50 MB
    out << ']';
  }
  const auto size = std::filesystem::file_size(path);
  const auto start = std::chrono::steady_clock::now();
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    const std::string m = error_of([&] { read_json_file(path); });
    (void)!write(pipefd[1], m.data(), m.size());
    _exit(0);
  }
  close(pipefd[1]);
  std::string message;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) message.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::filesystem::remove(path);
  EXPECT_NE(
      message.find(path.string() + ": JSON of " + std::to_string(size) + " bytes would take about"),
      std::string::npos)
      << message;
  const double peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
  EXPECT_LT(peak_mib, 3.0 * static_cast<double>(size) / (1 << 20) + 64) << "peak " << peak_mib;
  EXPECT_LT(seconds, 20.0);  // a scan, not a parse; generous for a loaded or sanitized build
  // Real files stay well inside the bound: a dense but ordinary document parses.
  std::string merges = "[";
  for (int k = 0; k < 200000; ++k) merges += std::string(k ? "," : "") + R"(["ab","cd"])";
  EXPECT_EQ(parse_json(merges + "]", "merges.json").size(), 200000u);
}

}  // namespace
}  // namespace lathe
