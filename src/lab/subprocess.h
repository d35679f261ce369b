// Running a command in its own process group with a wall-clock timeout, an address-space
// limit and its output in a log file: how the lab isolates each model, so that a crash, an
// out-of-memory or a hang ends that model's run and not the sweep.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lathe {

struct ProcessOptions {
  std::vector<std::string> argv;   // argv[0] is looked up in PATH when it has no slash
  std::filesystem::path log_file;  // stdout and stderr are appended here (empty: inherited)
  int64_t memory_limit_bytes = 0;  // soft RLIMIT_AS of the process (0: none)
  bool lift_memory_limit = false;  // raise an inherited soft RLIMIT_AS to its hard limit
  double timeout_seconds = 0;      // 0: none; else SIGKILL to the whole group when it passes
};

struct ProcessResult {
  std::optional<int> exit_code;  // set when it exited
  std::optional<int> signal;     // set when a signal ended it (SIGKILL on timeout too)
  bool timed_out = false;
  int64_t peak_rss_bytes = 0;
  double seconds = 0;
};

// Starts the process, waits for it (killing its group at the timeout) and reports how it
// ended. Throws lathe::Error when it cannot be started at all.
ProcessResult run_process(const ProcessOptions& opts);

// The last `max_bytes` of a file (from a line start when possible), "" when it is missing.
std::string file_tail(const std::filesystem::path& path, size_t max_bytes);

// The path of the running executable (/proc/self/exe).
std::filesystem::path self_executable();

}  // namespace lathe
