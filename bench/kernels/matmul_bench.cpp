// Matmul kernel micro-benchmarks (Google Benchmark): every fast kernel level this CPU runs
// against the reference kernel and, where the build found it, OpenBLAS (cblas_sgemm, f32), on the
// shapes of decode (one row) and of a 512-token prefill for SmolLM2-135M and a Llama-3.2-1B-shaped
// model, for f32, bf16 and the block-quantized Q8_0 and Q4_0 weights (whose fast kernel at the
// avx512 levels is avx512vnni where the CPU has VNNI). Reports GFLOP/s (2 m n k per call). The
// figures behind the kernel choice in docs/performance.md:
//   build/bench/kernels/matmul_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "core/dtype.h"
#include "core/pages.h"
#include "core/quant.h"

#ifdef LATHE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace lathe {
namespace {

struct Shape3 {
  int64_t m, n, k;
  const char* what;
};
const Shape3 kShapes[] = {
    {1, 1536, 576, "smollm2_decode_up"},      {1, 576, 1536, "smollm2_decode_down"},
    {1, 49152, 576, "smollm2_decode_head"},   {1, 8192, 2048, "1b_decode_up"},
    {1, 2048, 8192, "1b_decode_down"},        {512, 1536, 576, "smollm2_prefill_up"},
    {512, 576, 1536, "smollm2_prefill_down"}, {512, 8192, 2048, "1b_prefill_up"},
    {4, 1536, 576, "smollm2_batch4_up"},      {8, 1536, 576, "smollm2_batch8_up"},
    {16, 1536, 576, "smollm2_batch16_up"},
};

struct Operands {
  std::vector<float> x, wf, y;
  std::vector<uint16_t> wb;
  std::vector<uint8_t> wq;  // Q8_0, Q4_0, MXFP4 or FP8 when asked
};

const void* weights_of(const Operands& o, DType dt) {
  if (dt == DType::BF16) return o.wb.data();
  if (dtype_traits(dt).block_size > 1) return o.wq.data();
  return o.wf.data();
}

Operands operands(const Shape3& s, DType dt) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  Operands o;
  o.x.resize(static_cast<size_t>(s.m * s.k));
  o.wf.resize(static_cast<size_t>(s.n * s.k));
  o.y.resize(static_cast<size_t>(s.m * s.n));
  for (float& v : o.x) v = u(rng);
  for (float& v : o.wf) v = u(rng);
  for (float v : o.wf) o.wb.push_back(f32_to_bf16(v));
  if (dtype_traits(dt).block_size > 1) {  // rows of whole blocks: one conversion
    o.wq.resize(static_cast<size_t>(s.n) * row_bytes(dt, s.k));
    convert_from_f32(dt, o.wf.data(), o.wq.data(), static_cast<size_t>(s.n * s.k));
  }
  return o;
}

void report(benchmark::State& state, const Shape3& s) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(s.m * s.n * s.k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void bm_lathe(benchmark::State& state, Shape3 s, cpu::Isa isa, DType dt, int threads) {
  cpu::set_active_isa(isa);
  Operands o = operands(s, dt);
  ThreadPool pool(threads);
  std::vector<uint8_t> scratch(cpu::matmul_scratch_bytes(dt, s.m, s.k) + 1);
  const void* w = weights_of(o, dt);
  for (auto _ : state) {
    cpu::matmul_fast(o.x.data(), w, dt, nullptr, o.y.data(), s.m, s.n, s.k, scratch.data(), pool);
    benchmark::DoNotOptimize(o.y.data());
  }
  report(state, s);
}

void bm_reference(benchmark::State& state, Shape3 s, DType dt) {
  Operands o = operands(s, dt);
  const void* w = weights_of(o, dt);
  std::vector<uint8_t> scratch(cpu::matmul_scratch_bytes(dt, s.m, s.k) + 1);
  for (auto _ : state) {
    cpu::matmul_reference(o.x.data(), w, dt, nullptr, o.y.data(), s.m, s.n, s.k, scratch.data());
    benchmark::DoNotOptimize(o.y.data());
  }
  report(state, s);
}

// The machine's read bandwidth: a 1 GiB buffer summed with 256-bit loads (AVX2 where the CPU
// has it), split over `threads` threads; the roofline decode is measured against. read_rows
// reads it as the decode kernels read a weight matrix: 8 rows at once (8 streams), 512-bit
// loads where the CPU has AVX-512, each stream prefetched 512 bytes ahead.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) float read_rows_avx512(const float* p, int64_t n) {
  typedef float f16v __attribute__((vector_size(64)));
  const int64_t row = n / 8;
  f16v acc[8] = {};
  for (int64_t i = 0; i + 16 <= row; i += 16)
    for (int r = 0; r < 8; ++r) {
      __builtin_prefetch(p + r * row + i + 128);
      f16v v;
      __builtin_memcpy(&v, p + r * row + i, sizeof v);
      acc[r] += v;
    }
  float s = 0;
  for (auto& a : acc)
    for (int l = 0; l < 16; ++l) s += a[l];
  return s;
}
__attribute__((target("avx2"))) float read_sum_avx2(const float* p, int64_t n) {
  typedef float f8 __attribute__((vector_size(32)));
  f8 acc[8] = {};
  for (int64_t i = 0; i + 64 <= n; i += 64)
    for (int u = 0; u < 8; ++u) {
      f8 v;
      __builtin_memcpy(&v, p + i + 8 * u, sizeof v);
      acc[u] += v;
    }
  float s = 0;
  for (auto& a : acc)
    for (int l = 0; l < 8; ++l) s += a[l];
  return s;
}
#endif
float read_sum(const float* p, int64_t n) {
#if defined(__x86_64__)
  if (cpu::detected_isa() != cpu::Isa::Portable) return read_sum_avx2(p, n);
#endif
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  return s;
}

float read_rows(const float* p, int64_t n) {
#if defined(__x86_64__)
  if (cpu::detected_isa() >= cpu::Isa::Avx512) return read_rows_avx512(p, n);
#endif
  return read_sum(p, n);
}

void bm_read_bandwidth(benchmark::State& state, int threads, bool rows) {
  const int64_t n = int64_t{1} << 28;  // 1 GiB of floats
  // On 2 MiB pages, as lathe's weights are (core/pages.h): on the Intel Xeon of
  // docs/performance-log.md 3-6% more on one thread than on 4 KiB pages, the same on two.
  const std::shared_ptr<void> pages = allocate_pages(static_cast<size_t>(n) * sizeof(float));
  if (!pages) return state.SkipWithError("out of memory");
  std::span<float> buf(static_cast<float*>(pages.get()), static_cast<size_t>(n));
  std::fill(buf.begin(), buf.end(), 1.0f);
  ThreadPool pool(threads);
  std::vector<float> part(64);
  for (auto _ : state) {
    pool.parallel_for(64, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c)
        part[c] = (rows ? read_rows : read_sum)(buf.data() + c * (n / 64), n / 64);
    });
    benchmark::DoNotOptimize(part.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n) * sizeof(float),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

#ifdef LATHE_HAVE_OPENBLAS
// f32 only: Debian's OpenBLAS 0.3.21 is built without its bf16 GEMM (cblas_sbgemm).
void bm_openblas(benchmark::State& state, Shape3 s, int threads) {
  Operands o = operands(s, DType::F32);
  openblas_set_num_threads(threads);
  const blasint m = static_cast<blasint>(s.m), n = static_cast<blasint>(s.n),
                k = static_cast<blasint>(s.k);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, o.x.data(), k, o.wf.data(),
                k, 0.0f, o.y.data(), n);
    benchmark::DoNotOptimize(o.y.data());
  }
  report(state, s);
}
#endif

bool register_all() {
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(("read_bandwidth/1GiB/t" + std::to_string(threads)).c_str(),
                                 bm_read_bandwidth, threads, false)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("read_bandwidth_rows/1GiB/t" + std::to_string(threads)).c_str(),
                                 bm_read_bandwidth, threads, true)
        ->UseRealTime();
  }
  for (const Shape3& s : kShapes)
    for (DType dt : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_0, DType::MXFP4, DType::FP8}) {
      const std::string tail = std::string(s.what) + "/" + std::string(dtype_name(dt));
      if (s.m * s.n * s.k <= 1 << 24)
        benchmark::RegisterBenchmark(("reference/" + tail + "/t1").c_str(), bm_reference, s, dt)
            ->UseRealTime();
      for (int threads : {1, 2}) {
        const std::string t = "/t" + std::to_string(threads);
        for (int i = 0; i <= static_cast<int>(cpu::detected_isa()); ++i) {
          const auto isa = static_cast<cpu::Isa>(i);
          benchmark::RegisterBenchmark(
              (std::string("lathe_") + cpu::isa_name(isa) + "/" + tail + t).c_str(), bm_lathe, s,
              isa, dt, threads)
              ->UseRealTime();
        }
#ifdef LATHE_HAVE_OPENBLAS
        if (dt == DType::F32)
          benchmark::RegisterBenchmark(("openblas/" + tail + t).c_str(), bm_openblas, s, threads)
              ->UseRealTime();
#endif
      }
    }
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace lathe

BENCHMARK_MAIN();
