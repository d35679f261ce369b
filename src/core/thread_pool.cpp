#include "core/thread_pool.h"

#include <algorithm>

namespace lathe {

namespace {
void chunk_range(int64_t n, int chunks, int index, int64_t* begin, int64_t* end) {
  *begin = n * index / chunks;
  *end = n * (index + 1) / chunks;
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int extra = std::max(threads, 1) - 1;
  for (int i = 0; i < extra; ++i) workers_.emplace_back([this, i] { worker_loop(i + 1); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, Job fn) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int chunks = static_cast<int>(std::min<int64_t>(size(), max_chunks));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t begin, end;
  chunk_range(n, chunks, 0, &begin, &end);
  fn(begin, end);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const Job* job;
    int64_t n;
    int chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (index < chunks) {
      int64_t begin, end;
      chunk_range(n, chunks, index, &begin, &end);
      (*job)(begin, end);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace lathe
