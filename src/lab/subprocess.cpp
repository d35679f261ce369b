#include "lab/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/sanitizers.h"

extern char** environ;

namespace lathe {
namespace fs = std::filesystem;

namespace {

// Whether the process is this executable, built with AddressSanitizer (the lab's own
// processes in a sanitizer build): its shadow memory cannot live under RLIMIT_AS.
bool runs_asan_self(const ProcessOptions& o) {
  if (!kAddressSanitizer) return false;
  std::error_code ec;
  return fs::equivalent(o.argv[0], self_executable(), ec);
}

// The environment of an ASan process started with a memory limit: ASan enforces the limit on
// its resident size in place of RLIMIT_AS (allocations past it fail; a `new` that fails
// aborts, with "AddressSanitizer: out-of-memory" in its log).
std::vector<std::string> asan_limit_environment(int64_t memory_limit_bytes) {
  std::vector<std::string> env;
  std::string options;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    if (var.starts_with("ASAN_OPTIONS="))
      options = var.substr(13);
    else
      env.push_back(var);
  }
  env.push_back(cat("ASAN_OPTIONS=", options, options.empty() ? "" : ":",
                    "allocator_may_return_null=1:soft_rss_limit_mb=", memory_limit_bytes >> 20));
  return env;
}

// In the forked child, before exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const ProcessOptions& o, bool limit_by_asan, char* const* argv,
                             char* const* envp, int log_fd, pid_t parent) {
  ::setpgid(0, 0);
  // Die with the sweep: a killed sweep leaves no model running.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);
  if (o.lift_memory_limit) {
    rlimit r{};
    if (::getrlimit(RLIMIT_AS, &r) == 0) {
      r.rlim_cur = r.rlim_max;
      ::setrlimit(RLIMIT_AS, &r);
    }
  }
  if (o.memory_limit_bytes > 0 && !limit_by_asan) {
    rlimit r{};
    ::getrlimit(RLIMIT_AS, &r);
    r.rlim_cur = static_cast<rlim_t>(o.memory_limit_bytes);
    if (r.rlim_max != RLIM_INFINITY && r.rlim_cur > r.rlim_max) r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_AS, &r);
  }
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  if (log_fd >= 0) {
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
  }
  if (envp)
    ::execvpe(argv[0], argv, envp);
  else
    ::execvp(argv[0], argv);
  const char msg[] = "lathe: cannot start the process\n";
  (void)!::write(2, msg, sizeof msg - 1);
  ::_exit(127);
}

}  // namespace

ProcessResult run_process(const ProcessOptions& o) {
  if (o.argv.empty()) fail("run_process: no command");
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const bool limit_by_asan = o.memory_limit_bytes > 0 && runs_asan_self(o);
  const std::vector<std::string> env =
      limit_by_asan ? asan_limit_environment(o.memory_limit_bytes) : std::vector<std::string>{};
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int log_fd = -1;
  if (!o.log_file.empty()) {
    log_fd = ::open(o.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) fail(o.log_file.string(), ": cannot open log: ", std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    fail("cannot start ", o.argv[0], ": ", std::strerror(errno));
  }
  if (pid == 0)
    exec_child(o, limit_by_asan, argv.data(), env.empty() ? nullptr : envp.data(), log_fd, parent);
  if (log_fd >= 0) ::close(log_fd);
  ::setpgid(pid, pid);  // also from this side, so the group exists before any kill

  ProcessResult r;
  int status = 0;
  rusage usage{};
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (auto nap = std::chrono::milliseconds(1);;
       nap = std::min(nap * 2, std::chrono::milliseconds(50))) {
    const pid_t w = ::wait4(pid, &status, WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) fail("waiting for ", o.argv[0], ": ", std::strerror(errno));
    if (o.timeout_seconds > 0 && elapsed() > o.timeout_seconds) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(nap);
  }
  ::kill(-pid, SIGKILL);  // whatever the process left running in its group
  r.seconds = elapsed();
  r.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string file_tail(const fs::path& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes)
                                  ? size - static_cast<std::streamoff>(max_bytes)
                                  : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (from > 0)
    if (const size_t nl = text.find('\n'); nl != std::string::npos && nl + 1 < text.size())
      text.erase(0, nl + 1);
  return text;
}

fs::path self_executable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find the lathe executable (/proc/self/exe): ", ec.message());
  return p;
}

}  // namespace lathe
