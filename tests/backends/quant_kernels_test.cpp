// The block-quantized matmul's kernels (quant_kernels.h): every vectorised level this CPU runs
// quantizes the activations to the reference's codes, scales and lane starts byte for byte (ties to
// even, clamps and blocks too small to invert included), and the AVX-512 VNNI kernels give
// the reference's products bit for bit, over decode and prefill row counts and edges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_kernels.h"
#include "backends/op_harness.h"
#include "core/thread_pool.h"

namespace lathe::cpu {
namespace {

struct Buffers {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> init, block_init;
  QuantActs acts(int64_t m, int64_t k) {
    q.assign(static_cast<size_t>(m * k), 99);
    d.assign(static_cast<size_t>(m * k / 4), -1.0f);
    init.assign(static_cast<size_t>(m * k / 4), 12345);
    block_init.assign(static_cast<size_t>(m * k / 32), 12345);
    return {q.data(), d.data(), init.data(), block_init.data(), k};
  }
};

// Rows of 8 blocks of 32: random values of several magnitudes, then blocks built to hit the
// edges (halves that round to even, exact +-127, zeros, subnormal maxima, one huge value).
std::vector<float> activations(int64_t m, int64_t k) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i / 32 % 7) * 9 - 30);
  auto block = [&](int64_t r, int64_t b) { return x.data() + r * k + b * 32; };
  // max|x| = 127 makes dx 1, so v.5 values are ties: 2.5 -> 2, 3.5 -> 4, -0.5 -> -0.
  float* tie = block(0, 1);
  for (int t = 0; t < 32; ++t) tie[t] = static_cast<float>(t % 8) - 3.5f + (t % 2 ? 0.0f : 1.0f);
  tie[5] = 127.0f;
  tie[6] = -127.0f;
  std::fill(block(0, 2), block(0, 3), 0.0f);  // zero block: dx 0, zero codes
  float* tiny = block(1, 0);
  for (int t = 0; t < 32; ++t) tiny[t] = std::ldexp(1.0f, -140) * static_cast<float>(t - 16);
  float* small = block(1, 1);  // a small maximum whose inverse is still finite
  for (int t = 0; t < 32; ++t) small[t] = std::ldexp(1.0f, -120) * static_cast<float>(t - 16);
  block(1, 3)[9] = 3.0e38f;
  block(1, 4)[0] = -0.0f;
  return x;
}

void expect_same(const Buffers& got, const Buffers& want, const char* level) {
  SCOPED_TRACE(level);
  EXPECT_EQ(0, std::memcmp(got.q.data(), want.q.data(), want.q.size()));
  EXPECT_EQ(0, std::memcmp(got.d.data(), want.d.data(), want.d.size() * sizeof(float)));
  EXPECT_EQ(got.init, want.init);
  EXPECT_EQ(got.block_init, want.block_init);
}

TEST(QuantActs, EveryLevelGivesTheReferenceBytes) {
  const int64_t m = 5, k = 256;
  const std::vector<float> x = activations(m, k);
  for (int zero_point : {8, 128}) {
    SCOPED_TRACE("zero point " + std::to_string(zero_point));
    Buffers want;
    quantize_acts_reference(want.acts(m, k), zero_point, x.data(), 0, m);
    // The edges did what they are there for.
    EXPECT_EQ(want.q[32 + 0], -2);  // -2.5
    EXPECT_EQ(want.q[32 + 3], 0);   // -0.5
    EXPECT_EQ(want.q[32 + 7], 4);   // 3.5
    EXPECT_EQ(want.q[32 + 5], 127);
    EXPECT_EQ(want.q[64], 0);
    EXPECT_EQ(want.d[16], 0.0f);
    EXPECT_EQ(want.q[k + 31], 0);  // 1 / dx overflows: zero codes
    EXPECT_NE(want.q[k + 32 + 31], 0);
    int lanes = 0;
    for (int32_t v : want.init) lanes += v != 0;
    EXPECT_GT(lanes, m * k / 8);
    for (int64_t b = 0; b < m * k / 32; ++b) {
      int32_t sum = 0;
      for (int l = 0; l < 8; ++l) sum += want.init[b * 8 + l];
      EXPECT_EQ(want.block_init[b], sum);
    }
    if (detected_isa() >= Isa::Avx2) {
      Buffers got;
      const QuantActs a = got.acts(m, k);
      avx2::quantize_acts(a, zero_point, x.data(), 0, 2);  // in two calls, as threads split rows
      avx2::quantize_acts(a, zero_point, x.data(), 2, m);
      expect_same(got, want, "avx2");
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (detected_isa() >= Isa::Avx512 && __builtin_cpu_supports("avx512vnni")) {
      Buffers got;
      avx512vnni::quantize_acts(got.acts(m, k), zero_point, x.data(), 0, m);
      expect_same(got, want, "avx512vnni");
    }
#endif
  }
}

TEST(QuantMatmul, Avx512VnniGivesTheReferenceBits) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (detected_isa() < Isa::Avx512 || !__builtin_cpu_supports("avx512vnni"))
    GTEST_SKIP() << "no AVX-512 VNNI here";
#else
  GTEST_SKIP() << "x86-64 only";
#endif
  ThreadPool one(1), two(2);
  struct Shape {
    int64_t m, n, k;
  };
  // Row tiles (m < 16) and panels (m >= 16), full and partial tiles of both, one and many
  // groups.
  const Shape shapes[] = {{1, 37, 576}, {3, 8, 64},  {7, 17, 128},  {15, 16, 64}, {16, 16, 64},
                          {9, 5, 192},  {20, 1, 64}, {37, 40, 576}, {2, 300, 128}};
  uint32_t seed = 11;
  for (DType type : {DType::Q8_0, DType::Q4_0})
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " " + std::to_string(sh.m) + "x" +
                   std::to_string(sh.n) + "x" + std::to_string(sh.k));
      const Tensor x = optest::random_tensor({sh.m, sh.k}, ++seed);
      const Tensor w = optest::random_tensor({sh.n, sh.k}, ++seed).to(type);
      const Tensor bias = optest::random_tensor({sh.n}, ++seed);
      std::vector<uint8_t> scratch(qmatmul_scratch_bytes(sh.m, sh.k));
      std::vector<float> want(static_cast<size_t>(sh.m * sh.n));
      qmatmul_reference(x.data<float>(), w.data<void>(), type, bias.data<float>(), want.data(),
                        sh.m, sh.n, sh.k, scratch.data());
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<float> got(want.size(), -1.0f);
        const MatmulPart part{w.data<void>(), bias.data<float>(), got.data(), sh.n};
        qmatmul_fast(x.data<float>(), std::span<const MatmulPart>(&part, 1), type, sh.m, sh.k,
                     scratch.data(), *pool, QuantKernel::Avx512Vnni);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
      }
    }
}

}  // namespace
}  // namespace lathe::cpu
