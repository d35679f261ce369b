// The op bench's cases of weights in blocks dequantized exactly in registers: MXFP4
// (DType::MXFP4, core/mxfp4.h) and FP8 (DType::FP8, core/fp8.h). Linear over decode and
// prefill shapes (k a multiple of 32), with and without bias, and Experts with a clamped
// SwiGLU and biases as gpt-oss's; each type's kernels of each level against the reference
// kernel, which sums x[p] w[p] in order on the exactly dequantized weights
// (backends/cpu/block_kernels.h). And that reference is the f32 reference kernel on the
// dequantized matrix, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/op_cases.h"

namespace lathe::optest {

using graph::Activation;
using graph::Builder;
using graph::Op;
using graph::Value;

namespace {

void block_type_cases(std::vector<Case>& out, DType dt) {
  struct S {
    int64_t m, n, k;
    const char* what;
  };
  const S shapes[] = {
      {1, 64, 128, "decode"},    {1, 37, 640, "decode_n37"}, {1, 200, 2880, "decode_gptoss"},
      {7, 16, 32, "odd_rows"},   {3, 9, 96, "n9"},           {2, 64, 576, "k576"},
      {37, 300, 192, "prefill"}, {65, 29, 256, "rows65"}};
  for (bool bias : {false, true})
    for (const S& s : shapes) {
      const Tensor x = random_tensor({s.m, s.k}, next_seed());
      const Tensor w = random_tensor({s.n, s.k}, next_seed()).to(dt);
      const Tensor b = bias ? random_tensor({s.n}, next_seed()) : Tensor();
      out.push_back({std::string("linear_") + s.what + "_" + label({s.m, s.n, s.k}) +
                         (bias ? "_bias_" : "_") + std::string(dtype_name(dt)),
                     Op::Linear, dt,
                     [x, w, b](Builder& g) {
                       return std::vector{g.linear(g.weight(x), g.weight(w), g.weight(b))};
                     },
                     Step{}});
    }
  for (int64_t tokens : {1, 9, 40}) {
    const int64_t dim = 64, inter = 96, experts = 4;
    const Tensor x = random_tensor({tokens, dim}, next_seed());
    const Tensor router = random_tensor({experts, dim}, next_seed());
    std::vector<std::array<Tensor, 6>> w;
    for (int64_t e = 0; e < experts; ++e)
      w.push_back({random_tensor({inter, dim}, next_seed()).to(dt),
                   random_tensor({inter, dim}, next_seed()).to(dt),
                   random_tensor({dim, inter}, next_seed()).to(dt),
                   random_tensor({inter}, next_seed()), random_tensor({inter}, next_seed()),
                   random_tensor({dim}, next_seed())});
    out.push_back(
        {"experts_" + label({tokens, dim, inter}) + "_e4_k2_clamped_" + std::string(dtype_name(dt)),
         Op::Experts, dt,
         [x, router, w](Builder& g) {
           Value xv = g.weight(x);
           Value r = g.route(g.linear(xv, g.weight(router)),
                             {.routing = graph::Routing::TopKSoftmax, .top_k = 2});
           std::vector<Builder::Expert> ex;
           for (const auto& e : w)
             ex.push_back({g.weight(e[0]), g.weight(e[1]), g.weight(e[2]), g.weight(e[3]),
                           g.weight(e[4]), g.weight(e[5])});
           return std::vector{g.experts(
               xv, r, ex, Activation::Silu,
               {.kind = graph::ExpertGlu::ClampedSwiglu, .limit = 7.0f, .alpha = 1.702f})};
         },
         Step{}});
  }
}

}  // namespace

void mxfp4_cases(std::vector<Case>& out) {
  block_type_cases(out, DType::MXFP4);
}

void fp8_cases(std::vector<Case>& out) {
  block_type_cases(out, DType::FP8);
}

namespace {

TEST(Mxfp4Matmul, ReferenceIsTheF32ReferenceOnTheDequantizedMatrix) {
  const int64_t m = 5, n = 11, k = 320;
  const Tensor x = random_tensor({m, k}, 901);
  // Scales over the whole E8M0 range, subnormal and infinite values included, but for the
  // zero codes (inf * x would be nan on both sides, which compare unequal).
  Tensor w = random_tensor({n, k}, 902, 100.0f).to(DType::MXFP4);
  for (int64_t b = 0; b < n * k / 32; ++b)
    w.mut<uint8_t>()[b * 17] = static_cast<uint8_t>((b * 37) % 255);
  const Tensor wf = w.to(DType::F32);
  std::vector<float> a(static_cast<size_t>(m * n)), c(static_cast<size_t>(m * n));
  cpu::matmul_reference(x.data<float>(), w.data<void>(), DType::MXFP4, nullptr, a.data(), m, n, k);
  cpu::matmul_reference(x.data<float>(), wf.data<void>(), DType::F32, nullptr, c.data(), m, n, k);
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0);
}

TEST(Fp8Matmul, ReferenceIsTheF32ReferenceOnTheDequantizedMatrix) {
  const int64_t m = 5, n = 11, k = 320;
  const Tensor x = random_tensor({m, k}, 903);
  // Every finite code (subnormals, -0 and +-448 included), and scales from subnormal to the
  // largest the kernels take exactly (fp8_block_exact: below 2^120).
  Tensor w = random_tensor({n, k}, 904).to(DType::FP8);
  auto* p = static_cast<uint8_t*>(w.mut<void>());
  for (int64_t b = 0; b < n * k / 32; ++b) {
    const float scale = std::ldexp(1.3f, static_cast<int>((b * 37) % 260) - 140);
    std::memcpy(p + b * 36, &scale, 4);
    for (int64_t i = 0; i < 32; ++i) {
      const auto code = static_cast<uint8_t>((b * 32 + i) * 7 % 256);
      p[b * 36 + 4 + i] = (code & 0x7f) == 0x7f ? 0 : code;
    }
  }
  const Tensor wf = w.to(DType::F32);
  std::vector<float> a(static_cast<size_t>(m * n)), c(static_cast<size_t>(m * n));
  cpu::matmul_reference(x.data<float>(), w.data<void>(), DType::FP8, nullptr, a.data(), m, n, k);
  cpu::matmul_reference(x.data<float>(), wf.data<void>(), DType::F32, nullptr, c.data(), m, n, k);
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace lathe::optest
