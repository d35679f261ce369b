#include "shard/worker.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "shard/mpi_plugin.h"
#include "shard/planner.h"

namespace lathe::shard {

namespace fs = std::filesystem;

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The commands that run a model and take --tp and --ep (the lab's run-one: the sweep starts
// one per model, sharded when the sweep is).
bool runs_a_model(int argc, char** argv) {
  const std::string command = argv[1];
  return command == "generate" || command == "logits" || command == "bench" || command == "tiny" ||
         (command == "lab" && argc > 2 && std::string(argv[2]) == "run-one");
}

// A status line a worker keeps in a small file that both it and the launcher map: state,
// collectives finished, last message. Written with plain stores (no system call per step),
// so it survives the worker's death in the page cache.
constexpr size_t kStatusBytes = 512;
constexpr size_t kStateWidth = 12;  // "running     ", then a tab

std::string status_path(const std::string& dir, int rank) {
  return cat(dir, "/rank-", rank, ".status");
}

// The state, the count and the message of a status file ("" when absent).
struct Status {
  std::string state, count, message;
};
Status read_status(const std::string& dir, int rank) {
  std::ifstream in(status_path(dir, rank), std::ios::binary);
  std::string text(kStatusBytes, '\0');
  in.read(text.data(), kStatusBytes);
  text.resize(static_cast<size_t>(in.gcount()));
  text = text.substr(0, text.find('\0'));
  Status s;
  const size_t a = text.find('\t'), b = a == std::string::npos ? a : text.find('\t', a + 1);
  if (b == std::string::npos) return s;
  s.state = text.substr(0, a);
  s.state.erase(s.state.find_last_not_of(' ') + 1);
  s.count = text.substr(a + 1, b - a - 1);
  s.count.erase(s.count.find_last_not_of(' ') + 1);
  s.message = text.substr(b + 1);
  if (!s.message.empty() && s.message.back() == '\n') s.message.pop_back();
  return s;
}

char* g_status = nullptr;  // the worker's mapped status line, for the SIGTERM handler

void on_sigterm(int) {
  // mpirun stops the other ranks of a failed run with SIGTERM: say so, so the launcher can
  // tell them from the rank that failed.
  if (g_status) std::memcpy(g_status, "terminated  ", kStateWidth);
  _exit(128 + SIGTERM);
}

class MpiWorker final : public Worker, public graph::Collectives {
 public:
  explicit MpiWorker(const ShardRequest& r)
      : mpi_(load_plugin<MpiPlugin>(MpiPlugin::kFile, "the MPI plug-in")) {
    mpi_.init(&rank_, &size_);
    spec_ = {r.parallelism, r.degree, rank_, this};
    if (const char* d = env("LATHE_SHARD_DIR")) dir_ = d;
    if (const char* t = env("LATHE_SHARD_TIMEOUT")) timeout_ = std::max(0.1, std::atof(t));
    if (const char* f = env("LATHE_SHARD_TEST_FAULT")) parse_fault(f);
    if (const char* m = env("LATHE_SHARD_MEMORY")) limit_memory(m);
    // The machine's cores (this rank's affinity is its own cores only).
    if (size_ > std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))) yield_seconds_ = 0;
    if (!dir_.empty()) map_status();
    if (rank_ != 0) {
      if (!std::freopen("/dev/null", "w", stdout)) fail("cannot silence rank ", rank_, "'s stdout");
      if (!dir_.empty() && !std::freopen(cat(dir_, "/rank-", rank_, ".log").c_str(), "w", stderr))
        fail("cannot open rank ", rank_, "'s log in ", dir_);
    }
    if (size_ != r.degree) {
      finish(1, "");
      fail("rank ", rank_, ": MPI started ", size_, " processes for ",
           parallelism_name(r.parallelism), "=", r.degree, " (mpirun -np must equal the degree)");
    }
    status("loading");
  }

  const RankSpec& spec() const override { return spec_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int default_threads() const override {
    if (const char* t = env("LATHE_SHARD_THREADS")) return std::max(1, std::atoi(t));
    return machine_cores();
  }

  void status(const std::string& message) override {
    message_ = message;
    write_status("running");
  }

  void broadcast(std::vector<int32_t>& data) override {
    int64_t n = static_cast<int64_t>(data.size());
    mpi_.broadcast_i64(&n, 1);
    if (n < 0 || n > INT_MAX) fail("internal: a broadcast of ", n, " values");
    data.resize(static_cast<size_t>(n));
    mpi_.broadcast_i32(data.data(), static_cast<int>(n));
  }

  int64_t sum(int64_t value) override { return mpi_.sum_i64(value); }

  void finish(int code, const std::string& error) override {
    if (code != 0) {
      // An error, or the command's own failure (rank 0 printed what failed).
      if (!error.empty()) message_ = error;
      write_status(error.empty() ? "exit" : "error");
      std::fflush(stdout);
      std::fflush(stderr);
      return;
    }
    write_status("done");
    std::fflush(stdout);
    mpi_.finalize();
  }

  void all_gather(const float* in, int64_t n, float* out, const std::string& what) override {
    if (n > INT_MAX) fail("internal: an all-gather of ", n, " floats");
    fault_check(count_ + 1);
    ++count_;  // the status counts the collectives this rank has entered
    message_ = what;
    write_status("running");
    uint64_t request = 0;
    mpi_.start_all_gather(in, static_cast<int>(n), out, &request);
    // Wait with a deadline: spin for 50 us (the ranks usually arrive together), yield the core
    // until 2 ms, then sleep 20 us at a time; with more ranks than cores, sleep after the spin
    // (a yielding rank can keep the core from the rank it waits for).
    const auto start = std::chrono::steady_clock::now();
    for (int64_t spins = 0;; ++spins) {
      if (mpi_.test(&request)) return;
      if (spins < 64) continue;
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_) give_up(waited);
      if (waited < 50e-6) continue;
      if (waited < yield_seconds_)
        sched_yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  // Each rank's own memory budget (LATHE_SHARD_MEMORY, bytes): RLIMIT_DATA, which counts what
  // the rank allocates (its slices, KV cache, arena, heap) and not the checkpoint it maps
  // read-only, so an allocation past it fails as out of memory on that rank alone.
  void limit_memory(const std::string& bytes) {
    const auto n = parse_size(bytes);
    if (!n || *n == 0) fail("LATHE_SHARD_MEMORY must be a size such as 2G, got \"", bytes, "\"");
    const rlimit r{static_cast<rlim_t>(*n), static_cast<rlim_t>(*n)};
    if (setrlimit(RLIMIT_DATA, &r) != 0) fail("cannot limit rank ", rank_, "'s memory to ", bytes);
  }

  void map_status() {
    const std::string path = status_path(dir_, rank_);
    FILE* f = std::fopen(path.c_str(), "w+");
    if (!f) fail("cannot create ", path);
    const int fd = fileno(f);
    if (ftruncate(fd, kStatusBytes) != 0) fail("cannot size ", path);
    void* p = mmap(nullptr, kStatusBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    std::fclose(f);
    if (p == MAP_FAILED) fail("cannot map ", path);
    status_ = static_cast<char*>(p);
    g_status = status_;
    struct sigaction sa = {};
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, nullptr);
  }

  void write_status(const char* state) {
    if (!status_) return;
    const int n = std::snprintf(status_, kStatusBytes, "%-12s\t%-20lld\t%s\n", state,
                                static_cast<long long>(count_), message_.c_str());
    if (n >= 0 && static_cast<size_t>(n) < kStatusBytes)
      std::memset(status_ + n, 0, kStatusBytes - static_cast<size_t>(n));
  }

  // No answer within the deadline: say which ranks are behind and what they last did, then
  // end the whole run (mpirun stops every rank).
  [[noreturn]] void give_up(double waited) {
    std::string behind;
    if (!dir_.empty())
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        const Status s = read_status(dir_, r);
        const long long c = std::atoll(s.count.c_str());
        if (c < count_)
          behind += cat(behind.empty() ? "" : "; ", "rank ", r, " is at collective ", c,
                        " (its last message: \"", s.message, "\")");
      }
    const std::string error = cat("rank ", rank_, ": no answer from the other ranks within ",
                                  waited, " s (LATHE_SHARD_TIMEOUT) at collective ", count_, " (",
                                  message_, ")", behind.empty() ? "" : ": " + behind);
    std::cerr << "error: " << error << "\n";
    finish(1, error);
    mpi_.abort(1);
    std::_Exit(1);
  }

  // LATHE_SHARD_TEST_FAULT=kill:RANK:N or hang:RANK:N: that rank is killed by SIGKILL, or
  // stops answering, before entering its Nth collective (the tests of a failing worker).
  void parse_fault(const std::string& f) {
    const size_t a = f.find(':'), b = f.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) return;
    fault_kind_ = f.substr(0, a);
    fault_rank_ = std::atoi(f.substr(a + 1, b - a - 1).c_str());
    fault_at_ = std::atoll(f.substr(b + 1).c_str());
  }
  void fault_check(int64_t next) {
    if (fault_rank_ != rank_ || next != fault_at_) return;
    message_ += cat(" [test fault: ", fault_kind_, "]");
    write_status("running");
    if (fault_kind_ == "kill") raise(SIGKILL);
    if (fault_kind_ == "hang")
      for (;;) pause();
  }

  const MpiPlugin& mpi_;  // Open MPI, through its plug-in
  int rank_ = 0, size_ = 1;
  RankSpec spec_;
  std::string dir_, message_;
  char* status_ = nullptr;
  int64_t count_ = 0;
  double timeout_ = 60;
  double yield_seconds_ = 2e-3;
  std::string fault_kind_;
  int fault_rank_ = -1;
  int64_t fault_at_ = -1;
};

std::unique_ptr<MpiWorker> g_worker;

// Failed runs keep their status folder for the user to read; a launcher keeps the newest
// kKeptShardDirs of the finished ones beside its own and removes the rest.
constexpr size_t kKeptShardDirs = 8;
constexpr const char* kLauncherPidFile = "launcher.pid";

// Whether the run that made `dir` (a lathe-shard-* folder) has ended: its launcher is gone.
// A folder without the launcher's pid (one of an older lathe, or one a launcher has just
// made) counts as ended once it is a minute old.
bool shard_dir_ended(const fs::path& dir) {
  std::ifstream in(dir / kLauncherPidFile);
  long pid = 0;
  if (in >> pid && pid > 0) return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
  std::error_code ec;
  const auto age = fs::file_time_type::clock::now() - fs::last_write_time(dir, ec);
  return !ec && age > std::chrono::minutes(1);
}

// Removes all but the newest kKeptShardDirs ended lathe-shard-* folders of this user in
// `parent`.
void prune_shard_dirs(const fs::path& parent) {
  std::vector<std::pair<fs::file_time_type, fs::path>> ended;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    struct stat st {};
    if (!name.starts_with("lathe-shard-") || lstat(e.path().c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || !shard_dir_ended(e.path()))
      continue;
    ended.emplace_back(fs::last_write_time(e.path(), ec), e.path());
  }
  if (ended.size() <= kKeptShardDirs) return;
  std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) { return a > b; });
  for (size_t i = kKeptShardDirs; i < ended.size(); ++i) fs::remove_all(ended[i].second, ec);
}

// Waits for mpirun; SIGINT, SIGTERM or SIGHUP to the launcher meanwhile is passed on to it
// (which stops the workers) and recorded in `stopped_by`. Returns waitpid's status.
int wait_for_mpirun(pid_t child, const sigset_t& stop_signals, int& stopped_by) {
  int status = 0;
  auto forwarded = std::chrono::steady_clock::now();
  for (;;) {
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      const timespec now{0, 0};  // one that came as mpirun ended
      if (const int sig = sigtimedwait(&stop_signals, nullptr, &now); sig > 0) stopped_by = sig;
      return status;
    }
    if (done < 0 && errno != EINTR) fail("waiting for mpirun failed");
    const timespec tick{0, 50 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    const auto now = std::chrono::steady_clock::now();
    if (sig > 0) {
      if (!stopped_by) forwarded = now;
      stopped_by = sig;
      kill(child, SIGTERM);
    }
    // mpirun stops its workers within a few seconds of a SIGTERM; one that does not is killed.
    if (stopped_by && now - forwarded > std::chrono::seconds(10)) kill(child, SIGKILL);
  }
}

int degree_value(const std::string& option, const std::string& value) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end || v < 1 || v > 256)
    throw UsageError(
        cat("--", option, " must be a number of ranks from 1 to 256, got \"", value, "\""));
  return static_cast<int>(v);
}

}  // namespace

std::optional<ShardRequest> find_request(int argc, char** argv) {
  if (argc < 2 || !runs_a_model(argc, argv)) return std::nullopt;
  std::optional<ShardRequest> found;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return std::nullopt;
    for (const char* option : {"tp", "ep"}) {
      const std::string flag = cat("--", option);
      std::optional<std::string> value;
      if (a == flag && i + 1 < argc) value = argv[i + 1];
      if (a.rfind(flag + "=", 0) == 0) value = a.substr(flag.size() + 1);
      if (!value) continue;
      if (found) throw UsageError("--tp and --ep exclude each other (give one degree)");
      found = ShardRequest{option[0] == 't' ? Parallelism::Tensor : Parallelism::Expert,
                           degree_value(option, *value)};
    }
  }
  // The launcher adds --tp or --ep to a command whose --cores chose the degree; a user gives
  // one or the other.
  for (int i = 2; i < argc && found && !under_mpi(); ++i)
    if (std::string_view(argv[i]).starts_with("--cores"))
      throw UsageError("--cores chooses the degree: give it or --tp/--ep, not both");
  if (found && found->degree == 1) return std::nullopt;
  return found;
}

bool under_mpi() {
  return env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK") || env("PMI_SIZE");
}

Worker& Worker::start(const ShardRequest& request) {
  if (g_worker) fail("internal: a second worker in one process");
  g_worker = std::make_unique<MpiWorker>(request);
  return *g_worker;
}

Worker* Worker::current() {
  return g_worker.get();
}

std::string current_layout() {
  if (!g_worker) return "tp1";
  return cat(parallelism_name(g_worker->spec().parallelism), g_worker->spec().degree);
}

std::function<std::unique_ptr<Model>(std::unique_ptr<Model>)> Worker::model_wrap() {
  const RankSpec s = spec();
  return [s](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
    return std::make_unique<ShardedModel>(std::move(m), s);
  };
}

int launch(const ShardRequest& request, int argc, char** argv, bool add_degree) {
  // The workers load the MPI plug-in first thing: a missing or broken one is one error here,
  // before any process starts.
  load_plugin<MpiPlugin>(MpiPlugin::kFile, "the MPI plug-in");
  const int n = request.degree, cores = machine_cores();
  const int threads = std::max(1, cores / n);
  const std::string parent = env("TMPDIR") ? env("TMPDIR") : "/tmp";
  prune_shard_dirs(parent);
  const std::string base = parent + "/lathe-shard-XXXXXX";
  std::vector<char> dir_buf(base.begin(), base.end());
  dir_buf.push_back('\0');
  if (!mkdtemp(dir_buf.data())) fail("cannot make a folder for the workers' status in ", base);
  const std::string dir = dir_buf.data();
  std::ofstream(cat(dir, "/", kLauncherPidFile)) << getpid() << "\n";
  std::error_code ec;
  const std::string exe = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) fail("cannot find this program's path (/proc/self/exe)");

  std::vector<std::string> cmd = {"mpirun", "-q", "-np", std::to_string(n)};
  if (n > cores)
    cmd.insert(cmd.end(), {"--oversubscribe", "--bind-to", "none"});
  else
    cmd.insert(cmd.end(), {"--map-by", cat("slot:PE=", threads), "--bind-to", "core"});
  setenv("LATHE_SHARD_DIR", dir.c_str(), 1);
  setenv("LATHE_SHARD_THREADS", std::to_string(threads).c_str(), 1);
  if (request.memory > 0) setenv("LATHE_SHARD_MEMORY", std::to_string(request.memory).c_str(), 1);
  for (const char* var : {"LATHE_SHARD_DIR", "LATHE_SHARD_THREADS", "LATHE_SHARD_MEMORY"})
    if (env(var)) cmd.insert(cmd.end(), {"-x", var});
  cmd.push_back(exe);
  for (int i = 1; i < argc; ++i) cmd.push_back(argv[i]);
  if (add_degree)
    cmd.insert(cmd.end(),
               {request.parallelism == Parallelism::Tensor ? "--tp" : "--ep", std::to_string(n)});
  // Open MPI refuses root unless told; a container's root is the usual user there.
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  std::cout.flush();
  std::cerr.flush();
  // A stop signal to the launcher is taken while it waits (wait_for_mpirun), not by the
  // default action, which left the status folder behind and said nothing.
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
  const pid_t launcher = getpid();
  const pid_t child = fork();
  if (child < 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    fs::remove_all(dir, ec);
    fail("cannot start mpirun: fork failed");
  }
  if (child == 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // the launcher killed: mpirun stops the workers
    if (getppid() != launcher) _exit(1);
    std::vector<char*> args;
    for (std::string& s : cmd) args.push_back(s.data());
    args.push_back(nullptr);
    execvp("mpirun", args.data());
    std::fprintf(stderr,
                 "error: --%s needs Open MPI's mpirun, which was not found on PATH (Debian: "
                 "apt-get install openmpi-bin)\n",
                 request.parallelism == Parallelism::Tensor ? "tp" : "ep");
    _exit(127);
  }
  int stopped_by = 0;
  const int status = wait_for_mpirun(child, stop_signals, stopped_by);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (stopped_by) {
    fs::remove_all(dir, ec);
    std::cerr << "error: stopped by SIG" << sigabbrev_np(stopped_by)
              << "; the workers were stopped and their status folder removed\n";
    return 128 + stopped_by;
  }
  if (WIFSIGNALED(status)) {
    // mpirun itself was killed (a rank's death is mpirun's exit status, not its signal): the
    // ranks were stopped with it, and none of them is to blame.
    std::cerr << "error: mpirun was killed by signal " << WTERMSIG(status) << " (SIG"
              << sigabbrev_np(WTERMSIG(status)) << "), which stopped the workers (their status "
              << "and logs: " << dir << ")\n";
    return 1;
  }
  const int code = WEXITSTATUS(status);
  if (code == 0 || code == 127) {
    fs::remove_all(dir, ec);
    return code == 0 ? 0 : 1;
  }
  // The command ran on every rank and failed as a command does (rank 0 said why).
  bool ended = true;
  for (int r = 0; r < n; ++r) {
    const std::string state = read_status(dir, r).state;
    ended = ended && (state == "exit" || state == "done");
  }
  if (ended) {
    fs::remove_all(dir, ec);
    return code;
  }
  // Name the rank that failed: one that recorded an error, else one that ended while running
  // (killed, or stopped by mpirun while it hung); the others were stopped by mpirun.
  std::string failed;
  bool errors = false;
  for (int r = 0; r < n; ++r) {
    const Status s = read_status(dir, r);
    if (s.state == "error") {
      errors = true;
      // Rank 0 printed its own error; the others' stderr went to their logs (a rank that
      // failed as rank 0 did, at load say, is not repeated).
      if (r != 0 && s.message != read_status(dir, 0).message)
        failed += cat("error: rank ", r, " failed: ", s.message, "\n");
    }
  }
  if (!errors)
    for (int r = 0; r < n; ++r) {
      const Status s = read_status(dir, r);
      if (s.state == "running" || s.state.empty())
        failed += cat("error: rank ", r, " ended while running (mpirun's exit status ", code,
                      code > 128 ? cat(": signal ", code - 128) : std::string(),
                      "); its last message: \"", s.message.empty() ? "none" : s.message,
                      "\" after ", s.count.empty() ? "0" : s.count, " collectives\n");
    }
  if (failed.empty() && !errors) failed = cat("error: the workers ended with status ", code, "\n");
  // The folder's name ends the last line (on a line of its own after rank 0's own error).
  if (!failed.empty()) failed.back() = ' ';
  std::cerr << failed << "(the workers' status and logs: " << dir << ")\n";
  return 1;
}

}  // namespace lathe::shard
