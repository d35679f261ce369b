// A fixed pool of worker threads for data-parallel loops. Passed to whoever needs it (no
// global pool). The calling thread takes part in the work. Between loops the workers spin for
// a while (a decode step runs hundreds of short loops, and waking a sleeping thread costs
// more than most of them) and then sleep until the next loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace lathe {

class ThreadPool {
 public:
  // `threads` counts the caller: ThreadPool(1) runs everything on the calling thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // A borrowed reference to a callable fn(begin, end): unlike std::function it never
  // allocates, so a parallel loop in a planned step costs no heap allocation.
  class Job {
   public:
    template <class F>
    Job(const F& fn)  // NOLINT(google-explicit-constructor): built from lambdas at call sites
        : obj_(&fn),
          call_([](const void* o, int64_t b, int64_t e) { (*static_cast<const F*>(o))(b, e); }) {}
    void operator()(int64_t begin, int64_t end) const { call_(obj_, begin, end); }

   private:
    const void* obj_;
    void (*call_)(const void*, int64_t, int64_t);
  };

  // Splits [0, n) into contiguous tasks of at least `grain` items (at most tasks_per_thread
  // per thread, so that a thread slowed by others' work hands its share to the rest), calls
  // fn(begin, end) once for each, on whichever thread claims it first, and returns when all
  // are done. Not re-entrant.
  void parallel_for(int64_t n, int64_t grain, Job fn, int tasks_per_thread = kTasksPerThread);
  static constexpr int64_t kTasksPerThread = 4;

 private:
  void worker_loop();
  // Claims and runs tasks of the current loop until none is left.
  void run_tasks();

  std::vector<std::thread> workers_;
  // The current loop: written before state_ announces it, read by a thread only after it
  // claimed one of its tasks (so never while the next loop is being written: that waits for
  // every claimed task to finish).
  const Job* job_ = nullptr;
  int64_t job_n_ = 0;
  // generation (24 bits) | tasks (20 bits) | next task to claim (20 bits).
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> done_{0};         // tasks of the current loop finished
  std::atomic<uint32_t> generation_{0};  // one more per loop; sleeping workers wait on it
  std::atomic<bool> stop_{false};
};

}  // namespace lathe
