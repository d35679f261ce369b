// Attention kernel micro-benchmarks (Google Benchmark): the fast backend's causal attention at
// each level this CPU runs, and the reference kernel, on SmolLM2's shape (9 query heads over
// 3 kv heads of 64) and the Llama-3.2-1B shape (32 over 8 of 64):
//  - decode: one query token at a depth of 512 or 2048 cached positions, over 30 layers'
//    caches in turn (as a decode step visits them; together larger than the L3 of the AMD EPYC
//    of docs/performance-log.md, not of its Xeon's), f32 or bf16 caches; decode512_1layer: one
//    layer's caches over and over (they stay in L2: the kernel's compute alone);
//    decode512_cold: decode512 with 384 MiB read between steps, untimed (more than the L3 of
//    the Xeon of docs/performance-log.md), so each step finds its caches in memory, as a decode
//    step does after the weights have streamed through the cache;
//  - prefill: a 512-token prompt attending to itself, one layer.
// Reports the cache bytes read per second (decode) and query rows per second
// (docs/performance-log.md):
//   build/bench/kernels/attention_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"

namespace lathe {
namespace {

struct Shape {
  int64_t heads, kv_heads, head_dim;
  const char* what;
};
const Shape kShapes[] = {{9, 3, 64, "smollm2"}, {32, 8, 64, "llama1b"}};

std::vector<uint32_t> random_words(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint32_t> v(n);
  for (uint32_t& w : v) {
    const float f = u(rng);
    __builtin_memcpy(&w, &f, 4);
  }
  return v;
}

// Reads 384 MiB (allocated once): the caches' lines leave every cache level.
void evict_caches() {
  static std::vector<uint64_t> junk(size_t{384} << 17, 1);
  uint64_t sum = 0;
  for (size_t i = 0; i < junk.size(); i += 8) sum += junk[i];
  benchmark::DoNotOptimize(sum);
}

// tokens queries at positions depth.. over `layers` caches of depth + tokens positions, one
// layer after another (cold: with evict_caches() before each step, untimed); bf16 caches hold
// the top halves of the same floats.
void bm_attention(benchmark::State& state, Shape s, int64_t depth, int64_t tokens, int64_t layers,
                  bool cold, bool bf16, bool reference, cpu::Isa isa, int threads) {
  cpu::set_active_isa(isa);
  const int64_t seq = depth + tokens, row = s.kv_heads * s.head_dim;
  const size_t elem = bf16 ? 2 : 4, layer_bytes = static_cast<size_t>(seq * row) * elem;
  std::vector<uint32_t> raw = random_words(static_cast<size_t>(layers * seq * row), 1);
  std::vector<uint8_t> k(layer_bytes * static_cast<size_t>(layers)), v(k.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (bf16) {
      const uint16_t hi = static_cast<uint16_t>(raw[i] >> 16);
      __builtin_memcpy(&k[2 * i], &hi, 2);
      __builtin_memcpy(&v[2 * (raw.size() - 1 - i)], &hi, 2);
    } else {
      __builtin_memcpy(&k[4 * i], &raw[i], 4);
      __builtin_memcpy(&v[4 * (raw.size() - 1 - i)], &raw[i], 4);
    }
  }
  const std::vector<uint32_t> qbits =
      random_words(static_cast<size_t>(tokens * s.heads * s.head_dim), 2);
  std::vector<float> q(qbits.size()), out(qbits.size());
  __builtin_memcpy(q.data(), qbits.data(), q.size() * 4);
  const cpu::AttentionScratch rows = cpu::attention_scratch(s.heads, seq + 16, s.head_dim);
  std::vector<float> scratch(static_cast<size_t>((reference ? 1 : threads) * rows.floats()));
  ThreadPool pool(threads);
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      evict_caches();
      state.ResumeTiming();
    }
    for (int64_t l = 0; l < layers; ++l) {
      cpu::AttentionArgs a{q.data(),
                           k.data() + l * layer_bytes,
                           v.data() + l * layer_bytes,
                           out.data(),
                           tokens,
                           depth,
                           s.heads,
                           s.kv_heads,
                           s.head_dim,
                           0,
                           0.125f,
                           0.0f,
                           nullptr,
                           0,
                           0,
                           scratch.data(),
                           rows.floats(),
                           s.head_dim,
                           row,
                           s.head_dim,
                           nullptr};
      a.kv_bf16 = bf16;
      a.scratch_heads = rows.heads;
      if (reference)
        cpu::attention_reference(a);
      else
        cpu::attention_fast(a, pool);
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = 2.0 * static_cast<double>(layer_bytes * static_cast<size_t>(layers));
  if (tokens == 1)
    state.counters["GB/s"] =
        benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(tokens * s.heads * layers),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  const cpu::Isa levels[] = {cpu::Isa::Avx2, cpu::Isa::Avx512};
  for (int threads : {1, 2}) {
    const std::string t = "/t" + std::to_string(threads);
    for (const Shape& s : kShapes) {
      struct Case {
        const char* what;
        int64_t depth, tokens, layers;
        bool cold = false;
      };
      const Case cases[] = {{"decode512", 512, 1, 30},
                            {"decode512_cold", 512, 1, 30, true},
                            {"decode2048", 2048, 1, 30},
                            {"decode512_1layer", 512, 1, 1},
                            {"prefill512", 0, 512, 1}};
      for (const Case& c : cases) {
        for (bool bf16 : {false, true}) {
          const std::string base = std::string(s.what) + "_" + c.what + (bf16 ? "/BF16" : "/F32");
          if (c.tokens == 1)
            benchmark::RegisterBenchmark(("reference/" + base + t).c_str(), bm_attention, s,
                                         c.depth, c.tokens, c.layers, c.cold, bf16, true,
                                         cpu::Isa::Portable, threads)
                ->UseRealTime();
          for (cpu::Isa isa : levels) {
            if (isa > cpu::detected_isa()) continue;
            benchmark::RegisterBenchmark(
                (std::string("lathe_") + cpu::isa_name(isa) + "/" + base + t).c_str(), bm_attention,
                s, c.depth, c.tokens, c.layers, c.cold, bf16, false, isa, threads)
                ->UseRealTime();
          }
        }
      }
    }
  }
}

// Registered before BENCHMARK_MAIN's main runs.
const bool kRegistered = (register_all(), true);

}  // namespace
}  // namespace lathe

BENCHMARK_MAIN();
