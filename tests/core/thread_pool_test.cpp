#include <gtest/gtest.h>

#include <atomic>
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

TEST(ThreadPool, RespectsGrain) {
  ThreadPool pool(4);
  std::atomic<int> chunks{0};
  pool.parallel_for(10, 8, [&](int64_t, int64_t) { chunks++; });
  EXPECT_EQ(chunks.load(), 1);  // 10 items at a grain of 8 make one chunk
}

}  // namespace
}  // namespace lathe
