// Test helpers: running the lathe binary and scratch folders.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace lathe::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs a shell command and captures its output (stdout and stderr as the command sends them)
// and exit code.
inline RunResult run_shell(const std::string& cmd) {
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Runs `lathe ARGS` through the shell and captures its output and exit code.
inline RunResult run_lathe(const std::string& args) {
  return run_shell(std::string(LATHE_BINARY) + " " + args + " 2>&1");
}

struct SplitRunResult {
  int exit_code = -1;
  std::string out, err;  // stdout, stderr
};

// Runs `lathe ARGS` through the shell with stdout and stderr captured apart.
inline SplitRunResult run_lathe_split(const std::string& args) {
  SplitRunResult r;
  char err_file[] = "/tmp/lathe-test-stderr-XXXXXX";
  const int fd = mkstemp(err_file);
  if (fd < 0) return r;
  close(fd);
  const RunResult run = run_shell(std::string(LATHE_BINARY) + " " + args + " 2>" + err_file);
  r.exit_code = run.exit_code;
  r.out = run.out;
  std::ifstream in(err_file, std::ios::binary);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::remove(err_file);
  return r;
}

// Runs `ENV lathe ARGS` (ENV: a command prefix such as "env A=1") with stdout and stderr
// captured apart.
inline SplitRunResult run_lathe_split_env(const std::string& env, const std::string& args) {
  SplitRunResult r;
  char err_file[] = "/tmp/lathe-test-stderr-XXXXXX";
  const int fd = mkstemp(err_file);
  if (fd < 0) return r;
  close(fd);
  const RunResult run =
      run_shell(env + " " + std::string(LATHE_BINARY) + " " + args + " 2>" + err_file);
  r.exit_code = run.exit_code;
  r.out = run.out;
  std::ifstream in(err_file, std::ios::binary);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::remove(err_file);
  return r;
}

// Runs `lathe ARGS` with file writes limited to `kib` KiB (RLIMIT_FSIZE, SIGXFSZ ignored, so
// a write past the limit fails with EFBIG as it would with ENOSPC on a full disk).
inline RunResult run_lathe_with_full_disk(int kib, const std::string& args) {
  return run_shell("/bin/bash -c \"trap '' XFSZ; ulimit -f " + std::to_string(kib) + "; exec " +
                   LATHE_BINARY + " " + args + "\" 2>&1");
}

// A fresh folder under the system temp folder, removed when the object dies.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("lathe-test-" + tag + "-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& p) const { return path_ / p; }

 private:
  std::filesystem::path path_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::filesystem::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

// The file's SHA-256 in lowercase hex (coreutils sha256sum), or "" when it cannot be read.
inline std::string sha256_of(const std::filesystem::path& p) {
  const RunResult r = run_shell("sha256sum -b '" + p.string() + "' 2>/dev/null");
  if (r.exit_code != 0 || r.out.size() < 64) return "";
  return r.out.substr(0, 64);
}

inline std::string fixture_dir(const std::string& name) {
  return std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/tiny/" + name;
}

// Every tiny fixture with goldens (a folder of tests/fixtures/tiny with goldens.json), sorted.
inline std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/tiny"))
    if (std::filesystem::exists(e.path() / "goldens.json"))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace lathe::testing
