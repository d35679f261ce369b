// A fixed pool of worker threads for data-parallel loops. Passed to whoever needs it (no
// global pool). The calling thread takes part in the work.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
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

  // Splits [0, n) into at most size() contiguous chunks of at least `grain` items and calls
  // fn(begin, end) for each, returning when all are done. Not re-entrant.
  void parallel_for(int64_t n, int64_t grain, Job fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  const Job* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace lathe
