// Fast kernels against the portable reference kernels, per weight dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "lab/compare.h"
#include "ops/ops.h"

namespace lathe {
namespace {

Tensor random_tensor(Shape shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.mut<float>()[i] = u(rng);
  return t;
}

double nmse_of(const Tensor& a, const Tensor& b) {
  return nmse({a.data<float>(), static_cast<size_t>(a.numel())},
              {b.data<float>(), static_cast<size_t>(b.numel())});
}

struct MatmulCase {
  int64_t m, n, k;
  DType w;
};

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulTest, FastMatchesReference) {
  const auto [m, n, k, wdtype] = GetParam();
  ThreadPool pool(3);
  Context fast{&pool, false}, ref{&pool, true};
  Tensor x = random_tensor({m, k}, 1);
  Tensor w = random_tensor({n, k}, 2).to(wdtype);
  Tensor b = random_tensor({n}, 3);
  Tensor yf = ops::linear(fast, x, w, &b);
  Tensor yr = ops::linear(ref, x, w, &b);
  ASSERT_EQ(yf.shape(), (Shape{m, n}));
  EXPECT_LT(nmse_of(yf, yr), 1e-12);
  // The reference itself against a double-precision sum.
  Tensor wf = w.to(DType::F32);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = b.data<float>()[j];
      for (int64_t p = 0; p < k; ++p)
        s += static_cast<double>(x.data<float>()[i * k + p]) * wf.data<float>()[j * k + p];
      worst = std::max(worst, std::fabs(s - yr.data<float>()[i * n + j]));
    }
  EXPECT_LT(worst, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Values(MatmulCase{1, 1, 1, DType::F32}, MatmulCase{1, 7, 13, DType::F32},
                      MatmulCase{3, 9, 64, DType::F32}, MatmulCase{5, 33, 70, DType::BF16},
                      MatmulCase{2, 64, 576, DType::BF16}, MatmulCase{17, 5, 31, DType::BF16}));

TEST(Attention, FastMatchesReferenceWithWindowAndGqa) {
  ThreadPool pool(2);
  Context fast{&pool, false}, ref{&pool, true};
  const int64_t max_seq = 12, kvh = 2, heads = 6, hd = 8;
  Tensor k = random_tensor({max_seq, kvh, hd}, 4), v = random_tensor({max_seq, kvh, hd}, 5);
  Tensor q = random_tensor({4, heads, hd}, 6);
  for (int64_t window : {0, 3}) {
    Tensor a = ops::attention(fast, q, k, v, 5, window, 0.3f);
    Tensor b = ops::attention(ref, q, k, v, 5, window, 0.3f);
    EXPECT_LT(nmse_of(a, b), 1e-12);
  }
  // A window of one: each query sees only its own position, so the output is that value row.
  Tensor one = ops::attention(ref, q, k, v, 5, 1, 0.3f);
  for (int64_t d = 0; d < hd; ++d)
    EXPECT_FLOAT_EQ(one.data<float>()[d], v.data<float>()[(5 * kvh + 0) * hd + d]);
}

TEST(RmsNorm, MatchesDefinition) {
  Tensor x = random_tensor({2, 5}, 7), w = random_tensor({5}, 8);
  Tensor y = ops::rms_norm(x, w, 1e-5f);
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int i = 0; i < 5; ++i) ss += std::pow(x.data<float>()[r * 5 + i], 2);
    const double inv = 1 / std::sqrt(ss / 5 + 1e-5);
    for (int i = 0; i < 5; ++i)
      EXPECT_NEAR(y.data<float>()[r * 5 + i], w.data<float>()[i] * x.data<float>()[r * 5 + i] * inv,
                  1e-6);
  }
}

TEST(Attention, SoftcapFastMatchesReferenceAndDefinition) {
  ThreadPool pool(2);
  Context fast{&pool, false}, ref{&pool, true};
  const int64_t max_seq = 9, kvh = 1, heads = 2, hd = 4;
  Tensor k = random_tensor({max_seq, kvh, hd}, 11, 3.0f), v = random_tensor({max_seq, kvh, hd}, 12);
  Tensor q = random_tensor({3, heads, hd}, 13, 3.0f);
  for (int64_t window : {0, 2}) {
    Tensor a = ops::attention(fast, q, k, v, 4, window, 0.5f, 2.0f);
    Tensor b = ops::attention(ref, q, k, v, 4, window, 0.5f, 2.0f);
    EXPECT_LT(nmse_of(a, b), 1e-12);
  }
  // Last query (position 6), head 1, by definition in double precision.
  Tensor out = ops::attention(ref, q, k, v, 4, 0, 0.5f, 2.0f);
  const float* qr = q.data<float>() + (2 * heads + 1) * hd;
  std::vector<double> w(7);
  double sum = 0;
  for (int j = 0; j <= 6; ++j) {
    double s = 0;
    for (int d = 0; d < hd; ++d) s += static_cast<double>(qr[d]) * k.data<float>()[j * hd + d];
    w[j] = std::exp(2.0 * std::tanh(s * 0.5 / 2.0));
    sum += w[j];
  }
  for (int d = 0; d < hd; ++d) {
    double o = 0;
    for (int j = 0; j <= 6; ++j) o += w[j] / sum * v.data<float>()[j * hd + d];
    EXPECT_NEAR(out.data<float>()[(2 * heads + 1) * hd + d], o, 1e-5);
  }
  // softcap 0 leaves results as before.
  Tensor plain = ops::attention(ref, q, k, v, 4, 0, 0.5f);
  Tensor zero = ops::attention(ref, q, k, v, 4, 0, 0.5f, 0.0f);
  EXPECT_EQ(nmse_of(plain, zero), 0.0);
}

TEST(Attention, PositionBiasFastMatchesReferenceAndDefinition) {
  ThreadPool pool(2);
  Context fast{&pool, false}, ref{&pool, true};
  const int64_t max_seq = 10, kvh = 1, heads = 3, hd = 4, pos0 = 3, tokens = 4;
  Tensor k = random_tensor({max_seq, kvh, hd}, 21), v = random_tensor({max_seq, kvh, hd}, 22);
  Tensor q = random_tensor({tokens, heads, hd}, 23, 2.0f);
  Tensor bias = random_tensor({heads, max_seq}, 24, 3.0f);
  for (int64_t window : {0, 2}) {
    Tensor a = ops::attention(fast, q, k, v, pos0, window, 0.5f, 0.0f, &bias);
    Tensor b = ops::attention(ref, q, k, v, pos0, window, 0.5f, 0.0f, &bias);
    EXPECT_LT(nmse_of(a, b), 1e-12);
  }
  // Query 2 (position 5), head 2, by definition in double precision.
  Tensor out = ops::attention(ref, q, k, v, pos0, 0, 0.5f, 0.0f, &bias);
  const float* qr = q.data<float>() + (2 * heads + 2) * hd;
  std::vector<double> w(6);
  double sum = 0;
  for (int j = 0; j <= 5; ++j) {
    double s = 0;
    for (int d = 0; d < hd; ++d) s += static_cast<double>(qr[d]) * k.data<float>()[j * hd + d];
    w[j] = std::exp(s * 0.5 + bias.data<float>()[2 * max_seq + j]);
    sum += w[j];
  }
  for (int d = 0; d < hd; ++d) {
    double o = 0;
    for (int j = 0; j <= 5; ++j) o += w[j] / sum * v.data<float>()[j * hd + d];
    EXPECT_NEAR(out.data<float>()[(2 * heads + 2) * hd + d], o, 1e-5);
  }
  // A bias constant along each head's row changes nothing (softmax is shift invariant).
  Tensor flat = Tensor::zeros(DType::F32, {heads, max_seq});
  for (int64_t i = 0; i < flat.numel(); ++i) flat.mut<float>()[i] = 2.0f * (i / max_seq);
  Tensor plain = ops::attention(ref, q, k, v, pos0, 0, 0.5f);
  Tensor shifted = ops::attention(ref, q, k, v, pos0, 0, 0.5f, 0.0f, &flat);
  EXPECT_LT(nmse_of(plain, shifted), 1e-12);
  // A bias too short for the positions attended is refused.
  Tensor short_bias = Tensor::zeros(DType::F32, {heads, pos0 + tokens - 1});
  EXPECT_THROW(ops::attention(ref, q, k, v, pos0, 0, 0.5f, 0.0f, &short_bias), std::exception);
}

TEST(Activations, MatchDefinitions) {
  Tensor x = random_tensor({16}, 14, 4.0f), up = random_tensor({16}, 15);
  Tensor gelu = ops::activation(ops::Activation::Gelu, x);
  Tensor tanh_gelu = ops::activation(ops::Activation::GeluTanh, x);
  Tensor silu = ops::activation(ops::Activation::Silu, x);
  Tensor gated = ops::act_mul(ops::Activation::GeluTanh, x, up);
  Tensor relu = ops::activation(ops::Activation::Relu, x);
  Tensor relu2 = ops::activation(ops::Activation::Relu2, x);
  Tensor relu2_gated = ops::act_mul(ops::Activation::Relu2, x, up);
  for (int i = 0; i < 16; ++i) {
    const double v = x.data<float>()[i];
    const double t =
        0.5 * v * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(gelu.data<float>()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
    EXPECT_NEAR(tanh_gelu.data<float>()[i], t, 1e-6);
    EXPECT_NEAR(silu.data<float>()[i], v / (1 + std::exp(-v)), 1e-6);
    EXPECT_NEAR(gated.data<float>()[i], t * up.data<float>()[i], 1e-6);
    EXPECT_EQ(relu.data<float>()[i], v > 0 ? v : 0.0);
    const double r2 = v > 0 ? v * v : 0.0;  // ReLUSquaredActivation
    EXPECT_NEAR(relu2.data<float>()[i], r2, 1e-5);
    EXPECT_NEAR(relu2_gated.data<float>()[i], r2 * up.data<float>()[i], 1e-5);
  }
  Tensor capped = x.clone();
  ops::softcap_inplace(capped, 3.0f);
  for (int i = 0; i < 16; ++i)
    EXPECT_NEAR(capped.data<float>()[i], 3.0 * std::tanh(x.data<float>()[i] / 3.0), 1e-6);
}

TEST(LayerNorm, MatchesDefinition) {
  Tensor x = random_tensor({3, 6}, 16, 2.0f), w = random_tensor({6}, 17),
         b = random_tensor({6}, 18);
  Tensor y = ops::layer_norm(x, &w, &b, 1e-5f);
  Tensor no_bias = ops::layer_norm(x, &w, nullptr, 1e-5f);
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i) mean += x.data<float>()[r * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i) var += std::pow(x.data<float>()[r * 6 + i] - mean, 2) / 6.0;
    for (int i = 0; i < 6; ++i) {
      const double n = (x.data<float>()[r * 6 + i] - mean) / std::sqrt(var + 1e-5);
      EXPECT_NEAR(y.data<float>()[r * 6 + i], n * w.data<float>()[i] + b.data<float>()[i], 1e-5);
      EXPECT_NEAR(no_bias.data<float>()[r * 6 + i], n * w.data<float>()[i], 1e-5);
    }
  }
}

// No weight (OlmoLayerNorm), and per-head weights [heads, n] that rows cycle through
// (StableLmLayerNormPerHead, CohereLayerNorm on q/k).
TEST(LayerNorm, WithoutWeightAndPerHeadWeights) {
  const int64_t tokens = 3, heads = 2, n = 5;
  Tensor x = random_tensor({tokens, heads, n}, 24, 2.0f), w = random_tensor({heads, n}, 25),
         b = random_tensor({heads, n}, 26);
  Tensor plain = ops::layer_norm(x, nullptr, nullptr, 1e-5f);
  Tensor per_head = ops::layer_norm(x, &w, &b, 1e-5f);
  for (int64_t r = 0; r < tokens * heads; ++r) {
    const float* xr = x.data<float>() + r * n;
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i) mean += xr[i] / static_cast<double>(n);
    for (int i = 0; i < n; ++i) var += std::pow(xr[i] - mean, 2) / static_cast<double>(n);
    const int64_t h = r % heads;
    for (int i = 0; i < n; ++i) {
      const double v = (xr[i] - mean) / std::sqrt(var + 1e-5);
      EXPECT_NEAR(plain.data<float>()[r * n + i], v, 1e-5);
      EXPECT_NEAR(per_head.data<float>()[r * n + i],
                  v * w.data<float>()[h * n + i] + b.data<float>()[h * n + i], 1e-5);
    }
  }
  Tensor bad = random_tensor({4, n}, 27);  // 4 groups do not divide 6 rows
  EXPECT_THROW(ops::layer_norm(x, &bad, nullptr, 1e-5f), std::exception);
}

TEST(Activations, XieluMatchesDefinition) {
  Tensor x = random_tensor({64}, 28, 4.0f);
  const double ap = 1.3, an = 0.9, beta = 0.5, eps = -1e-6;
  Tensor y = ops::xielu(x, static_cast<float>(ap), static_cast<float>(an), static_cast<float>(beta),
                        static_cast<float>(eps));
  for (int i = 0; i < 64; ++i) {
    const double v = x.data<float>()[i];
    const double want =
        v > 0 ? ap * v * v + beta * v : (std::expm1(std::min(v, eps)) - v) * an + beta * v;
    EXPECT_NEAR(y.data<float>()[i], want, 1e-5);
  }
  Tensor c = x.clone();
  ops::clamp_inplace(c, 1.5f);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(c.data<float>()[i], std::clamp(x.data<float>()[i], -1.5f, 1.5f));
}

TEST(Embedding, RejectsOutOfRangeIds) {
  Tensor table = random_tensor({4, 3}, 9);
  const int32_t bad[] = {4};
  EXPECT_THROW(ops::embedding(table, bad), std::exception);
  const int32_t good[] = {3, 0};
  Tensor e = ops::embedding(table.to(DType::BF16), good);
  EXPECT_EQ(e.data<float>()[0], bf16_to_f32(f32_to_bf16(table.data<float>()[9])));
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// The interleaved layout is the half-split one with the pair members moved next to each
// other: permuting head dims (i, i + rot/2) -> (2i, 2i + 1) must commute with rotary.
TEST(Rope, InterleavedIsAPermutationOfHalfSplit) {
  const int64_t tokens = 3, heads = 2, hd = 8, half = 3;  // rot = 6 < head_dim
  Tensor x = random_tensor({tokens, heads, hd}, 21);
  Tensor cos = random_tensor({tokens, half}, 22), sin = random_tensor({tokens, half}, 23);
  Tensor permuted = x.clone();
  for (int64_t r = 0; r < tokens * heads; ++r)
    for (int64_t i = 0; i < half; ++i) {
      permuted.mut<float>()[r * hd + 2 * i] = x.data<float>()[r * hd + i];
      permuted.mut<float>()[r * hd + 2 * i + 1] = x.data<float>()[r * hd + i + half];
    }
  Tensor split = x.clone();
  ops::rope(split, cos, sin, ops::RopeLayout::HalfSplit);
  ops::rope(permuted, cos, sin, ops::RopeLayout::Interleaved);
  for (int64_t r = 0; r < tokens * heads; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_FLOAT_EQ(permuted.data<float>()[r * hd + 2 * i], split.data<float>()[r * hd + i]);
      EXPECT_FLOAT_EQ(permuted.data<float>()[r * hd + 2 * i + 1],
                      split.data<float>()[r * hd + i + half]);
    }
    // Dims past the rotary part are left alone.
    EXPECT_EQ(split.data<float>()[r * hd + 7], x.data<float>()[r * hd + 7]);
  }
}

}  // namespace
}  // namespace lathe
