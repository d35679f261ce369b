// Known answers for DeepSeek sparse attention's ops: the Indexer's choice against its
// definition and against torch.topk's tie order (GlmMoeDsaIndexer's index_scores.topk), and
// Attention over chosen keys against softmax over those keys only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backends/cpu/backend.h"
#include "backends/op_harness.h"
#include "core/error.h"

namespace lathe::optest {
namespace {

using graph::Builder;
using graph::Value;

// One sequence whose layer 0 holds an index key of `dim` floats and a latent of `latent`
// floats (values inside) per position, prefilled to pos0.
Step dsa_step(int64_t count, int64_t pos0, int64_t max_seq, int64_t dim, int64_t latent = 8) {
  Step step = rows_step(count, pos0);
  step.caches = [=] {
    const LayerStateSpec spec{.kind = StateKind::FullKV,
                              .kv_heads = 1,
                              .head_dim = latent,
                              .window = 0,
                              .recurrent = {},
                              .v_head_dim = 0,
                              .index_dim = dim};
    std::vector<KVCache> caches;
    caches.push_back(prefilled_cache({spec}, max_seq, count, pos0, 7));
    return caches;
  };
  return step;
}

std::vector<int32_t> row(const Tensor& chosen, int64_t t) {
  const int64_t k = chosen.dim(1);
  const int32_t* c = chosen.data<int32_t>() + t * k;
  std::vector<int32_t> out;
  for (int64_t i = 0; i < k && c[i] >= 0; ++i) out.push_back(c[i]);
  return out;
}

// The keys each query chooses: the top_k of sum_h w_h relu(scale q_h . k_j) over the keys it
// sees (j <= its position), in double, ascending. The random scores have no ties.
TEST(Indexer, ChoosesTheTopScoresOfTheVisibleKeys) {
  const int64_t n = 6, pos0 = 10, heads = 3, dim = 9, top_k = 5;
  const Tensor q = random_tensor({n, heads, dim}, 1), k = random_tensor({n, dim}, 2);
  const Tensor w = random_tensor({n, heads}, 3);
  const float scale = 0.3f;
  for (bool reference : {true, false}) {
    ThreadPool pool(reference ? 1 : 3);
    const Outcome o = run(
        cpu_backend(reference), pool, Mode::Planned,
        [&](Builder& g) {
          return std::vector{g.indexer(g.weight(q), g.weight(k), g.weight(w), 0, top_k, scale)};
        },
        dsa_step(n, pos0, 32, dim));
    const Tensor& keys = o.caches[0].layers[0].index_k;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t p = pos0 + t;
      std::vector<double> score(static_cast<size_t>(p + 1));
      for (int64_t j = 0; j <= p; ++j)
        for (int64_t h = 0; h < heads; ++h) {
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d)
            dot += double{q.data<float>()[(t * heads + h) * dim + d]} *
                   keys.data<float>()[j * dim + d];
          score[static_cast<size_t>(j)] +=
              w.data<float>()[t * heads + h] * std::max(dot * scale, 0.0);
        }
      std::vector<int32_t> order(static_cast<size_t>(p + 1));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
      });
      order.resize(static_cast<size_t>(top_k));
      std::sort(order.begin(), order.end());
      EXPECT_EQ(row(o.values[0], t), order) << "row " << t << (reference ? " reference" : "");
    }
    // This step's keys were appended at their positions.
    for (int64_t t = 0; t < n; ++t)
      for (int64_t d = 0; d < dim; ++d)
        EXPECT_EQ(keys.data<float>()[(pos0 + t) * dim + d], k.data<float>()[t * dim + d]);
  }
}

// With every weight 0 every score ties at 0 (as relu makes many of them on real models), and
// the keys kept are those torch.topk keeps over the row transformers scores: the step's keys,
// the ones a query may not see at -inf. Expected sets from torch 2.15 on CPU, e.g.
// torch.zeros(24).topk(7).indices -> {13, 14, 15, 16, 17, 18, 21}.
TEST(Indexer, TiesBreakAsTorchTopkBreaksThem) {
  struct TieCase {
    int64_t count, pos0, top_k, t;  // row t of a step of `count` rows at pos0
    std::vector<int32_t> want;
  };
  const TieCase cases[] = {
      {24, 0, 7, 23, {13, 14, 15, 16, 17, 18, 21}},  // nth_element over 24 keys
      {24, 0, 7, 5, {0, 1, 2, 3, 4, 5}},             // 6 visible, 18 at -inf: all kept
      {1, 23, 7, 0, {13, 14, 15, 16, 17, 18, 21}},   // the same row as a decode step
      {1, 39, 10, 0, {21, 22, 23, 24, 25, 26, 27, 28, 29, 30}},
      {13, 0, 6, 12, {6, 7, 8, 9, 10, 11}},
      {1, 499, 7, 0, {0, 1, 2, 3, 4, 5, 6}},  // 7 * 64 <= 500: partial_sort
  };
  const int64_t heads = 2, dim = 4;
  for (const TieCase& c : cases)
    for (bool reference : {true, false}) {
      const int64_t n = c.count;
      const Tensor q = random_tensor({n, heads, dim}, 4), k = random_tensor({n, dim}, 5);
      const Tensor w = Tensor::zeros(DType::F32, {n, heads});
      ThreadPool pool(reference ? 1 : 3);
      const Outcome o = run(
          cpu_backend(reference), pool, Mode::Planned,
          [&](Builder& g) {
            return std::vector{g.indexer(g.weight(q), g.weight(k), g.weight(w), 0, c.top_k, 1)};
          },
          dsa_step(n, c.pos0, c.pos0 + n, dim));
      EXPECT_EQ(row(o.values[0], c.t), c.want) << c.count << " rows at " << c.pos0;
    }
}

// Attention over chosen keys is softmax(q . k_j * scale) . v_j over those keys alone; with
// top_k above the visible keys every key is kept and the bits are plain attention's.
TEST(Attention, ChosenKeysOnly) {
  const int64_t n = 7, pos0 = 9, heads = 4, latent = 20, vdim = 13, idim = 6;
  const Tensor iq = random_tensor({n, 2, idim}, 11), ik = random_tensor({n, idim}, 12);
  const Tensor iw = random_tensor({n, 2}, 13);
  const Tensor q = random_tensor({n, heads, latent}, 14), k = random_tensor({n, 1, latent}, 15);
  const Builder::AttentionParams p{.layer = 0, .scale = 0.25f, .value_dim = vdim};
  for (bool reference : {true, false}) {
    ThreadPool pool(reference ? 1 : 3);
    auto sparse = [&](int64_t top_k) {
      return run(
          cpu_backend(reference), pool, Mode::Planned,
          [&](Builder& g) {
            const Value chosen =
                g.indexer(g.weight(iq), g.weight(ik), g.weight(iw), 0, top_k, 0.5f);
            return std::vector{g.attention(g.weight(q), g.weight(k), {}, p, {}, {}, chosen),
                               chosen};
          },
          dsa_step(n, pos0, 32, idim, latent));
    };
    const Outcome o = sparse(5);
    const Tensor& keys = o.caches[0].layers[0].k;  // [slots, 1, latent], values inside
    double worst = 0;
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<int32_t> chosen = row(o.values[1], t);
      ASSERT_EQ(chosen.size(), 5u);
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> e;
        double max = -1e300, sum = 0;
        for (int32_t j : chosen) {
          double s = 0;
          for (int64_t d = 0; d < latent; ++d)
            s += double{q.data<float>()[(t * heads + h) * latent + d]} *
                 keys.data<float>()[j * latent + d];
          e.push_back(s * p.scale);
          max = std::max(max, e.back());
        }
        for (double& x : e) sum += (x = std::exp(x - max));
        for (int64_t d = 0; d < vdim; ++d) {
          double out = 0;
          for (size_t i = 0; i < chosen.size(); ++i)
            out += e[i] / sum * keys.data<float>()[chosen[i] * latent + d];
          worst = std::max(worst,
                           std::fabs(out - o.values[0].data<float>()[(t * heads + h) * vdim + d]));
        }
      }
    }
    EXPECT_LT(worst, 1e-5) << (reference ? "reference" : "fast");

    const Outcome all = sparse(64);
    ThreadPool pool2(reference ? 1 : 3);
    const Outcome dense = run(
        cpu_backend(reference), pool2, Mode::Planned,
        [&](Builder& g) { return std::vector{g.attention(g.weight(q), g.weight(k), {}, p)}; },
        dsa_step(n, pos0, 32, idim, latent));
    EXPECT_TRUE(same_bits(all.values[0], dense.values[0])) << (reference ? "reference" : "fast");
  }
}

// Chosen keys come from an indexer and exclude windows, caps, biases and sinks.
TEST(Attention, ChosenKeysMustComeFromAnIndexer) {
  Builder g;
  const Value q = g.weight(random_tensor({2, 2, 4}, 1));
  const Value k = g.weight(random_tensor({2, 1, 4}, 2));
  const Value v = g.weight(random_tensor({2, 1, 4}, 3));
  const Value not_chosen = g.weight(random_tensor({2, 3}, 4));
  EXPECT_THROW(g.attention(q, k, v, {.layer = 0, .scale = 1}, {}, {}, not_chosen), Error);
  const Value chosen =
      g.indexer(g.weight(random_tensor({2, 1, 4}, 5)), g.weight(random_tensor({2, 4}, 6)),
                g.weight(random_tensor({2, 1}, 7)), 0, 3, 1);
  EXPECT_THROW(g.attention(q, k, v, {.layer = 0, .window = 2, .scale = 1}, {}, {}, chosen), Error);
  EXPECT_NO_THROW(g.attention(q, k, v, {.layer = 0, .scale = 1}, {}, {}, chosen));
}

}  // namespace
}  // namespace lathe::optest
