// Known answers for the graph ops, each through a single-op graph on the CPU backends: the
// checks the retired op front ends had (fast matmul against the reference and a double sum,
// attention with windows, soft-capping and position bias against its definition, activations,
// norms, xIELU, clamp and embedding against their closed forms, interleaved rotary as a
// permutation of half-split), and what the engine relies on besides: ALiBi as slope * key
// position with Falcon's bf16 roundings, OPT's learned positions, ring caches and batches of
// sequences giving the numbers of a full cache and of separate steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/backend.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/op_harness.h"
#include "backends/tolerances.h"
#include "core/error.h"
#include "core/numeric.h"
#include "models/rope.h"

namespace lathe::optest {
namespace {

using graph::Activation;
using graph::Builder;
using graph::PositionBias;
using graph::RopeLayout;
using graph::Value;

// The value of one op over constants: `f` applied to the builder, planned on the reference or
// the fast backend (3 threads).
Tensor eval(bool reference, const std::function<Value(Builder&)>& f, const Step& step = {}) {
  ThreadPool pool(reference ? 1 : 3);
  return run(
             cpu_backend(reference), pool, Mode::Planned,
             [&](Builder& b) { return std::vector{f(b)}; }, step)
      .values.at(0);
}

double nmse_of(const Tensor& a, const Tensor& b) {
  return nmse(floats(a), floats(b));
}

// ---- Linear ----

struct MatmulCase {
  int64_t m, n, k;
  DType w;
};

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

// The fast matmul matches the reference (within tolerances.h), and the reference matches a
// double-precision sum.
TEST_P(MatmulTest, FastMatchesReference) {
  const auto [m, n, k, wdtype] = GetParam();
  const Tensor x = random_tensor({m, k}, 1);
  const Tensor w = random_tensor({n, k}, 2).to(wdtype);
  const Tensor b = random_tensor({n}, 3);
  auto linear = [&](Builder& g) { return g.linear(g.weight(x), g.weight(w), g.weight(b)); };
  const Tensor yf = eval(false, linear), yr = eval(true, linear);
  ASSERT_EQ(yf.shape(), (Shape{m, n}));
  EXPECT_LE(nmse_of(yf, yr), tolerance(graph::Op::Linear, wdtype, cpu::active_isa())->nmse);
  const Tensor wf = w.to(DType::F32);
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

// ---- Attention ----

// One sequence attending through the graph: `pos0` positions of history already in the cache
// (prefilled_cache of `seed`), then the step's keys and values, on layer 0.
struct Attend {
  Tensor q, k, v;  // the step's [n, heads, head_dim] and [n, kv_heads, head_dim]
  int64_t pos0 = 0, max_seq = 0;
  Builder::AttentionParams params = {};
  Tensor slopes = {};
  uint32_t seed = 7;
  int64_t ring_window = 0;  // > 0: a SlidingKV layer of that window (a ring of slots)
  Tensor sinks = {};        // [heads] sink logits (GptOss), or none

  int64_t n() const { return q.dim(0); }
  int64_t heads() const { return q.dim(1); }
  int64_t kv_heads() const { return k.dim(1); }
  int64_t head_dim() const { return q.dim(2); }

  Step step() const {
    Step s = rows_step(n(), pos0);
    s.caches = [a = *this] {
      const LayerStateSpec spec{
          .kind = a.ring_window > 0 ? StateKind::SlidingKV : StateKind::FullKV,
          .kv_heads = a.kv_heads(),
          .head_dim = a.head_dim(),
          .window = a.ring_window,
          .recurrent = {}};
      std::vector<KVCache> caches;
      caches.push_back(prefilled_cache({spec}, a.max_seq, a.n(), a.pos0, a.seed));
      return caches;
    };
    return s;
  }
  Build build() const {
    return [a = *this](Builder& g) {
      return std::vector{g.attention(g.weight(a.q), g.weight(a.k), g.weight(a.v), a.params,
                                     g.weight(a.slopes), g.weight(a.sinks))};
    };
  }
  Outcome run_on(bool reference) const {
    ThreadPool pool(reference ? 1 : 3);
    return run(cpu_backend(reference), pool, Mode::Planned, build(), step());
  }
  Tensor out(bool reference) const { return run_on(reference).values.at(0); }

  // Key (value = false) or value element d of kv head `kvh` at position j: the history
  // (cache_history of the seed), then the step's rows.
  float row(const Tensor& history, bool value, int64_t j, int64_t kvh, int64_t d) const {
    const Tensor& t = j >= pos0 ? (value ? v : k) : history;
    const int64_t r = j >= pos0 ? j - pos0 : j;
    return t.data<float>()[(r * kv_heads() + kvh) * head_dim() + d];
  }
  // Query t, head h by definition in double: softmax over visible keys j of
  // score(q . k_j * scale, j) (and the head's sink, a logit with no value), then the weighted
  // sum of value rows.
  std::vector<double> definition(int64_t t, int64_t h,
                                 const std::function<double(double, int64_t)>& score) const {
    const int64_t p = pos0 + t, hd = head_dim(), kvh = h / (heads() / kv_heads());
    int64_t first = params.window > 0 ? std::max<int64_t>(0, p - params.window + 1) : 0;
    if (params.chunk > 0) first = std::max(first, p - p % params.chunk);
    const float* qr = q.data<float>() + (t * heads() + h) * hd;
    const Tensor kh = cache_history(pos0, kv_heads(), hd, seed, false);
    const Tensor vh = cache_history(pos0, kv_heads(), hd, seed, true);
    std::vector<double> w;
    double sum = 0;
    for (int64_t j = first; j <= p; ++j) {
      double s = 0;
      for (int64_t d = 0; d < hd; ++d) s += static_cast<double>(qr[d]) * row(kh, false, j, kvh, d);
      w.push_back(std::exp(score(s * params.scale, j)));
      sum += w.back();
    }
    if (sinks.defined() && sinks.numel() > 0) sum += std::exp(sinks.data<float>()[h]);
    std::vector<double> o(static_cast<size_t>(hd), 0.0);
    for (int64_t j = first; j <= p; ++j)
      for (int64_t d = 0; d < hd; ++d)
        o[static_cast<size_t>(d)] +=
            w[static_cast<size_t>(j - first)] / sum * row(vh, true, j, kvh, d);
    return o;
  }
  // Every query and head of `out` against definition(), within `tol`.
  void expect_definition(const Tensor& out, const std::function<double(double, int64_t)>& score,
                         double tol = 1e-5) const {
    for (int64_t t = 0; t < n(); ++t)
      for (int64_t h = 0; h < heads(); ++h) {
        const std::vector<double> want = definition(t, h, score);
        for (int64_t d = 0; d < head_dim(); ++d)
          EXPECT_NEAR(out.data<float>()[(t * heads() + h) * head_dim() + d],
                      want[static_cast<size_t>(d)], tol)
              << "query " << t << " head " << h << " dim " << d;
      }
  }
};

double plain(double s, int64_t) {
  return s;
}

// GQA with and without a window: fast matches reference; a window of one leaves each query
// only its own position, so the output is that position's value row.
TEST(Attention, FastMatchesReferenceWithWindowAndGqa) {
  const int64_t kvh = 2, heads = 6, hd = 8;
  Attend a{.q = random_tensor({4, heads, hd}, 6),
           .k = random_tensor({4, kvh, hd}, 4),
           .v = random_tensor({4, kvh, hd}, 5),
           .pos0 = 5,
           .max_seq = 12,
           .params = {.layer = 0, .window = 0, .scale = 0.3f, .softcap = 0, .bias = {}}};
  for (int64_t window : {0, 3}) {
    a.params.window = window;
    EXPECT_LT(nmse_of(a.out(false), a.out(true)), 1e-12);
    a.expect_definition(a.out(true), plain);
  }
  a.params.window = 1;
  const Tensor one = a.out(true);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < hd; ++d)
        EXPECT_FLOAT_EQ(one.data<float>()[(t * heads + h) * hd + d],
                        a.v.data<float>()[(t * kvh + h / (heads / kvh)) * hd + d]);
}

// Gemma2's attn_logit_softcapping: each scaled score s becomes cap * tanh(s / cap).
TEST(Attention, SoftcapFastMatchesReferenceAndDefinition) {
  const int64_t heads = 2, hd = 4;
  Attend a{.q = random_tensor({3, heads, hd}, 13, 3.0f),
           .k = random_tensor({3, 1, hd}, 11, 3.0f),
           .v = random_tensor({3, 1, hd}, 12),
           .pos0 = 4,
           .max_seq = 9,
           .params = {.layer = 0, .window = 0, .scale = 0.5f, .softcap = 2.0f, .bias = {}}};
  auto capped = [](double s, int64_t) { return 2.0 * std::tanh(s / 2.0); };
  for (int64_t window : {0, 2}) {
    a.params.window = window;
    EXPECT_LT(nmse_of(a.out(false), a.out(true)), 1e-12);
    a.expect_definition(a.out(true), capped);
  }
  // softcap 0: no capping.
  a.params.window = 0;
  a.params.softcap = 0;
  a.expect_definition(a.out(true), plain);
  Attend capped_again = a;
  capped_again.params.softcap = 2.0f;
  EXPECT_GT(nmse_of(a.out(true), capped_again.out(true)), 1e-6) << "capping must show here";
}

// GptOss's sinks: each head's sink logit joins the softmax's max and denominator as a key with
// no value, so the weights of the real keys sum to less than one; with a window, a ring and a
// sink far above every score (the max then comes from the sink, and the output nears zero).
TEST(Attention, SinksJoinTheSoftmaxDenominator) {
  const int64_t heads = 4, kvh = 2, hd = 8;
  Tensor sinks = Tensor::zeros(DType::F32, {heads});
  const float s[] = {0.7f, -1.3f, 2.5f, 0.0f};
  std::copy(s, s + heads, sinks.mut<float>());
  Attend a{.q = random_tensor({5, heads, hd}, 31, 2.0f),
           .k = random_tensor({5, kvh, hd}, 32, 2.0f),
           .v = random_tensor({5, kvh, hd}, 33),
           .pos0 = 6,
           .max_seq = 12,
           .params = {.layer = 0, .window = 0, .scale = 0.4f, .softcap = 0, .bias = {}},
           .sinks = sinks};
  for (int64_t window : {0, 3}) {
    a.params.window = window;
    EXPECT_LT(nmse_of(a.out(false), a.out(true)), 1e-12) << "window " << window;
    a.expect_definition(a.out(true), plain);
    a.expect_definition(a.out(false), plain);
  }
  Attend ring = a;
  ring.ring_window = 3;
  EXPECT_TRUE(same_bits(ring.out(true), a.out(true))) << "a ring holds what a full cache does";
  EXPECT_TRUE(same_bits(ring.out(false), a.out(false))) << "a ring holds what a full cache does";
  Attend none = a;
  none.sinks = Tensor();
  EXPECT_GT(nmse_of(none.out(true), a.out(true)), 1e-4) << "the sinks must show here";
  Attend high = a;
  high.params.window = 0;
  high.sinks = Tensor::zeros(DType::F32, {heads});
  for (int64_t h = 0; h < heads; ++h) high.sinks.mut<float>()[h] = 40.0f;
  for (bool reference : {true, false}) {
    const Tensor out = high.out(reference);
    high.expect_definition(out, plain, 1e-12);
    for (float x : floats(out)) EXPECT_LT(std::fabs(x), 1e-12f);
  }
}

// ALiBi (Bloom): head h's scaled score for the key at position j gains slope_h * j.
TEST(Attention, AlibiIsSlopeTimesKeyPosition) {
  const int64_t heads = 3, hd = 4;
  Tensor slopes = Tensor::zeros(DType::F32, {heads});
  const float s[] = {0.5f, -0.7f, 0.23f};
  std::copy(s, s + heads, slopes.mut<float>());
  Attend a{
      .q = random_tensor({4, heads, hd}, 23, 2.0f),
      .k = random_tensor({4, 1, hd}, 21),
      .v = random_tensor({4, 1, hd}, 22),
      .pos0 = 3,
      .max_seq = 10,
      .params = {.layer = 0, .window = 0, .scale = 0.5f, .softcap = 0, .bias = PositionBias::Alibi},
      .slopes = slopes};
  for (int64_t window : {0, 2}) {
    a.params.window = window;
    EXPECT_LT(nmse_of(a.out(false), a.out(true)), 1e-12);
    const Tensor out = a.out(true);
    for (int64_t h = 0; h < heads; ++h) {
      // One head at a time, so the definition sees that head's slope.
      for (int64_t t = 0; t < a.n(); ++t) {
        const auto want = a.definition(t, h, [&](double sc, int64_t j) {
          return sc + static_cast<double>(s[h]) * static_cast<double>(j);
        });
        for (int64_t d = 0; d < hd; ++d)
          EXPECT_NEAR(out.data<float>()[(t * heads + h) * hd + d], want[static_cast<size_t>(d)],
                      1e-5);
      }
    }
  }
  // Slopes of 0 add nothing: the result without bias, bit for bit.
  a.params.window = 0;
  Attend zero = a;
  zero.slopes = Tensor::zeros(DType::F32, {heads});
  Attend none = a;
  none.params.bias = PositionBias::None;
  none.slopes = Tensor();
  EXPECT_TRUE(same_bits(zero.out(true), none.out(true)));
  EXPECT_TRUE(same_bits(zero.out(false), none.out(false)));
}

// A position bias needs exactly one slope per head, and slopes need a bias kind.
TEST(Attention, SlopesMustMatchHeads) {
  const Tensor q = random_tensor({2, 3, 4}, 1), k = random_tensor({2, 1, 4}, 2);
  const Tensor two = Tensor::zeros(DType::F32, {2}), three = Tensor::zeros(DType::F32, {3});
  const Builder::AttentionParams alibi{
      .layer = 0, .window = 0, .scale = 0.5f, .softcap = 0, .bias = PositionBias::Alibi};
  const Builder::AttentionParams none{
      .layer = 0, .window = 0, .scale = 0.5f, .softcap = 0, .bias = PositionBias::None};
  Builder g;
  const Value vq = g.weight(q), vk = g.weight(k);
  EXPECT_THROW(g.attention(vq, vk, vk, alibi, g.weight(two)), Error);   // too few
  EXPECT_THROW(g.attention(vq, vk, vk, alibi), Error);                  // none at all
  EXPECT_THROW(g.attention(vq, vk, vk, none, g.weight(three)), Error);  // slopes, no bias
  EXPECT_NO_THROW(g.attention(vq, vk, vk, alibi, g.weight(three)));
}

// Falcon's build_alibi_tensor rounds the slope to bf16 and the product with the key position
// to bf16, and the bias is divided by sqrt(head_dim) with the scores.
TEST(Attention, AlibiFalconRoundsToBf16) {
  const int64_t heads = 2, hd = 16, pos0 = 37;
  Tensor slopes = Tensor::zeros(DType::F32, {heads});
  const float s[] = {0.3f, 0.111f};  // neither is a bf16 value
  std::copy(s, s + heads, slopes.mut<float>());
  Attend a{.q = random_tensor({3, heads, hd}, 31),
           .k = random_tensor({3, 2, hd}, 32),
           .v = random_tensor({3, 2, hd}, 33),
           .pos0 = pos0,
           .max_seq = 48,
           .params = {.layer = 0,
                      .window = 0,
                      .scale = 0.25f,
                      .softcap = 0,
                      .bias = PositionBias::AlibiFalcon},
           .slopes = slopes};
  auto bf16 = [](double x) { return bf16_to_f32(f32_to_bf16(static_cast<float>(x))); };
  const Tensor out = a.out(true);
  EXPECT_LT(nmse_of(a.out(false), out), 1e-12);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = 0; t < a.n(); ++t) {
      const auto rounded = a.definition(t, h, [&](double sc, int64_t j) {
        return sc + bf16(bf16(s[h]) * static_cast<double>(j)) / 4.0;
      });
      const auto exact = a.definition(t, h, [&](double sc, int64_t j) {
        return sc + static_cast<double>(s[h]) * static_cast<double>(j) / 4.0;
      });
      double apart = 0;
      for (int64_t d = 0; d < hd; ++d) {
        const float got = out.data<float>()[(t * heads + h) * hd + d];
        EXPECT_NEAR(got, rounded[static_cast<size_t>(d)], 1e-5) << "head " << h << " query " << t;
        apart = std::max(
            apart, std::fabs(rounded[static_cast<size_t>(d)] - exact[static_cast<size_t>(d)]));
      }
      EXPECT_GT(apart, 1e-4) << "the roundings must show in this case";
    }
}

// transformers' build_alibi_tensor multiplies the bf16 slopes by the int64 key positions,
// which torch first converts to bf16, so positions above 256 are rounded too (257 -> 256,
// 259 -> 260; checked with torch 2.15: bf16(0.3) * 257 gives 77.0). Found by the op bench:
// lathe multiplied by the exact position, so Falcon models with alibi parted from
// transformers past 256 tokens.
TEST(Attention, AlibiFalconRoundsKeyPositionsToBf16) {
  const int64_t heads = 2, hd = 16;
  Tensor slopes = Tensor::zeros(DType::F32, {heads});
  const float s[] = {0.3f, 0.111f};
  std::copy(s, s + heads, slopes.mut<float>());
  Attend a{.q = random_tensor({1, heads, hd}, 41),
           .k = random_tensor({1, 2, hd}, 42),
           .v = random_tensor({1, 2, hd}, 43),
           .pos0 = 300,
           .max_seq = 320,
           .params = {.layer = 0,
                      .window = 0,
                      .scale = 0.25f,
                      .softcap = 0,
                      .bias = PositionBias::AlibiFalcon},
           .slopes = slopes};
  auto bf16 = [](double x) { return bf16_to_f32(f32_to_bf16(static_cast<float>(x))); };
  const Tensor out = a.out(true);
  for (int64_t h = 0; h < heads; ++h) {
    const auto want = a.definition(0, h, [&](double sc, int64_t j) {
      return sc + bf16(bf16(s[h]) * bf16(static_cast<double>(j))) / 4.0;
    });
    for (int64_t d = 0; d < hd; ++d)
      EXPECT_NEAR(out.data<float>()[h * hd + d], want[static_cast<size_t>(d)], 1e-5);
  }
}

// Llama 4's chunked attention: a query at p sees the keys of its chunk only, from p - p % chunk
// (create_chunked_causal_mask); on a ring of the chunk's size as on a full cache. A chunk of
// one leaves each query its own value row.
TEST(Attention, ChunkedSeesOnlyItsChunk) {
  const int64_t heads = 4, kvh = 2, hd = 10;
  for (auto [n, pos0, chunk] :
       {std::tuple<int64_t, int64_t, int64_t>{9, 3, 4}, {1, 21, 5}, {6, 17, 3}}) {
    Attend a{.q = random_tensor({n, heads, hd}, 71),
             .k = random_tensor({n, kvh, hd}, 72),
             .v = random_tensor({n, kvh, hd}, 73),
             .pos0 = pos0,
             .max_seq = 32,
             .params = {.layer = 0, .scale = 0.4f, .chunk = chunk}};
    const Tensor ref = a.out(true);
    EXPECT_LT(nmse_of(a.out(false), ref), 1e-12) << "chunk " << chunk;
    a.expect_definition(ref, plain);
    Attend ring = a;
    ring.ring_window = chunk;
    const Outcome r = ring.run_on(true);
    ASSERT_LT(r.caches.at(0).layers.at(0).slots, 32) << "the cache must be a ring";
    EXPECT_TRUE(same_bits(r.values.at(0), ref)) << "chunk " << chunk;
    EXPECT_TRUE(same_bits(ring.out(false), a.out(false))) << "chunk " << chunk;
    Attend full = a;
    full.params.chunk = 0;
    EXPECT_GT(nmse_of(full.out(true), ref), 1e-4) << "the chunks must show here";
  }
  Attend one{.q = random_tensor({5, heads, hd}, 74),
             .k = random_tensor({5, kvh, hd}, 75),
             .v = random_tensor({5, kvh, hd}, 76),
             .pos0 = 2,
             .max_seq = 8,
             .params = {.layer = 0, .scale = 0.4f, .chunk = 1}};
  for (bool reference : {true, false}) {
    const Tensor out = one.out(reference);
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < hd; ++d)
          EXPECT_FLOAT_EQ(out.data<float>()[(t * heads + h) * hd + d],
                          one.v.data<float>()[(t * kvh + h / (heads / kvh)) * hd + d]);
  }
}

// A sliding layer's ring of slots (fewer than max_seq) gives exactly what a full cache with
// the same window gives, with positions far past the ring's size.
TEST(Attention, RingCacheMatchesFullCache) {
  const int64_t heads = 4, kvh = 2, hd = 8;
  const std::tuple<int64_t, int64_t, int64_t> cases[] = {{3, 11, 4}, {1, 20, 5}, {4, 40, 3}};
  for (auto [n, pos0, window] : cases) {
    Attend full{.q = random_tensor({n, heads, hd}, 51),
                .k = random_tensor({n, kvh, hd}, 52),
                .v = random_tensor({n, kvh, hd}, 53),
                .pos0 = pos0,
                .max_seq = 64,
                .params = {.layer = 0, .window = window, .scale = 0.35f, .softcap = 0, .bias = {}}};
    Attend ring = full;
    ring.ring_window = window;
    const Outcome r = ring.run_on(true);
    ASSERT_LT(r.caches.at(0).layers.at(0).slots, 64) << "the cache must be a ring";
    EXPECT_TRUE(same_bits(r.values.at(0), full.out(true))) << "n " << n << " pos0 " << pos0;
    EXPECT_TRUE(same_bits(ring.out(false), full.out(false))) << "n " << n << " pos0 " << pos0;
    full.expect_definition(r.values.at(0), plain);
  }
}

// A read-only attention (Gemma4's KV-shared layers) over the cache layer an earlier node of the
// step appended to sees exactly the keys and values that node saw, on a full cache and a ring,
// and appends nothing: the cache after the step is that of the first node alone.
TEST(Attention, ReadOnlyReadsWhatAnEarlierNodeAppended) {
  const int64_t heads = 4, kvh = 2, hd = 8;
  for (int64_t window : {0, 3}) {
    Attend a{.q = random_tensor({3, heads, hd}, 61),
             .k = random_tensor({3, kvh, hd}, 62),
             .v = random_tensor({3, kvh, hd}, 63),
             .pos0 = 11,
             .max_seq = 32,
             .params = {.layer = 0, .window = window, .scale = 0.35f, .softcap = 0, .bias = {}},
             .ring_window = window};
    const Tensor q2 = random_tensor({3, heads, hd}, 64);
    Builder::AttentionParams shared = a.params;
    shared.kv_read_only = true;
    auto build = [&](Builder& g) {
      const graph::Value first = g.attention(g.weight(a.q), g.weight(a.k), g.weight(a.v), a.params);
      return std::vector{first, g.attention(g.weight(a.q), {}, {}, shared),
                         g.attention(g.weight(q2), {}, {}, shared)};
    };
    for (bool reference : {true, false}) {
      ThreadPool pool(reference ? 1 : 3);
      const Outcome both = run(cpu_backend(reference), pool, Mode::Planned, build, a.step());
      EXPECT_TRUE(same_bits(both.values.at(1), both.values.at(0))) << "window " << window;
      EXPECT_TRUE(same_caches(both, a.run_on(reference))) << "window " << window;
      Attend other = a;
      other.q = q2;
      EXPECT_TRUE(same_bits(both.values.at(2), other.out(reference))) << "window " << window;
    }
  }
}

// Two sequences in one step (different positions, caches and sizes) give, row for row and
// cache for cache, exactly what two separate steps give.
TEST(Attention, TwoSequencesInOneStepMatchSeparateSteps) {
  const int64_t heads = 4, kvh = 2, hd = 8;
  const Builder::AttentionParams p{
      .layer = 0, .window = 0, .scale = 0.35f, .softcap = 0, .bias = PositionBias::None};
  Attend s0{.q = random_tensor({3, heads, hd}, 61),
            .k = random_tensor({3, kvh, hd}, 62),
            .v = random_tensor({3, kvh, hd}, 63),
            .pos0 = 5,
            .max_seq = 16,
            .params = p,
            .seed = 70};
  Attend s1{.q = random_tensor({2, heads, hd}, 64),
            .k = random_tensor({2, kvh, hd}, 65),
            .v = random_tensor({2, kvh, hd}, 66),
            .pos0 = 0,
            .max_seq = 12,
            .params = p,
            .seed = 71};
  // The joint step: rows 0-2 are sequence 0, rows 3-4 sequence 1.
  auto concat = [](const Tensor& a, const Tensor& b) {
    Tensor t = Tensor::zeros(DType::F32, {a.dim(0) + b.dim(0), a.dim(1), a.dim(2)});
    std::copy(a.data<float>(), a.data<float>() + a.numel(), t.mut<float>());
    std::copy(b.data<float>(), b.data<float>() + b.numel(), t.mut<float>() + a.numel());
    return t;
  };
  const Tensor q = concat(s0.q, s1.q), k = concat(s0.k, s1.k), v = concat(s0.v, s1.v);
  Step step = segment_step({{.seq = 0, .first = 0, .count = 3, .pos0 = 5},
                            {.seq = 1, .first = 3, .count = 2, .pos0 = 0}});
  step.caches = [s0, s1] {
    std::vector<KVCache> c;
    c.push_back(s0.step().caches().at(0));
    c.push_back(s1.step().caches().at(0));
    return c;
  };
  for (bool reference : {true, false}) {
    ThreadPool pool(reference ? 1 : 3);
    const Outcome joint = run(
        cpu_backend(reference), pool, Mode::Planned,
        [&](Builder& g) {
          return std::vector{g.attention(g.weight(q), g.weight(k), g.weight(v), p)};
        },
        step);
    const Outcome a = s0.run_on(reference), b = s1.run_on(reference);
    const Tensor& out = joint.values.at(0);
    const size_t split = static_cast<size_t>(a.values.at(0).numel());
    EXPECT_TRUE(std::equal(a.values[0].data<float>(), a.values[0].data<float>() + split,
                           out.data<float>()));
    EXPECT_TRUE(std::equal(b.values[0].data<float>(),
                           b.values[0].data<float>() + b.values[0].numel(),
                           out.data<float>() + split));
    EXPECT_TRUE(same_bits(joint.caches.at(0).layers[0].k, a.caches.at(0).layers[0].k));
    EXPECT_TRUE(same_bits(joint.caches.at(0).layers[0].v, a.caches.at(0).layers[0].v));
    EXPECT_TRUE(same_bits(joint.caches.at(1).layers[0].k, b.caches.at(0).layers[0].k));
    EXPECT_TRUE(same_bits(joint.caches.at(1).layers[0].v, b.caches.at(0).layers[0].v));
  }
}

// ---- Norms, activations, elementwise ----

TEST(RmsNorm, MatchesDefinition) {
  const Tensor x = random_tensor({2, 5}, 7), w = random_tensor({5}, 8);
  for (float offset : {0.0f, 1.0f}) {  // 1: Gemma's norms store weight - 1
    const Tensor y =
        eval(true, [&](Builder& g) { return g.rms_norm(g.weight(x), g.weight(w), 1e-5f, offset); });
    for (int r = 0; r < 2; ++r) {
      double ss = 0;
      for (int i = 0; i < 5; ++i) ss += std::pow(x.data<float>()[r * 5 + i], 2);
      const double inv = 1 / std::sqrt(ss / 5 + 1e-5);
      for (int i = 0; i < 5; ++i)
        EXPECT_NEAR(y.data<float>()[r * 5 + i],
                    (w.data<float>()[i] + offset) * x.data<float>()[r * 5 + i] * inv, 1e-6);
    }
  }
}

TEST(Activations, MatchDefinitions) {
  const Tensor x = random_tensor({16}, 14, 4.0f), up = random_tensor({16}, 15);
  auto act = [&](Activation a) {
    return eval(true, [&](Builder& g) { return g.activation(a, g.weight(x)); });
  };
  auto gated = [&](Activation a) {
    return eval(true, [&](Builder& g) { return g.act_mul(a, g.weight(x), g.weight(up)); });
  };
  const Tensor gelu = act(Activation::Gelu), tanh_gelu = act(Activation::GeluTanh),
               silu = act(Activation::Silu), relu = act(Activation::Relu),
               relu2 = act(Activation::Relu2);
  const Tensor gelu_gated = gated(Activation::Gelu), tanh_gated = gated(Activation::GeluTanh),
               silu_gated = gated(Activation::Silu), relu_gated = gated(Activation::Relu),
               relu2_gated = gated(Activation::Relu2);
  for (int i = 0; i < 16; ++i) {
    const double v = x.data<float>()[i], u = up.data<float>()[i];
    const double e = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const double t =
        0.5 * v * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (v + 0.044715 * v * v * v)));
    const double sl = v / (1 + std::exp(-v));
    const double r2 = v > 0 ? v * v : 0.0;  // ReLUSquaredActivation
    EXPECT_NEAR(gelu.data<float>()[i], e, 1e-6);
    EXPECT_NEAR(tanh_gelu.data<float>()[i], t, 1e-6);
    EXPECT_NEAR(silu.data<float>()[i], sl, 1e-6);
    EXPECT_EQ(relu.data<float>()[i], v > 0 ? v : 0.0);
    EXPECT_NEAR(relu2.data<float>()[i], r2, 1e-5);
    EXPECT_NEAR(gelu_gated.data<float>()[i], e * u, 1e-6);
    EXPECT_NEAR(tanh_gated.data<float>()[i], t * u, 1e-6);
    EXPECT_NEAR(silu_gated.data<float>()[i], sl * u, 1e-6);
    EXPECT_NEAR(relu_gated.data<float>()[i], (v > 0 ? v : 0.0) * u, 1e-6);
    EXPECT_NEAR(relu2_gated.data<float>()[i], r2 * u, 1e-5);
  }
  const Tensor capped = eval(true, [&](Builder& g) { return g.softcap(g.weight(x), 3.0f); });
  for (int i = 0; i < 16; ++i)
    EXPECT_NEAR(capped.data<float>()[i], 3.0 * std::tanh(x.data<float>()[i] / 3.0), 1e-6);
  Builder g;
  EXPECT_THROW(g.softcap(g.weight(x), 0.0f), Error);  // a cap must be positive
}

// The fast kernels' gated SiLU and tanh GELU (sigmoids over a clamped polynomial e^x) at
// every level, from tiny to huge gates either side of zero, against the definitions in
// double; a NaN gate stays NaN.
TEST(Activations, FastGatedSiluAndTanhGeluHoldAtTheExtremes) {
  const std::vector<float> gates = {0.0f,
                                    -0.0f,
                                    1e-30f,
                                    -1e-30f,
                                    1e-3f,
                                    -1e-3f,
                                    0.5f,
                                    -0.5f,
                                    5.0f,
                                    -5.0f,
                                    20.0f,
                                    -20.0f,
                                    87.0f,
                                    -87.0f,
                                    89.0f,
                                    -89.0f,
                                    100.0f,
                                    -100.0f,
                                    1e4f,
                                    -1e4f,
                                    3e38f,
                                    -3e38f,
                                    std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN()};
  const int64_t n = static_cast<int64_t>(gates.size());
  const std::vector<float> up(gates.size(), 0.5f);
  const cpu::Isa saved = cpu::active_isa();
  for (int level = 0; level <= static_cast<int>(cpu::detected_isa()); ++level) {
    cpu::set_active_isa(static_cast<cpu::Isa>(level));
    for (Activation act : {Activation::Silu, Activation::GeluTanh}) {
      std::vector<float> y(gates.size());
      cpu::act_mul_fast(act, gates.data(), up.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double v = gates[static_cast<size_t>(i)];
        const double u = std::sqrt(2 / 3.141592653589793) * (v + 0.044715 * v * v * v);
        const double want =
            0.5 * (act == Activation::Silu ? v / (1 + std::exp(-v)) : 0.5 * v * (1 + std::tanh(u)));
        const std::string where = std::string(cpu::isa_name(static_cast<cpu::Isa>(level))) +
                                  (act == Activation::Silu ? " silu " : " gelu_tanh ") +
                                  std::to_string(v);
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(y[static_cast<size_t>(i)])) << where;
        } else if (std::isinf(v)) {
          EXPECT_EQ(y[static_cast<size_t>(i)], want) << where;
        } else {
          EXPECT_NEAR(y[static_cast<size_t>(i)], want, 1e-6 * std::max(1.0, std::fabs(want)))
              << where;
        }
      }
    }
  }
  cpu::set_active_isa(saved);
}

TEST(Elementwise, AddScaleDivideMatchDefinitions) {
  const Tensor a = random_tensor({3, 7}, 16), b = random_tensor({3, 7}, 17);
  const Tensor sum = eval(true, [&](Builder& g) { return g.add(g.weight(a), g.weight(b)); });
  const Tensor scaled = eval(true, [&](Builder& g) { return g.scale(g.weight(a), 0.37f); });
  const Tensor divided = eval(true, [&](Builder& g) { return g.divide(g.weight(a), 3.0f); });
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_EQ(sum.data<float>()[i], a.data<float>()[i] + b.data<float>()[i]);
    EXPECT_EQ(scaled.data<float>()[i], a.data<float>()[i] * 0.37f);
    EXPECT_EQ(divided.data<float>()[i], a.data<float>()[i] / 3.0f);  // a division, not * 1/3
  }
  Builder g;
  EXPECT_THROW(g.add(g.weight(a), g.weight(random_tensor({7, 3}, 1))), Error);
}

TEST(LayerNorm, MatchesDefinition) {
  const Tensor x = random_tensor({3, 6}, 16, 2.0f), w = random_tensor({6}, 17),
               b = random_tensor({6}, 18);
  const Tensor y = eval(
      true, [&](Builder& g) { return g.layer_norm(g.weight(x), g.weight(w), g.weight(b), 1e-5f); });
  const Tensor no_bias = eval(
      true, [&](Builder& g) { return g.layer_norm(g.weight(x), g.weight(w), Value{}, 1e-5f); });
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
  const Tensor x = random_tensor({tokens, heads, n}, 24, 2.0f), w = random_tensor({heads, n}, 25),
               b = random_tensor({heads, n}, 26);
  const Tensor none =
      eval(true, [&](Builder& g) { return g.layer_norm(g.weight(x), Value{}, Value{}, 1e-5f); });
  const Tensor per_head = eval(
      true, [&](Builder& g) { return g.layer_norm(g.weight(x), g.weight(w), g.weight(b), 1e-5f); });
  for (int64_t r = 0; r < tokens * heads; ++r) {
    const float* xr = x.data<float>() + r * n;
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i) mean += xr[i] / static_cast<double>(n);
    for (int i = 0; i < n; ++i) var += std::pow(xr[i] - mean, 2) / static_cast<double>(n);
    const int64_t h = r % heads;
    for (int i = 0; i < n; ++i) {
      const double v = (xr[i] - mean) / std::sqrt(var + 1e-5);
      EXPECT_NEAR(none.data<float>()[r * n + i], v, 1e-5);
      EXPECT_NEAR(per_head.data<float>()[r * n + i],
                  v * w.data<float>()[h * n + i] + b.data<float>()[h * n + i], 1e-5);
    }
  }
  Builder g;
  const Value vx = g.weight(x);
  // 4 groups do not divide 6 rows; weight and bias of different group counts.
  EXPECT_THROW(g.layer_norm(vx, g.weight(random_tensor({4, n}, 27)), Value{}, 1e-5f), Error);
  EXPECT_THROW(g.layer_norm(vx, g.weight(w), g.weight(random_tensor({n}, 28)), 1e-5f), Error);
}

TEST(Activations, XieluAndClampMatchDefinitions) {
  const Tensor x = random_tensor({64}, 28, 4.0f);
  const double ap = 1.3, an = 0.9, beta = 0.5, eps = -1e-6;
  const Tensor y = eval(true, [&](Builder& g) {
    return g.xielu(g.weight(x), static_cast<float>(ap), static_cast<float>(an),
                   static_cast<float>(beta), static_cast<float>(eps));
  });
  for (int i = 0; i < 64; ++i) {
    const double v = x.data<float>()[i];
    const double want =
        v > 0 ? ap * v * v + beta * v : (std::expm1(std::min(v, eps)) - v) * an + beta * v;
    EXPECT_NEAR(y.data<float>()[i], want, 1e-5);
  }
  const Tensor c = eval(true, [&](Builder& g) { return g.clamp(g.weight(x), 1.5f); });
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(c.data<float>()[i], std::clamp(x.data<float>()[i], -1.5f, 1.5f));
}

// ---- Embedding ----

// The embedding of table rows at the step's tokens (or, with `offset`, at its positions).
Tensor embed(bool reference, Mode mode, const Tensor& table, std::vector<int32_t> ids,
             int64_t offset = 0) {
  Step step = rows_step(static_cast<int64_t>(ids.size()));
  const graph::InputSlot slot = offset ? graph::InputSlot::Positions : graph::InputSlot::Tokens;
  (offset ? step.positions : step.tokens) = ids;
  ThreadPool pool(reference ? 1 : 3);
  const int64_t n = static_cast<int64_t>(ids.size());
  return run(
             cpu_backend(reference), pool, mode,
             [&](Builder& g) {
               return std::vector{g.embedding(g.weight(table), g.input(slot, n), offset)};
             },
             step)
      .values.at(0);
}

TEST(Embedding, RejectsOutOfRangeIdsAndConvertsTables) {
  const Tensor table = random_tensor({4, 3}, 9);
  for (Mode mode : {Mode::Planned, Mode::Eager})
    for (bool reference : {true, false}) {
      EXPECT_THROW(embed(reference, mode, table, {4}), Error);
      EXPECT_THROW(embed(reference, mode, table, {0, -1}), Error);
    }
  for (DType dt : {DType::BF16, DType::F16}) {
    const Tensor stored = table.to(dt), e = embed(true, Mode::Planned, stored, {3, 0});
    const Tensor want = stored.to(DType::F32);
    for (int64_t d = 0; d < 3; ++d) {
      EXPECT_EQ(e.data<float>()[d], want.data<float>()[9 + d]) << dtype_name(dt);
      EXPECT_EQ(e.data<float>()[3 + d], want.data<float>()[d]) << dtype_name(dt);
    }
  }
  EXPECT_EQ(embed(true, Mode::Planned, table.to(DType::BF16), {3}).data<float>()[0],
            bf16_to_f32(f32_to_bf16(table.data<float>()[9])));
}

// OPT's learned positions: the table has max_position_embeddings + 2 rows and position p
// reads row p + 2; a position past the table names max_position_embeddings.
TEST(Embedding, IdOffsetReadsLearnedPositions) {
  const Tensor table = random_tensor({6, 4}, 10);  // max_position_embeddings 4
  const Tensor e = embed(true, Mode::Planned, table, {1, 2}, 2);
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(e.data<float>()[d], table.data<float>()[3 * 4 + d]);
    EXPECT_EQ(e.data<float>()[4 + d], table.data<float>()[4 * 4 + d]);
  }
  for (Mode mode : {Mode::Planned, Mode::Eager})
    for (bool reference : {true, false}) {
      try {
        embed(reference, mode, table, {2, 4}, 2);
        ADD_FAILURE() << "position 4 of 4 learned positions must throw";
      } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("max_position_embeddings"), std::string::npos)
            << err.what();
      }
    }
}

// ---- Rotary ----

// The interleaved layout is the half-split one with the pair members moved next to each
// other: permuting head dims (i, i + rot/2) -> (2i, 2i + 1) must commute with rotary.
TEST(Rope, InterleavedIsAPermutationOfHalfSplit) {
  const int64_t tokens = 3, heads = 2, hd = 8, half = 3;  // rot = 6 < head_dim
  const Tensor x = random_tensor({tokens, heads, hd}, 21);
  const Tensor tables = random_tensor({2, tokens, half}, 22);
  Tensor permuted = x.clone();
  for (int64_t r = 0; r < tokens * heads; ++r)
    for (int64_t i = 0; i < half; ++i) {
      permuted.mut<float>()[r * hd + 2 * i] = x.data<float>()[r * hd + i];
      permuted.mut<float>()[r * hd + 2 * i + 1] = x.data<float>()[r * hd + i + half];
    }
  auto rope = [&](const Tensor& in, RopeLayout layout) {
    return eval(true, [&](Builder& g) { return g.rope(g.weight(in), g.weight(tables), layout); });
  };
  const Tensor split = rope(x, RopeLayout::HalfSplit);
  const Tensor inter = rope(permuted, RopeLayout::Interleaved);
  for (int64_t r = 0; r < tokens * heads; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_FLOAT_EQ(inter.data<float>()[r * hd + 2 * i], split.data<float>()[r * hd + i]);
      EXPECT_FLOAT_EQ(inter.data<float>()[r * hd + 2 * i + 1],
                      split.data<float>()[r * hd + i + half]);
    }
    // Dims past the rotary part are left alone.
    EXPECT_EQ(split.data<float>()[r * hd + 6], x.data<float>()[r * hd + 6]);
    EXPECT_EQ(split.data<float>()[r * hd + 7], x.data<float>()[r * hd + 7]);
  }
}

// Default rotary tables: cos and sin of position * theta^(-2i / rot), each segment from its
// own first position (rows of a second sequence restart at its pos0).
TEST(Rope, TablesAreCosSinOfEachSequencesPositions) {
  RopeConfig c;
  c.head_dim = 16;
  c.rot_dim = 8;
  c.max_position_embeddings = 64;
  const Rope rope(c);
  Step step = segment_step({{.seq = 0, .first = 0, .count = 3, .pos0 = 30},
                            {.seq = 1, .first = 3, .count = 2, .pos0 = 0}});
  const Tensor t = eval(
      true,
      [&](Builder& g) { return g.rope_tables(rope, g.input(graph::InputSlot::Positions, 5)); },
      step);
  ASSERT_EQ(t.shape(), (Shape{2, 5, 4}));
  const int64_t positions[] = {30, 31, 32, 0, 1};
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t i = 0; i < 4; ++i) {
      const double angle = static_cast<double>(positions[r]) * std::pow(10000.0, -2.0 * i / 8);
      EXPECT_NEAR(t.data<float>()[r * 4 + i], std::cos(angle), 2e-5) << r << " " << i;
      EXPECT_NEAR(t.data<float>()[20 + r * 4 + i], std::sin(angle), 2e-5) << r << " " << i;
    }
}

// ---- Rows, Reshape ----

TEST(Rows, PicksTheLogitRows) {
  const Tensor x = random_tensor({5, 3}, 90);
  Step step = rows_step(5);
  step.logit_rows = {4, 0, 4};
  const Tensor r = eval(
      true,
      [&](Builder& g) { return g.rows(g.weight(x), g.input(graph::InputSlot::LogitRows, 3)); },
      step);
  ASSERT_EQ(r.shape(), (Shape{3, 3}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t d = 0; d < 3; ++d)
      EXPECT_EQ(r.data<float>()[i * 3 + d], x.data<float>()[step.logit_rows[i] * 3 + d]);
}

TEST(Reshape, IsTheSameDataUnderAnotherShape) {
  const Tensor x = random_tensor({4, 6}, 91);
  const Tensor r = eval(true, [&](Builder& g) { return g.reshape(g.weight(x), {2, 3, 4}); });
  EXPECT_EQ(r.shape(), (Shape{2, 3, 4}));
  EXPECT_TRUE(std::equal(x.data<float>(), x.data<float>() + x.numel(), r.data<float>()));
  Builder g;
  EXPECT_THROW(g.reshape(g.weight(x), {5, 5}), Error);
}

// ---- Plan ----

// Every way the fast backend can run a Linear (KernelChoices::variants: tasks per thread, rows of x
// per pass) gives the default's bits, for each weight type, in decode and in prompts longer
// than one pass: the compiled mode may choose any of them (src/compile/module.h).
TEST(Plan, EveryLinearVariantGivesTheDefaultBits) {
  const Backend& backend = cpu_backend(false);
  ThreadPool pool(3);
  for (DType dt : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_0, DType::MXFP4, DType::FP8})
    for (int64_t m : {1, 5, 130, 300}) {
      const int64_t n = 100, k = 128;
      const Tensor w = random_tensor({n, k}, 870).to(dt);
      const Tensor x = random_tensor({m, k}, 871), bias = random_tensor({n}, 872);
      Builder b;
      const Value y = b.linear(b.weight(x), b.weight(w), b.weight(bias));
      b.output(y);
      graph::Plan plan(std::move(b.graph()), backend, pool.size(), 16);
      const size_t node = static_cast<size_t>(y.id);
      const int variants = variant_count(backend, plan.graph(), plan.graph().nodes[node]);
      EXPECT_GE(variants, 2) << dtype_name(dt);
      plan.run(pool, {});
      const Tensor expected = plan.value(y).clone();
      for (int v = 1; v < variants; ++v) {
        plan.set_variant(node, v);
        plan.run(pool, {});
        EXPECT_TRUE(same_bits(expected, plan.value(y)))
            << dtype_name(dt) << " m " << m << " variant " << v << ": "
            << backend.choices()->variant_name(plan.graph(), plan.graph().nodes[node], v);
      }
    }
}

// A plan runs again and again while the step shape repeats (decode): each run reads that
// run's inputs and state, also on a plan sized for more context than the caches hold.
TEST(Plan, RepeatedRunsMatchFreshRuns) {
  const Tensor table = random_tensor({10, 6}, 80);
  const Tensor q = random_tensor({1, 4, 8}, 81), k = random_tensor({1, 2, 8}, 82),
               v = random_tensor({1, 2, 8}, 83);
  const Builder::AttentionParams p{
      .layer = 0, .window = 0, .scale = 0.35f, .softcap = 0, .bias = PositionBias::None};
  const LayerStateSpec spec{
      .kind = StateKind::FullKV, .kv_heads = 2, .head_dim = 8, .window = 0, .recurrent = {}};
  for (bool reference : {true, false}) {
    const Backend& backend = cpu_backend(reference);
    ThreadPool pool(3);
    Builder b;
    const Value ids = b.input(graph::InputSlot::Tokens, 3);
    const Value e = b.embedding(b.weight(table), ids);
    const Value att = b.attention(b.weight(q), b.weight(k), b.weight(v), p);
    b.output(e);
    b.output(att);
    graph::Plan plan(std::move(b.graph()), backend, pool.size(), 64);
    KVCache planned = prefilled_cache({spec}, 16, 1, 5, 84);
    KVCache eager = prefilled_cache({spec}, 16, 1, 5, 84);
    const std::vector<int32_t> tokens[] = {{1, 2, 3}, {9, 0, 2}, {4, 4, 4}};
    for (int64_t step = 0; step < 3; ++step) {
      const std::vector<int32_t> positions = {static_cast<int32_t>(5 + step)};
      const graph::Segment seg{.seq = 0, .first = 0, .count = 1, .pos0 = 5 + step};
      KVCache* pc[] = {&planned};
      KVCache* ec[] = {&eager};
      const graph::StepData pd{.tokens = tokens[step],
                               .positions = positions,
                               .logit_rows = {},
                               .segments = {&seg, 1},
                               .caches = pc,
                               .max_context = 16};
      const graph::StepData ed{.tokens = tokens[step],
                               .positions = positions,
                               .logit_rows = {},
                               .segments = {&seg, 1},
                               .caches = ec,
                               .max_context = 16};
      plan.run(pool, pd);
      graph::EagerRunner runner(backend, pool, ed);
      Builder g(runner.hook());
      const Value ge = g.embedding(g.weight(table), g.input(graph::InputSlot::Tokens, 3));
      const Value ga = g.attention(g.weight(q), g.weight(k), g.weight(v), p);
      EXPECT_TRUE(same_bits(plan.value(e), runner.value(ge))) << backend.name() << " " << step;
      EXPECT_TRUE(same_bits(plan.value(att), runner.value(ga))) << backend.name() << " " << step;
      EXPECT_TRUE(same_bits(planned.layers[0].k, eager.layers[0].k));
      EXPECT_TRUE(same_bits(planned.layers[0].v, eager.layers[0].v));
      ++planned.length;
      ++eager.length;
    }
  }
}

}  // namespace
}  // namespace lathe::optest
