// tests/lab/fake_hub.py, the loopback stand-in for the Hub's HTTP API, as a test fixture: one
// server process per object, stopped when it goes. Needs LATHE_PYTHON defined.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/run.h"

extern char** environ;

namespace lathe::testing {

// Starts `command` through /bin/sh (exec'd, so the process id is the command's own).
inline pid_t spawn(const std::string& command) {
  std::vector<std::string> args = {"/bin/sh", "-c", "exec " + command};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

inline bool wait_for(const std::function<bool()>& ready, int seconds = 60) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// One fake_hub.py process on `host`, serving the repositories of `repos`; it writes its port
// to `port_file` and each request it answers to `port_file`.requests.
class FakeHub {
 public:
  FakeHub(const std::filesystem::path& port_file, const std::filesystem::path& repos,
          const std::string& host)
      : port_file_(port_file) {
    pid_ = spawn(std::string(LATHE_PYTHON) + " " + LATHE_SOURCE_DIR + "/tests/lab/fake_hub.py " +
                 port_file.string() + " --repos " + repos.string() + " --host " + host);
    if (pid_ > 0 && wait_for([&] { return std::filesystem::exists(port_file); }))
      url_ = "http://" + host + ":" + read_file(port_file);
  }
  ~FakeHub() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;
  const std::string& url() const { return url_; }
  std::string requests() const {
    return read_file(std::filesystem::path(port_file_.string() + ".requests"));
  }

 private:
  std::filesystem::path port_file_;
  pid_t pid_ = -1;
  std::string url_;
};

}  // namespace lathe::testing
