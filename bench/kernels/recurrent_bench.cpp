// Recurrent kernel micro-benchmarks (Google Benchmark): the gated delta rule and Mamba2's scan,
// the reference kernels and the fast backend's at each level this CPU runs, on the shapes of
// Qwen3.5 / Qwen3-Next (16 key heads, 16 or 32 value heads of 128 x 128) and of a Mamba2 mixer
// (64 heads of 64 x 128), for 1 to 512 rows. Reports rows per second (docs/performance.md):
//   build/bench/kernels/recurrent_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/recurrent.h"

namespace lathe {
namespace {

std::vector<float> uniform(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct DeltaShape {
  int64_t k_heads, v_heads, dim;
  const char* what;
};
const DeltaShape kDeltaShapes[] = {{16, 16, 128, "qwen35"}, {16, 32, 128, "qwen3next"}};

void bm_delta(benchmark::State& state, DeltaShape s, int64_t n, bool reference, cpu::Isa isa,
              int threads) {
  cpu::set_active_isa(isa);
  const int64_t kh = s.k_heads, vh = s.v_heads, d = s.dim;
  const size_t nk = static_cast<size_t>(n * kh * d), nv = static_cast<size_t>(n * vh * d);
  const std::vector<float> q = uniform(nk, -1, 1, 1), k = uniform(nk, -1, 1, 2),
                           v = uniform(nv, -1, 1, 3), a = uniform(n * vh, -2, 2, 4),
                           b = uniform(n * vh, -2, 2, 5), a_log = uniform(vh, -1, 1, 6),
                           dt_bias = uniform(vh, -1, 1, 7);
  std::vector<float> st(static_cast<size_t>(vh * d * d)), out(nv),
      scratch(static_cast<size_t>(threads * cpu::delta_rule_scratch_floats(d, d)));
  ThreadPool pool(threads);
  const cpu::DeltaRuleArgs args{
      q.data(), k.data(), v.data(), a.data(), b.data(),  a_log.data(), dt_bias.data(), n,
      kh,       vh,       d,        d,        st.data(), out.data(),   scratch.data()};
  for (auto _ : state) {
    if (reference)
      cpu::gated_delta_rule(args, threads > 1 ? &pool : nullptr);
    else
      cpu::gated_delta_rule_fast(args, pool);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_ssd(benchmark::State& state, int64_t n, bool reference, cpu::Isa isa, int threads) {
  cpu::set_active_isa(isa);
  const int64_t heads = 64, dp = 64, groups = 1, ds = 128;
  const std::vector<float> x = uniform(n * heads * dp, -1, 1, 1), dt = uniform(n * heads, -2, 2, 2),
                           a_log = uniform(heads, -1, 1, 3), dt_bias = uniform(heads, -1, 1, 4),
                           b = uniform(n * groups * ds, -1, 1, 5),
                           c = uniform(n * groups * ds, -1, 1, 6), d = uniform(heads, -1, 1, 7);
  std::vector<float> st(static_cast<size_t>(heads * dp * ds)), out(x.size());
  ThreadPool pool(threads);
  const cpu::SsdArgs args{x.data(), dt.data(), a_log.data(), dt_bias.data(),
                          b.data(), c.data(),  d.data(),     0.0f,
                          1e30f,    n,         heads,        dp,
                          groups,   ds,        st.data(),    out.data()};
  for (auto _ : state) {
    if (reference)
      cpu::ssd(args, threads > 1 ? &pool : nullptr);
    else
      cpu::ssd_fast(args, pool);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  const cpu::Isa levels[] = {cpu::Isa::Avx2, cpu::Isa::Avx512};
  for (int threads : {1, 2}) {
    const std::string t = "/threads:" + std::to_string(threads);
    for (const DeltaShape& s : kDeltaShapes) {
      for (int64_t n : {1, 16, 64, 128, 512}) {
        const std::string base = std::string("delta/") + s.what + "/rows:" + std::to_string(n);
        benchmark::RegisterBenchmark((base + "/reference" + t).c_str(), bm_delta, s, n, true,
                                     cpu::Isa::Portable, threads);
        for (cpu::Isa isa : levels) {
          if (isa > cpu::detected_isa()) continue;
          const std::string level = std::string("/") + cpu::isa_name(isa);
          benchmark::RegisterBenchmark((base + "/fast" + level + t).c_str(), bm_delta, s, n, false,
                                       isa, threads);
        }
      }
    }
    for (int64_t n : {1, 512}) {
      const std::string base = "ssd/mamba2/rows:" + std::to_string(n);
      benchmark::RegisterBenchmark((base + "/reference" + t).c_str(), bm_ssd, n, true,
                                   cpu::Isa::Portable, threads);
      for (cpu::Isa isa : levels) {
        if (isa > cpu::detected_isa()) continue;
        benchmark::RegisterBenchmark((base + "/fast/" + cpu::isa_name(isa) + t).c_str(), bm_ssd, n,
                                     false, isa, threads);
      }
    }
  }
}

}  // namespace
}  // namespace lathe

int main(int argc, char** argv) {
  lathe::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
