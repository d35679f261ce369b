#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lathe {

namespace {

// How long a worker spins for the next loop before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);

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
  for (;;) {
    const int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= job_tasks_) return;
    (*job_)(job_n_ * t / job_tasks_, job_n_ * (t + 1) / job_tasks_);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, Job fn) {
  if (n <= 0) return;
  const int64_t most = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int64_t tasks = std::min<int64_t>(most, kTasksPerThread * size());
  if (tasks == 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_tasks_ = tasks;
  next_task_.store(0, std::memory_order_relaxed);
  busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_tasks();
  // Every worker checks in before fn (on this stack) may go.
  if (!spin_until([this] { return busy_.load(std::memory_order_acquire) == 0; })) {
    for (int b; (b = busy_.load(std::memory_order_acquire)) != 0;)
      busy_.wait(b, std::memory_order_acquire);
  }
  job_ = nullptr;
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
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
  }
}

}  // namespace lathe
