#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lathe {

namespace {

// How long a thread spins for the next loop (a worker) or for the last tasks (the caller)
// before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);

constexpr int kTaskBits = 20;
constexpr uint64_t kTaskMask = (uint64_t{1} << kTaskBits) - 1;

uint64_t tasks_of(uint64_t s) {
  return (s >> kTaskBits) & kTaskMask;
}
uint64_t next_of(uint64_t s) {
  return s & kTaskMask;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins until done() or kSpin has passed; returns done().
template <class F>
bool spin_until(const F& done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int extra = std::max(threads, 1) - 1;
  for (int i = 0; i < extra; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_tasks() {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t tasks = tasks_of(s), t = next_of(s);
    if (t >= tasks) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    const int64_t n = job_n_, count = static_cast<int64_t>(tasks), i = static_cast<int64_t>(t);
    (*job_)(n * i / count, n * (i + 1) / count);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == count) done_.notify_one();
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, Job fn, int tasks_per_thread) {
  if (n <= 0) return;
  const int64_t most = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int64_t tasks = std::min<int64_t>(most, std::max(1, tasks_per_thread) * int64_t{size()});
  if (tasks == 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t g = generation_.load(std::memory_order_relaxed) + 1;
  state_.store(
      (uint64_t{g & 0xffffff} << (2 * kTaskBits)) | (static_cast<uint64_t>(tasks) << kTaskBits),
      std::memory_order_release);
  generation_.store(g, std::memory_order_release);
  generation_.notify_all();
  run_tasks();
  // Every task claimed must finish before fn (on this stack) may go; a worker that wakes
  // late finds nothing left to claim and never touches fn.
  auto finished = [&] { return done_.load(std::memory_order_acquire) == tasks; };
  if (!spin_until(finished))
    for (int64_t d; (d = done_.load(std::memory_order_acquire)) != tasks;)
      done_.wait(d, std::memory_order_acquire);
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }))
      generation_.wait(seen, std::memory_order_acquire);
    const uint32_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) continue;  // a spurious wake-up
    seen = g;
    if (stop_.load()) return;
    run_tasks();
  }
}

}  // namespace lathe
