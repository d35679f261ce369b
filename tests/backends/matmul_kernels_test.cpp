// The f32 and bf16 matmul tiles (isa_kernels.inc): at every level this CPU runs, a row of x
// gets the same bits alone (a decode step's one-row tile) as among many rows (a prompt's
// tiles of several rows, the one-row tile at a row block's edge), whatever the row block and
// however k ends against the tiles' steps. A prompt split into steps, or a batch, relies on
// it; the bf16 weights' two-vector steps (PairPolicy) must keep it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace lathe::cpu {
namespace {

struct LevelGuard {  // gives back the level the test found (LATHE_CPU_ISA's, in CI's reruns)
  Isa saved = active_isa();
  ~LevelGuard() { set_active_isa(saved); }
};

TEST(MatmulKernels, ARowAloneGivesItsBitsAmongManyRows) {
  LevelGuard guard;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pool(2);
  constexpr int64_t m = 7, n = 29;  // n: not a multiple of any tile's weight rows
  for (int level = 0; level <= static_cast<int>(detected_isa()); ++level) {
    const auto isa = static_cast<Isa>(level);
    set_active_isa(isa);
    for (DType dt : {DType::F32, DType::BF16}) {
      for (int64_t k : {int64_t{3}, int64_t{16}, int64_t{17}, int64_t{32}, int64_t{33}, int64_t{47},
                        int64_t{100}, int64_t{576}}) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(dt)) +
                     " k=" + std::to_string(k));
        std::vector<float> x(static_cast<size_t>(m * k)), wf(static_cast<size_t>(n * k));
        for (float& v : x) v = normal(rng);
        for (float& v : wf) v = normal(rng);
        std::vector<uint16_t> wb(wf.size());
        for (size_t i = 0; i < wf.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
        const void* w = dt == DType::F32 ? static_cast<const void*>(wf.data()) : wb.data();
        std::vector<uint8_t> scratch(matmul_scratch_bytes(dt, m, k) + 64);
        std::vector<float> alone(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i)
          matmul_fast(x.data() + i * k, w, dt, nullptr, alone.data() + i * n, 1, n, k,
                      scratch.data(), pool);
        for (int64_t row_block : {int64_t{96}, int64_t{3}}) {
          std::vector<float> many(static_cast<size_t>(m * n), -1.0f);
          matmul_fast(x.data(), w, dt, nullptr, many.data(), m, n, k, scratch.data(), pool,
                      {.row_block = row_block});
          EXPECT_EQ(0, std::memcmp(many.data(), alone.data(), many.size() * sizeof(float)))
              << "row_block " << row_block;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lathe::cpu
