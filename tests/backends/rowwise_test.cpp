// Known answers for the ops Gemma3n brought: row statistics against torch's definitions,
// broadcasting arithmetic element by element, per-token matmuls against a double sum, and
// embeddings whose out-of-table ids read zeros or row 0.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "backends/cpu/backend.h"
#include "backends/op_harness.h"
#include "core/error.h"

namespace lathe::optest {
namespace {

using graph::BinaryOp;
using graph::Builder;
using graph::RowStat;
using graph::Value;

Tensor eval(const std::function<Value(Builder&)>& f, const Step& step = {}) {
  ThreadPool pool(1);
  return run(
             cpu_backend(true), pool, Mode::Planned, [&](Builder& b) { return std::vector{f(b)}; },
             step)
      .values.at(0);
}

TEST(RowStat, MeanStdAndRmsMatchTheirDefinitions) {
  const Tensor x = random_tensor({5, 11}, 21, 3.0f);
  const Tensor mean = eval([&](Builder& g) { return g.row_stat(g.weight(x), RowStat::Mean); });
  const Tensor std = eval([&](Builder& g) { return g.row_stat(g.weight(x), RowStat::Std); });
  const Tensor rms = eval([&](Builder& g) { return g.row_stat(g.weight(x), RowStat::Rms); });
  ASSERT_EQ(mean.shape(), (Shape{5, 1}));
  for (int64_t r = 0; r < 5; ++r) {
    const float* row = x.data<float>() + r * 11;
    double sum = 0, squares = 0, deviations = 0;
    for (int i = 0; i < 11; ++i) sum += row[i], squares += double{row[i]} * row[i];
    for (int i = 0; i < 11; ++i) deviations += (row[i] - sum / 11) * (row[i] - sum / 11);
    EXPECT_NEAR(mean.data<float>()[r], sum / 11, 1e-6);
    EXPECT_NEAR(std.data<float>()[r], std::sqrt(deviations / 11), 1e-6);  // unbiased=False
    EXPECT_NEAR(rms.data<float>()[r], std::sqrt(squares / 11), 1e-6);
  }
}

// Gemma3n: sqrt(clamp(mean(x^2), min=1e-5)).
TEST(RowStat, RmsFloorClampsTheMeanSquare) {
  Tensor x = Tensor::zeros(DType::F32, {2, 4});
  x.mut<float>()[4] = 1e-4f;
  const Tensor r = eval([&](Builder& g) { return g.row_stat(g.weight(x), RowStat::Rms, 1e-5f); });
  EXPECT_EQ(r.data<float>()[0], std::sqrt(1e-5f));
  EXPECT_EQ(r.data<float>()[1], std::sqrt(1e-5f));
  Builder g;
  EXPECT_THROW(g.row_stat(g.weight(x), RowStat::Rms, -1.0f), Error);
}

TEST(Binary, BroadcastsAsTorchDoes) {
  const Tensor a = random_tensor({2, 3, 1}, 22), b = random_tensor({3, 4}, 23);
  const Tensor c = random_tensor({2, 3, 4}, 24);
  const Tensor prod = eval([&](Builder& g) { return g.mul(g.weight(a), g.weight(b)); });
  ASSERT_EQ(prod.shape(), (Shape{2, 3, 4}));
  const Tensor diff = eval([&](Builder& g) { return g.sub(g.weight(c), g.weight(a)); });
  const Tensor quot = eval([&](Builder& g) { return g.div(g.weight(c), g.weight(b)); });
  const Tensor sum =
      eval([&](Builder& g) { return g.binary(BinaryOp::Add, g.weight(c), g.weight(c)); });
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        const int64_t o = (i * 3 + j) * 4 + k;
        const float av = a.data<float>()[i * 3 + j], bv = b.data<float>()[j * 4 + k];
        const float cv = c.data<float>()[o];
        EXPECT_EQ(prod.data<float>()[o], av * bv);
        EXPECT_EQ(diff.data<float>()[o], cv - av);
        EXPECT_EQ(quot.data<float>()[o], cv / bv);
        EXPECT_EQ(sum.data<float>()[o], cv + cv);
      }
  Builder g;
  EXPECT_THROW(g.mul(g.weight(a), g.weight(random_tensor({2, 5}, 1))), Error);
}

TEST(BatchMatmul, IsEachTokensMatrixProduct) {
  const Tensor a = random_tensor({3, 4, 5}, 25), b = random_tensor({3, 5, 6}, 26);
  const Tensor y = eval([&](Builder& g) { return g.batch_matmul(g.weight(a), g.weight(b)); });
  ASSERT_EQ(y.shape(), (Shape{3, 4, 6}));
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 6; ++j) {
        double want = 0;
        for (int p = 0; p < 5; ++p)
          want +=
              double{a.data<float>()[(t * 4 + i) * 5 + p]} * b.data<float>()[(t * 5 + p) * 6 + j];
        EXPECT_NEAR(y.data<float>()[(t * 4 + i) * 6 + j], want, 1e-5);
      }
  Builder g;
  EXPECT_THROW(g.batch_matmul(g.weight(a), g.weight(a)), Error);
}

// Out-of-table ids: zeros (Gemma3nMultimodalEmbedder's range outside its own) or row 0
// (get_per_layer_inputs maps ids past vocab_size_per_layer_input to 0).
TEST(Embedding, OutOfRangeIdsReadZerosOrTheFirstRow) {
  const Tensor table = random_tensor({4, 3}, 27);
  for (graph::IdRange range : {graph::IdRange::Zeros, graph::IdRange::FirstRow}) {
    Step step = rows_step(3);
    step.tokens = {5, 6, 9};  // with offset -5: 0, 1 and 4 (past the table)
    const Tensor e = eval(
        [&](Builder& g) {
          return g.embedding(g.weight(table), g.input(graph::InputSlot::Tokens, 3), -5, range);
        },
        step);
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(e.data<float>()[d], table.data<float>()[d]);
      EXPECT_EQ(e.data<float>()[3 + d], table.data<float>()[3 + d]);
      EXPECT_EQ(e.data<float>()[6 + d],
                range == graph::IdRange::Zeros ? 0.0f : table.data<float>()[d]);
    }
  }
  // One side reads zeros, the other fails: the first and the last range of a vocabulary.
  auto one = [&](graph::IdRange range, int32_t id) {
    Step step = rows_step(1);
    step.tokens = {id};
    return eval(
        [&](Builder& g) {
          return g.embedding(g.weight(table), g.input(graph::InputSlot::Tokens, 1), -5, range);
        },
        step);
  };
  EXPECT_EQ(one(graph::IdRange::ZerosBelow, 4).data<float>()[0], 0.0f);
  EXPECT_THROW(one(graph::IdRange::ZerosBelow, 9), Error);
  EXPECT_EQ(one(graph::IdRange::ZerosPast, 9).data<float>()[0], 0.0f);
  EXPECT_THROW(one(graph::IdRange::ZerosPast, 4), Error);
}

}  // namespace
}  // namespace lathe::optest
