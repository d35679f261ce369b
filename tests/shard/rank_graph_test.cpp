// Each rank's step graph (src/shard/rank_graph.h) against one process, on every tiny fixture.
//
// A sharded run puts each rank in its own process under mpirun (tests/shard/workers_test.cpp);
// here the ranks are threads of one process, joined by collectives over shared memory, so
// that every rank graph runs without mpirun and under the sanitizers. For each fixture and
// each way it can be split (tp 2, tp 4 where the heads allow it, ep 2 for experts; hybrids,
// MLA and mixtures of experts under tp too): a prompt and three decode steps through each
// rank's share of the KV cache give logits within NMSE 1e-9 of the one-process run (only the
// order of f32 sums differs), every rank the same bits. A model that cannot be split says why
// in one sentence, at load: a count that does not divide.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/error.h"
#include "io/tiny_checkpoint.h"
#include "lab/compare.h"
#include "models/engine.h"
#include "models/registry.h"
#include "shard/rank_graph.h"
#include "support/run.h"

namespace lathe::shard {
namespace {
namespace fs = std::filesystem;

// The ranks of one run, as threads: each publishes its input, waits for the others, copies
// them all, and waits again before its input may change.
struct ThreadGroup {
  explicit ThreadGroup(int n) : size(n), inputs(static_cast<size_t>(n)), sync(n) {}
  int size;
  std::vector<const float*> inputs;
  std::barrier<> sync;
};

class ThreadCollectives : public graph::Collectives {
 public:
  ThreadCollectives(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.size; }
  void all_gather(const float* in, int64_t n, float* out, const std::string&) override {
    g_.inputs[static_cast<size_t>(rank_)] = in;
    g_.sync.arrive_and_wait();
    for (int r = 0; r < g_.size; ++r)
      std::copy_n(g_.inputs[static_cast<size_t>(r)], n, out + r * n);
    g_.sync.arrive_and_wait();
  }

 private:
  ThreadGroup& g_;
  int rank_;
};

std::vector<int32_t> ids(int64_t n, int64_t vocab, int32_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((seed * 7919 + i * 104729) % vocab);
  return v;
}

// The prompt's logits, then each decode step's, side by side in one tensor's worth of floats.
std::vector<float> run(const Model& model, int64_t vocab) {
  ThreadPool pool(1);
  Context ctx{&pool};
  KVCache cache = model.new_cache(32);
  std::vector<float> out;
  auto keep = [&](const Tensor& t) {
    out.insert(out.end(), t.data<float>(), t.data<float>() + t.numel());
  };
  keep(model.forward(ctx, ids(7, vocab, 3), cache, true));
  for (int step = 0; step < 3; ++step)
    keep(model.forward(ctx, ids(1, vocab, 11 + step), cache, false));
  return out;
}

double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

class RankGraph : public ::testing::TestWithParam<std::string> {};

TEST_P(RankGraph, RanksTogetherGiveTheOneProcessLogits) {
  const std::string name = GetParam();
  testing::ScratchDir dir{"rank"};
  build_tiny_checkpoint(testing::fixture_dir(name), dir.path(), {.dtype = DType::F32});
  // A checkpoint per load: loading may release tensors it converted (FP8, MXFP4).
  const std::unique_ptr<Model> one = load_model(Checkpoint::open(dir.path()), {});
  const int64_t vocab = one->info().vocab_size;
  const std::vector<float> expected = run(*one, vocab);
  int splits = 0;
  for (const auto& [parallelism, degree] :
       {std::pair{Parallelism::Tensor, 2}, {Parallelism::Tensor, 4}, {Parallelism::Expert, 2}}) {
    SCOPED_TRACE(cat(parallelism_name(parallelism), "=", degree));
    ThreadGroup group(degree);
    std::vector<std::unique_ptr<ThreadCollectives>> comms;
    for (int r = 0; r < degree; ++r) comms.push_back(std::make_unique<ThreadCollectives>(group, r));
    // Whether it splits is known at load, the same on every rank.
    std::vector<std::unique_ptr<Model>> ranks;
    std::string refused;
    for (int r = 0; r < degree && refused.empty(); ++r) {
      ModelOptions o;
      const RankSpec spec{parallelism, degree, r, comms[r].get()};
      o.wrap = [spec](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
        return std::make_unique<ShardedModel>(std::move(m), spec);
      };
      try {
        ranks.push_back(load_model(Checkpoint::open(dir.path()), o));
      } catch (const NotShardable& e) {
        refused = e.what();
      }
    }
    if (!refused.empty()) {
      EXPECT_NE(refused.find(one->info().architecture), std::string::npos) << refused;
      EXPECT_EQ(refused.find("internal"), std::string::npos) << refused;
      // What is left to refuse: a count that does not divide, or experts a model lacks.
      EXPECT_TRUE(
          refused.find("divide") != std::string::npos ||
          (parallelism == Parallelism::Expert && refused.find("no experts") != std::string::npos))
          << refused;
      continue;
    }
    ++splits;
    std::vector<std::vector<float>> got(static_cast<size_t>(degree));
    std::vector<std::string> errors(static_cast<size_t>(degree));
    {
      std::vector<std::jthread> threads;
      for (int r = 0; r < degree; ++r)
        threads.emplace_back([&, r] {
          try {
            got[r] = run(*ranks[r], vocab);
          } catch (const std::exception& e) {
            errors[r] = e.what();
          }
        });
    }
    for (int r = 0; r < degree; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(got[0].size(), expected.size());
    EXPECT_LE(nmse(got[0], expected), 1e-9);
    for (int r = 1; r < degree; ++r) EXPECT_TRUE(got[r] == got[0]) << "rank " << r << " differs";
  }
  // Every fixture whose counts divide by 2 splits at least one way (the five that do not are
  // refused above with their numbers).
  if (name.find("llama") != std::string::npos || name.find("moe") != std::string::npos ||
      name.find("mamba") != std::string::npos || name.find("deepseek") != std::string::npos) {
    EXPECT_GT(splits, 0) << name << " split no way";
  }
}

// Under --quantize each rank quantizes its own slices (a column block's rows as one process
// quantizes them; a row block's columns where they are whole groups of 64, else kept f32):
// the ranks agree bit for bit, hold quantized matrices, and stay within the quantized type's
// error of one process quantized the same way.
TEST(RankGraphQuantized, RanksQuantizeTheirOwnSlices) {
  for (const std::string name : {"llama_tied_gqa", "qwen3_moe_headdim_mlp_only"}) {
    SCOPED_TRACE(name);
    testing::ScratchDir dir{"rank-q"};
    build_tiny_checkpoint(testing::fixture_dir(name), dir.path(), {.dtype = DType::F32});
    ModelOptions base;
    base.quantize = DType::Q8_0;
    const std::unique_ptr<Model> one = load_model(Checkpoint::open(dir.path()), base);
    ASSERT_GT(one->info().quantized_matrices, 0);
    const int64_t vocab = one->info().vocab_size;
    const std::vector<float> expected = run(*one, vocab);
    constexpr int kRanks = 2;
    ThreadGroup group(kRanks);
    std::vector<std::unique_ptr<ThreadCollectives>> comms;
    std::vector<std::unique_ptr<Model>> ranks;
    for (int r = 0; r < kRanks; ++r) {
      comms.push_back(std::make_unique<ThreadCollectives>(group, r));
      ModelOptions o = base;
      const RankSpec spec{Parallelism::Tensor, kRanks, r, comms[r].get()};
      o.wrap = [spec](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
        return std::make_unique<ShardedModel>(std::move(m), spec);
      };
      ranks.push_back(load_model(Checkpoint::open(dir.path()), o));
      EXPECT_GT(ranks.back()->info().quantized_matrices, 0);
      EXPECT_LT(ranks.back()->info().quantized_bytes, one->info().quantized_bytes);
    }
    // The f32 slices of the load's probe gave way to their quantized copies: a rank keeps
    // less than the f32 slices of the same rank unquantized.
    {
      ThreadGroup g(kRanks);
      ThreadCollectives c(g, 0);
      ModelOptions f32;
      const RankSpec spec{Parallelism::Tensor, kRanks, 0, &c};
      f32.wrap = [spec](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
        return std::make_unique<ShardedModel>(std::move(m), spec);
      };
      const auto plain = load_model(Checkpoint::open(dir.path()), f32);
      const uint64_t f32_bytes = dynamic_cast<const ShardedModel&>(*plain).slice_bytes();
      const uint64_t q_bytes = dynamic_cast<const ShardedModel&>(*ranks[0]).slice_bytes();
      EXPECT_GT(q_bytes, 0u);
      EXPECT_LT(q_bytes, f32_bytes * 3 / 4) << q_bytes << " of " << f32_bytes;
    }
    std::vector<std::vector<float>> got(kRanks);
    {
      std::vector<std::jthread> threads;
      for (int r = 0; r < kRanks; ++r)
        threads.emplace_back([&, r] { got[r] = run(*ranks[r], vocab); });
    }
    EXPECT_TRUE(got[1] == got[0]);
    EXPECT_LE(nmse(got[0], expected), 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, RankGraph, ::testing::ValuesIn(testing::fixture_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lathe::shard
