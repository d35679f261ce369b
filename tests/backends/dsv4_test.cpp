// DeepseekV4's ops against their definitions in transformers' modeling_deepseek_v4.py,
// computed here in double: the compressor (Op::Compress) and the visibility of its entries,
// attention over a window plus entries in one softmax, the indexer over entries, the
// hyper-connection weights (Op::HyperMix), the sqrt(softplus) and hash routes, a token sent
// to one expert twice, and the rotary of a head's last dims and its inverse. The fixture
// tests/fixtures/tiny/deepseek_v4_hash_csa_hca_sliding checks the whole model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/backend.h"
#include "backends/op_harness.h"
#include "graph/backend.h"
#include "models/rope.h"

namespace lathe {
namespace {

using graph::Value;
using optest::random_tensor;

// A rotary schedule over the last `rot` dims (default rotary, theta 10000).
Rope rope_of(int64_t head_dim, int64_t rot) {
  RopeConfig c;
  c.head_dim = head_dim;
  c.rot_dim = rot;
  c.max_position_embeddings = 1024;
  return Rope(c);
}

// One cache layer: a sliding ring of keys (= values) and the given compressors.
LayerStateSpec layer(int64_t head_dim, int64_t window,
                     std::vector<LayerStateSpec::Compressor> compressors) {
  return {.kind = StateKind::SlidingKV,
          .kv_heads = 1,
          .head_dim = head_dim,
          .window = window,
          .v_head_dim = 0,
          .compressors = std::move(compressors)};
}

// transformers' compressor for entry w in double: per channel a softmax over the window's
// gates (+ position bias), CSA's first `rate` slots the previous window's first half,
// then RMSNorm (weight `norm`), then the last rot dims rotated at position w * rate.
std::vector<double> expected_entry(const Tensor& kv, const Tensor& gate, const Tensor& ape,
                                   const Tensor& norm, int64_t w, int64_t rate, int64_t rot,
                                   double eps) {
  const int64_t width = kv.dim(1), dim = norm.numel();
  const bool overlap = width == 2 * dim;
  const float *k = kv.data<float>(), *g = gate.data<float>(), *b = ape.data<float>();
  std::vector<double> e(static_cast<size_t>(dim));
  for (int64_t ch = 0; ch < dim; ++ch) {
    std::vector<std::pair<double, double>> slots;  // (gate, kv)
    if (overlap && w > 0)
      for (int64_t j = 0; j < rate; ++j) {
        const int64_t p = (w - 1) * rate + j;
        slots.push_back({double{g[p * width + ch]} + b[j * width + ch], k[p * width + ch]});
      }
    const int64_t c = overlap ? dim + ch : ch;
    for (int64_t j = 0; j < rate; ++j) {
      const int64_t p = w * rate + j;
      slots.push_back({double{g[p * width + c]} + b[j * width + c], k[p * width + c]});
    }
    double top = -INFINITY, sum = 0, acc = 0;
    for (auto [gv, _] : slots) top = std::max(top, gv);
    for (auto [gv, _] : slots) sum += std::exp(gv - top);
    for (auto [gv, kvv] : slots) acc += kvv * std::exp(gv - top) / sum;
    e[static_cast<size_t>(ch)] = acc;
  }
  double ss = 0;
  for (double v : e) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) e[static_cast<size_t>(i)] *= inv * norm.data<float>()[i];
  // Interleaved pairs of the last rot dims, theta 10000 over rot dims.
  const double pos = static_cast<double>(w * rate);
  for (int64_t i = 0; i < rot / 2; ++i) {
    const double freq = std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(rot));
    const double cs = std::cos(pos * freq), sn = std::sin(pos * freq);
    double& a = e[static_cast<size_t>(dim - rot + 2 * i)];
    double& c = e[static_cast<size_t>(dim - rot + 2 * i + 1)];
    const double x = a, y = c;
    a = x * cs - y * sn;
    c = y * cs + x * sn;
  }
  return e;
}

struct CompressRun {
  std::vector<float> entries;  // the cache's entries after every step
};

// Runs Compress over `total` positions in steps of `step` tokens (the cache kept between).
CompressRun compress_in_steps(const Tensor& kv, const Tensor& gate, const Tensor& ape,
                              const Tensor& norm, const Rope& rope, int64_t rate, int64_t total,
                              int64_t step, bool reference) {
  const int64_t width = kv.dim(1), dim = norm.numel();
  std::vector<KVCache> caches;
  caches.emplace_back(std::vector{layer(dim, 4, {{rate, dim, width}})}, 64, 16);
  ThreadPool pool(2);
  for (int64_t p0 = 0; p0 < total; p0 += step) {
    const int64_t n = std::min(step, total - p0);
    const Tensor k = kv.rows(p0, n).clone(), g = gate.rows(p0, n).clone();
    optest::Step s = optest::rows_step(n, p0);
    std::vector<KVCache>* state = &caches;
    s.caches = [state] { return std::move(*state); };
    optest::Outcome out = optest::run(
        cpu_backend(reference), pool, optest::Mode::Planned,
        [&](graph::Builder& b) {
          return std::vector{b.compress(b.weight(k), b.weight(g), b.weight(ape), b.weight(norm),
                                        rope, {.layer = 0, .compressor = 0, .eps = 1e-6f})};
        },
        s);
    caches = std::move(out.caches);
  }
  const Tensor& e = caches[0].layers[0].compressed[0].entries;
  return {std::vector<float>(e.data<float>(), e.data<float>() + e.numel())};
}

TEST(Dsv4, CompressorEntriesAreTransformersWhateverTheSteps) {
  const int64_t dim = 12, rot = 4, rate = 4, total = 19;  // 4 windows close, 3 positions wait
  const Rope rope = rope_of(dim, rot);
  for (const int64_t width : {dim, 2 * dim}) {
    SCOPED_TRACE(width == dim ? "HCA" : "CSA (overlapping windows)");
    const Tensor kv = random_tensor({total, width}, 11);
    const Tensor gate = random_tensor({total, width}, 12, 3.0f);
    const Tensor ape = random_tensor({rate, width}, 13);
    const Tensor norm = random_tensor({dim}, 14);
    const CompressRun prefill =
        compress_in_steps(kv, gate, ape, norm, rope, rate, total, total, false);
    for (int64_t w = 0; w < total / rate; ++w) {
      const std::vector<double> want = expected_entry(kv, gate, ape, norm, w, rate, rot, 1e-6);
      for (int64_t i = 0; i < dim; ++i)
        EXPECT_NEAR(prefill.entries[static_cast<size_t>(w * dim + i)], want[static_cast<size_t>(i)],
                    1e-5)
            << "entry " << w << " dim " << i;
    }
    // The window past the last one is not made.
    for (int64_t i = 0; i < dim; ++i)
      EXPECT_EQ(prefill.entries[static_cast<size_t>((total / rate) * dim + i)], 0.0f);
    // Decode (a token a step), steps of 3 that cut windows, and the reference kernels give
    // the same bits: each window is made from the rows kept in the cache.
    for (auto [step, reference] :
         {std::pair{int64_t{1}, false}, {int64_t{3}, false}, {total, true}})
      EXPECT_EQ(compress_in_steps(kv, gate, ape, norm, rope, rate, total, step, reference).entries,
                prefill.entries)
          << "steps of " << step << (reference ? ", reference kernels" : "");
  }
}

// Attention of queries at positions [pos0, pos0 + n) over a window of keys (K = V) plus the
// compressor's entries w < (p + 1) / rate, with sinks; checked in double for every row.
TEST(Dsv4, AttentionTakesTheVisibleEntriesInOneSoftmax) {
  const int64_t hd = 8, heads = 2, window = 3, rate = 2, n = 7;
  const Rope rope = rope_of(hd, 4);
  const Tensor x_kv = random_tensor({n, hd}, 21), x_gate = random_tensor({n, hd}, 22);
  const Tensor ape = random_tensor({rate, hd}, 23), norm = random_tensor({hd}, 24);
  const Tensor q = random_tensor({n, heads, hd}, 25), k = random_tensor({n, 1, hd}, 26);
  const Tensor sinks = random_tensor({heads}, 27);
  ThreadPool pool(2);
  const float scale = 0.3f;
  std::vector<std::vector<float>> results;
  for (bool reference : {false, true}) {
    optest::Step s = optest::rows_step(n, 0);
    s.caches = [&] {
      std::vector<KVCache> c;
      c.emplace_back(std::vector{layer(hd, window, {{rate, hd, hd}})}, 32, 16);
      return c;
    };
    optest::Outcome out = optest::run(
        cpu_backend(reference), pool, optest::Mode::Planned,
        [&](graph::Builder& b) {
          b.compress(b.weight(x_kv), b.weight(x_gate), b.weight(ape), b.weight(norm), rope,
                     {.layer = 0, .compressor = 0, .eps = 1e-6f});
          return std::vector{b.attention(
              b.weight(q), b.weight(k), {},
              {.layer = 0, .window = window, .scale = scale, .value_dim = hd, .compressor = 0}, {},
              b.weight(sinks))};
        },
        s);
    const Tensor& entries = out.caches[0].layers[0].compressed[0].entries;
    const std::span<const float> got = optest::floats(out.values[0]);
    results.emplace_back(got.begin(), got.end());
    for (int64_t p = 0; p < n; ++p)
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<const float*> rows;  // keys in the window, then visible entries
        for (int64_t j = std::max<int64_t>(0, p - window + 1); j <= p; ++j)
          rows.push_back(k.data<float>() + j * hd);
        for (int64_t w = 0; w < (p + 1) / rate; ++w) rows.push_back(entries.data<float>() + w * hd);
        const float* qr = q.data<float>() + (p * heads + h) * hd;
        std::vector<double> s2;
        double top = sinks.data<float>()[h];
        for (const float* r : rows) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double{qr[d]} * r[d];
          s2.push_back(dot * scale);
          top = std::max(top, s2.back());
        }
        double sum = std::exp(sinks.data<float>()[h] - top);
        for (double v : s2) sum += std::exp(v - top);
        for (int64_t d = 0; d < hd; ++d) {
          double o = 0;
          for (size_t r = 0; r < rows.size(); ++r) o += std::exp(s2[r] - top) / sum * rows[r][d];
          EXPECT_NEAR(got[static_cast<size_t>((p * heads + h) * hd + d)], o, 1e-5)
              << "position " << p << " head " << h << " dim " << d;
        }
      }
  }
  EXPECT_EQ(results[0], results[1]) << "the fast and reference backends differ";
}

// The indexer over entries: each query's top_k by sum_h w_h relu(scale q_h . e), among the
// entries it sees, ascending, -1 past them.
TEST(Dsv4, IndexerChoosesAmongTheVisibleEntries) {
  const int64_t dim = 6, heads = 2, rate = 3, n = 11, top_k = 2;
  const Rope rope = rope_of(dim, 2);
  const Tensor kv = random_tensor({n, dim}, 31), gate = random_tensor({n, dim}, 32);
  const Tensor ape = random_tensor({rate, dim}, 33), norm = random_tensor({dim}, 34);
  const Tensor q = random_tensor({n, heads, dim}, 35), w = random_tensor({n, heads}, 36);
  ThreadPool pool(2);
  for (bool reference : {false, true}) {
    optest::Step s = optest::rows_step(n, 0);
    s.caches = [&] {
      std::vector<KVCache> c;
      c.emplace_back(std::vector{layer(dim, 4, {{rate, dim, dim}})}, 32, 16);
      return c;
    };
    optest::Outcome out = optest::run(
        cpu_backend(reference), pool, optest::Mode::Planned,
        [&](graph::Builder& b) {
          b.compress(b.weight(kv), b.weight(gate), b.weight(ape), b.weight(norm), rope,
                     {.layer = 0, .compressor = 0, .eps = 1e-6f});
          return std::vector{
              b.indexer(b.weight(q), {}, b.weight(w), 0, top_k, 0.5f, /*compressor=*/0)};
        },
        s);
    const Tensor& entries = out.caches[0].layers[0].compressed[0].entries;
    const int32_t* got = out.values[0].data<int32_t>();
    for (int64_t p = 0; p < n; ++p) {
      std::vector<std::pair<double, int32_t>> scored;
      for (int64_t e = 0; e < (p + 1) / rate; ++e) {
        double score = 0;
        for (int64_t h = 0; h < heads; ++h) {
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d)
            dot += double{q.data<float>()[(p * heads + h) * dim + d]} *
                   entries.data<float>()[e * dim + d];
          score += w.data<float>()[p * heads + h] * std::max(dot * 0.5, 0.0);
        }
        scored.push_back({-score, static_cast<int32_t>(e)});
      }
      std::sort(scored.begin(), scored.end());
      std::vector<int32_t> want;
      for (size_t i = 0; i < scored.size() && i < static_cast<size_t>(top_k); ++i)
        want.push_back(scored[i].second);
      std::sort(want.begin(), want.end());
      want.resize(static_cast<size_t>(top_k), -1);
      EXPECT_EQ(std::vector<int32_t>(got + p * top_k, got + (p + 1) * top_k), want)
          << "position " << p << (reference ? ", reference" : "");
    }
  }
}

// pre = sigmoid(m s0 + b) + eps, post = 2 sigmoid(m s1 + b), comb Sinkhorn-normalised and
// stored transposed: after enough iterations every row and column sums to 1.
TEST(Dsv4, HyperMixGivesPrePostAndADoublyStochasticComb) {
  const int64_t hc = 3, m = (2 + hc) * hc, n = 4;
  const Tensor mixes = random_tensor({n, m}, 41, 3.0f), base = random_tensor({m}, 42);
  const Tensor scale = random_tensor({3}, 43);
  ThreadPool pool(1);
  optest::Outcome out = optest::run(
      cpu_backend(false), pool, optest::Mode::Planned,
      [&](graph::Builder& b) {
        return std::vector{
            b.hyper_mix(b.weight(mixes), b.weight(base), b.weight(scale), hc, 40, 1e-6f)};
      },
      optest::rows_step(n));
  const float* y = out.values[0].data<float>();
  const float *x = mixes.data<float>(), *bb = base.data<float>(), *s = scale.data<float>();
  for (int64_t t = 0; t < n; ++t) {
    const float* r = y + t * m;
    for (int64_t i = 0; i < hc; ++i) {
      const double pre = 1 / (1 + std::exp(-(double{x[t * m + i]} * s[0] + bb[i]))) + 1e-6;
      const double post = 2 / (1 + std::exp(-(double{x[t * m + hc + i]} * s[1] + bb[hc + i])));
      EXPECT_NEAR(r[i], pre, 1e-6);
      EXPECT_NEAR(r[hc + i], post, 1e-6);
    }
    for (int64_t i = 0; i < hc; ++i) {
      double row = 0, col = 0;
      for (int64_t j = 0; j < hc; ++j) row += r[2 * hc + i * hc + j], col += r[2 * hc + j * hc + i];
      EXPECT_NEAR(row, 1.0, 1e-4);
      EXPECT_NEAR(col, 1.0, 1e-4);
    }
  }
  // With one iteration the comb is only normalised by columns, which the transposed store
  // makes its rows: each sums to 1 / (1 + eps * ...) ~ 1, while the other direction does not.
  optest::Outcome one = optest::run(
      cpu_backend(false), pool, optest::Mode::Planned,
      [&](graph::Builder& b) {
        return std::vector{
            b.hyper_mix(b.weight(mixes), b.weight(base), b.weight(scale), hc, 1, 1e-6f)};
      },
      optest::rows_step(n));
  const float* c = one.values[0].data<float>() + 2 * hc;
  for (int64_t i = 0; i < hc; ++i) {
    double row = 0;
    for (int64_t j = 0; j < hc; ++j) row += c[i * hc + j];
    EXPECT_NEAR(row, 1.0, 1e-5) << "stored row " << i;
  }
}

// Rotating a head's last dims and then by -theta gives back the input; the first dims are
// never touched.
TEST(Dsv4, RopeOfTheLastDimsAndItsInverse) {
  const int64_t n = 5, heads = 3, hd = 10, rot = 4;
  const Rope rope = rope_of(hd, rot);
  const Tensor x = random_tensor({n, heads, hd}, 51);
  ThreadPool pool(1);
  optest::Outcome out = optest::run(
      cpu_backend(false), pool, optest::Mode::Planned,
      [&](graph::Builder& b) {
        const Value pos = b.input(graph::InputSlot::Positions, n);
        const Value t = b.rope_tables(rope, pos);
        const Value r = b.rope(b.weight(x), t, graph::RopeLayout::Interleaved, true);
        return std::vector{r, b.rope(r, t, graph::RopeLayout::Interleaved, true, true)};
      },
      optest::rows_step(n, 7));
  const float *in = x.data<float>(), *rot_out = out.values[0].data<float>(),
              *back = out.values[1].data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_NEAR(back[i], in[i], 1e-6) << i;
    if (i % hd < hd - rot) {
      EXPECT_EQ(rot_out[i], in[i]) << i;
    }
  }
  // The last dims did move.
  EXPECT_NE(rot_out[hd - 1], in[hd - 1]);
}

// sqrt(softplus) scores: the top-k of score + bias, weighted by the scores; with given ids
// (the hash router) those experts, repeats included, and an Experts node then runs a token
// twice through one expert.
TEST(Dsv4, SqrtSoftplusRoutesAndRepeatedExperts) {
  const int64_t n = 3, experts = 4, dim = 6, inter = 5, k = 2;
  const Tensor logits = random_tensor({n, experts}, 61, 4.0f);
  const Tensor bias = random_tensor({experts}, 62);
  Tensor ids = Tensor::zeros(DType::F32, {n, k});
  const float given[] = {2, 2, 0, 3, 1, 1};  // tokens 0 and 2 choose one expert twice
  std::copy(std::begin(given), std::end(given), ids.mut<float>());
  const Tensor x = random_tensor({n, dim}, 63);
  std::vector<Tensor> w;
  for (int64_t e = 0; e < experts; ++e)
    for (const Shape& s : {Shape{inter, dim}, Shape{inter, dim}, Shape{dim, inter}})
      w.push_back(random_tensor(s, static_cast<uint32_t>(70 + w.size())));
  ThreadPool pool(2);
  for (bool reference : {false, true}) {
    optest::Outcome out = optest::run(
        cpu_backend(reference), pool, optest::Mode::Planned,
        [&](graph::Builder& b) {
          const graph::Builder::RouteParams rp{.routing = graph::Routing::SqrtSoftplus,
                                               .top_k = k,
                                               .norm_topk = true,
                                               .norm_eps = 1e-20f,
                                               .scale = 1.5f};
          const Value topk = b.route(b.weight(logits), rp, b.weight(bias));
          const Value hashed = b.route(b.weight(logits), rp, {}, {}, b.weight(ids));
          std::vector<graph::Builder::Expert> ex;
          for (int64_t e = 0; e < experts; ++e)
            ex.push_back({b.weight(w[static_cast<size_t>(3 * e)]),
                          b.weight(w[static_cast<size_t>(3 * e + 1)]),
                          b.weight(w[static_cast<size_t>(3 * e + 2)])});
          return std::vector{topk, hashed,
                             b.experts(b.weight(x), hashed, ex, graph::Activation::Silu,
                                       {.kind = graph::ExpertGlu::ClampedSilu, .limit = 0.7f})};
        },
        optest::rows_step(n));
    auto score = [&](int64_t t, int64_t e) {
      const double l = logits.data<float>()[t * experts + e];
      return std::sqrt(std::log1p(std::exp(l)));
    };
    for (int64_t t = 0; t < n; ++t) {
      // Top-k: the two largest score + bias.
      std::vector<std::pair<double, int64_t>> c;
      for (int64_t e = 0; e < experts; ++e) c.push_back({score(t, e) + bias.data<float>()[e], e});
      std::sort(c.rbegin(), c.rend());
      const float* r = out.values[0].data<float>();
      std::vector<int64_t> chosen = {static_cast<int64_t>(r[n * k + t * k]),
                                     static_cast<int64_t>(r[n * k + t * k + 1])};
      std::sort(chosen.begin(), chosen.end());
      std::vector<int64_t> want = {c[0].second, c[1].second};
      std::sort(want.begin(), want.end());
      EXPECT_EQ(chosen, want) << "token " << t;
      // Hashed: the given ids, weighted by their scores renormalised and scaled.
      const float* h = out.values[1].data<float>();
      const double a = score(t, given[t * k]), bb = score(t, given[t * k + 1]);
      EXPECT_EQ(h[n * k + t * k], given[t * k]);
      EXPECT_EQ(h[n * k + t * k + 1], given[t * k + 1]);
      EXPECT_NEAR(h[t * k], a / (a + bb) * 1.5, 1e-6);
      EXPECT_NEAR(h[t * k + 1], bb / (a + bb) * 1.5, 1e-6);
      // The experts' output: each slot's weight times its expert's clamped-SiLU MLP.
      for (int64_t d = 0; d < dim; ++d) {
        double o = 0;
        for (int64_t j = 0; j < k; ++j) {
          const auto e = static_cast<size_t>(given[t * k + j]);
          const float *wg = w[3 * e].data<float>(), *wu = w[3 * e + 1].data<float>(),
                      *wd = w[3 * e + 2].data<float>();
          double down = 0;
          for (int64_t i = 0; i < inter; ++i) {
            double gate = 0, up = 0;
            for (int64_t c2 = 0; c2 < dim; ++c2) {
              gate += double{wg[i * dim + c2]} * x.data<float>()[t * dim + c2];
              up += double{wu[i * dim + c2]} * x.data<float>()[t * dim + c2];
            }
            gate = std::min(gate, 0.7);
            up = std::clamp(up, -0.7, 0.7);
            down += wd[d * inter + i] * (gate / (1 + std::exp(-gate)) * up);
          }
          o += h[t * k + j] * down;
        }
        EXPECT_NEAR(out.values[2].data<float>()[t * dim + d], o, 1e-5)
            << "token " << t << " dim " << d << (reference ? ", reference" : "");
      }
    }
  }
}

}  // namespace
}  // namespace lathe
