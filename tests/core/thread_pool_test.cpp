#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace lathe {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 5, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 3; ++rep)
        pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 3) << threads << " " << n;
    }
  }
}

// A loop splits into at most kTasksPerThread tasks per thread, each of contiguous items,
// together covering [0, n) once (tasks may run on any thread, in any order).
TEST(ThreadPool, SplitsIntoBoundedContiguousTasks) {
  ThreadPool pool(2);
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    ranges.emplace_back(b, e);
  });
  std::sort(ranges.begin(), ranges.end());
  ASSERT_EQ(ranges.size(), static_cast<size_t>(ThreadPool::kTasksPerThread * 2));
  int64_t next = 0;
  for (auto [b, e] : ranges) {
    EXPECT_EQ(b, next);
    EXPECT_LT(b, e);
    next = e;
  }
  EXPECT_EQ(next, 1000);
}

// Workers that went to sleep between loops (longer than they spin) wake for the next one.
TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::atomic<int64_t> sum{0};
    pool.parallel_for(300, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    EXPECT_EQ(sum.load(), 300 * 299 / 2);
  }
}

TEST(ThreadPool, RespectsGrain) {
  ThreadPool pool(4);
  std::atomic<int> chunks{0};
  pool.parallel_for(10, 8, [&](int64_t, int64_t) { chunks++; });
  EXPECT_EQ(chunks.load(), 1);  // 10 items at a grain of 8 make one chunk
}

}  // namespace
}  // namespace lathe
