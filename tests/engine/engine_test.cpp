// The engine on real fixtures: eager and planned execution agree bit for bit; a batch of
// sequences of different lengths gives exactly the tokens and logits of separate runs;
// sliding-window layers keep state sized by the window, and prompts split into steps give the
// same numbers; graph hashes are stable and tell shapes, dtypes and layouts apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "core/numeric.h"
#include "core/quant.h"
#include "engine/fixtures.h"
#include "generate/generate.h"
#include "io/tiny_checkpoint.h"
#include "models/registry.h"
#include "support/run.h"

namespace lathe {
namespace {

class EngineFixture : public ::testing::TestWithParam<std::string> {
 protected:
  ThreadPool pool{2};
};

TEST_P(EngineFixture, EagerAndPlannedAgreeBitForBit) {
  auto l = load(GetParam());
  const auto prompt = ids(9, l->model->info().vocab_size, 1);
  Tensor out[2];
  std::vector<std::pair<std::string, Tensor>> traced[2];
  for (int eager = 0; eager < 2; ++eager) {
    Context ctx{&pool, false, eager == 1};
    Trace trace = [&](const std::string& name, const Tensor& t) {
      traced[eager].emplace_back(name, t.clone());
    };
    KVCache cache = l->model->new_cache(16);
    out[eager] = l->model->forward(ctx, prompt, cache, true, &trace);
    // and a decode step after the prompt
    const int32_t next = 3;
    Tensor step = l->model->forward(ctx, {&next, 1}, cache, false);
    EXPECT_EQ(step.dim(0), 1);
  }
  EXPECT_TRUE(same_bits(out[0], out[1]));
  // Eager traces a node when it is named, planned when it has run: compare by name.
  for (auto& t : traced)
    std::stable_sort(t.begin(), t.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  ASSERT_EQ(traced[0].size(), traced[1].size());
  for (size_t i = 0; i < traced[0].size(); ++i) {
    EXPECT_EQ(traced[0][i].first, traced[1][i].first);
    EXPECT_TRUE(same_bits(traced[0][i].second, traced[1][i].second)) << traced[0][i].first;
  }
  // Op-level names are traced, not only layer outputs.
  bool saw_attn = false;
  for (const auto& [name, t] : traced[0]) saw_attn |= name == "layer.0.attn";
  EXPECT_TRUE(saw_attn);
}

TEST_P(EngineFixture, BatchGivesTheTokensOfSeparateRuns) {
  auto l = load(GetParam());
  const int64_t vocab = l->model->info().vocab_size;
  Context ctx{&pool, false, false};
  std::vector<BatchRequest> requests = {{ids(7, vocab, 1), 12},
                                        {ids(3, vocab, 2), 20},
                                        {ids(11, vocab, 3), 5},
                                        {ids(1, vocab, 4), 9}};
  GenerateOptions go;
  std::vector<GenerateResult> alone;
  for (const BatchRequest& r : requests) {
    KVCache cache = l->model->new_cache(40);
    go.max_new_tokens = r.max_new_tokens;
    alone.push_back(generate(*l->model, ctx, cache, r.prompt, go));
  }
  std::vector<KVCache> caches;
  std::vector<KVCache*> ptrs;
  for (size_t i = 0; i < requests.size(); ++i) caches.push_back(l->model->new_cache(40));
  for (KVCache& c : caches) ptrs.push_back(&c);
  const auto batched = generate_batch(l->graph(), ctx, ptrs, requests, go);
  ASSERT_EQ(batched.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(batched[i].tokens, alone[i].tokens) << "sequence " << i;
    EXPECT_EQ(static_cast<int64_t>(batched[i].tokens.size()), requests[i].max_new_tokens);
  }
}

TEST_P(EngineFixture, BatchedStepLogitsEqualSeparateSteps) {
  auto l = load(GetParam());
  const int64_t vocab = l->model->info().vocab_size;
  Context ctx{&pool, false, false};
  const auto a = ids(5, vocab, 5), b = ids(8, vocab, 6);
  KVCache ca = l->model->new_cache(16), cb = l->model->new_cache(16);
  const Tensor la = l->model->forward(ctx, a, ca, true);
  const Tensor lb = l->model->forward(ctx, b, cb, true);
  // Both prompts in one step, b first, every row's logits.
  KVCache c[2] = {l->model->new_cache(16), l->model->new_cache(16)};
  KVCache* caches[] = {&c[0], &c[1]};
  std::vector<int32_t> tokens(b), positions, seq(b.size(), 1), rows(a.size() + b.size());
  tokens.insert(tokens.end(), a.begin(), a.end());
  for (size_t i = 0; i < b.size(); ++i) positions.push_back(static_cast<int32_t>(i));
  for (size_t i = 0; i < a.size(); ++i) positions.push_back(static_cast<int32_t>(i));
  seq.insert(seq.end(), a.size(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  Engine engine(l->graph(), ctx);
  const Tensor& both = engine.step(tokens, positions, seq, rows, caches);
  const size_t row = static_cast<size_t>(vocab) * sizeof(float);
  EXPECT_EQ(std::memcmp(both.data<float>(), lb.data<float>(), b.size() * row), 0);
  EXPECT_EQ(std::memcmp(both.data<float>() + b.size() * vocab, la.data<float>(), a.size() * row),
            0);
  EXPECT_EQ(c[0].length, 5);
  EXPECT_EQ(c[1].length, 8);
}

TEST_P(EngineFixture, PromptSplitIntoStepsGivesTheSameLogits) {
  auto l = load(GetParam());
  Context ctx{&pool, false, false};
  const auto prompt = ids(13, l->model->info().vocab_size, 7);
  KVCache whole = l->model->new_cache(20);
  const Tensor expected = l->model->forward(ctx, prompt, whole, true);
  // Steps of 3 tokens: sliding layers then keep rings of window + 2 slots.
  KVCache split = l->graph().new_cache(20, 3);
  EXPECT_EQ(split.max_step_tokens(), split.bytes() < whole.bytes() ? 3 : 20);
  const Tensor got = l->model->forward(ctx, prompt, split, true);
  EXPECT_TRUE(same_bits(expected, got));
  // Decoding on after the prompt agrees too.
  const int32_t next[] = {2, 4, 6, 8, 10, 12, 14};
  for (int32_t id : next) {
    const Tensor a = l->model->forward(ctx, {&id, 1}, whole, false);
    const Tensor b = l->model->forward(ctx, {&id, 1}, split, false);
    EXPECT_TRUE(same_bits(a, b)) << "token " << id;
  }
}

// With a bf16 KV cache (keys and values rounded when appended) the engine keeps its
// guarantees: eager and planned agree bit for bit, a prompt split into steps gives the logits
// of one step, and a batch the tokens of separate runs; and the logits differ from an f32
// cache's (the rounding happened) wherever the model keeps keys.
TEST_P(EngineFixture, Bf16KvCacheKeepsTheEngineExact) {
  auto l = load(GetParam());
  const int64_t vocab = l->model->info().vocab_size;
  const auto prompt = ids(13, vocab, 7);
  Context planned{&pool, false, false, DType::BF16}, eager{&pool, false, true, DType::BF16};
  KVCache whole = l->model->new_cache(24, DType::BF16),
          by_node = l->model->new_cache(24, DType::BF16);
  KVCache split = l->graph().new_cache(24, 3, DType::BF16), f32 = l->model->new_cache(24);
  EXPECT_EQ(whole.kv_dtype(), DType::BF16);
  const Tensor expected = l->model->forward(planned, prompt, whole, true);
  EXPECT_TRUE(same_bits(expected, l->model->forward(eager, prompt, by_node, true)));
  EXPECT_TRUE(same_bits(expected, l->model->forward(planned, prompt, split, true)));
  const Tensor exact = l->model->forward(planned, prompt, f32, true);
  bool keeps_keys = false;
  for (const KVCache::Layer& layer : whole.layers) keeps_keys |= layer.k.defined();
  const double drift = nmse({expected.data<float>(), static_cast<size_t>(expected.numel())},
                            {exact.data<float>(), static_cast<size_t>(exact.numel())});
  EXPECT_EQ(drift > 0, keeps_keys) << "NMSE against the f32 cache " << drift;
  const int32_t next[] = {2, 4, 6};
  for (int32_t id : next) {
    const Tensor a = l->model->forward(planned, {&id, 1}, whole, false);
    EXPECT_TRUE(same_bits(a, l->model->forward(eager, {&id, 1}, by_node, false))) << id;
    EXPECT_TRUE(same_bits(a, l->model->forward(planned, {&id, 1}, split, false))) << id;
  }
  std::vector<BatchRequest> requests = {{ids(7, vocab, 1), 6}, {ids(3, vocab, 2), 9}};
  GenerateOptions go;
  std::vector<KVCache> caches;
  std::vector<KVCache*> ptrs;
  for (size_t i = 0; i < requests.size(); ++i)
    caches.push_back(l->model->new_cache(20, DType::BF16));
  for (KVCache& c : caches) ptrs.push_back(&c);
  const auto batched = generate_batch(l->graph(), planned, ptrs, requests, go);
  for (size_t i = 0; i < requests.size(); ++i) {
    KVCache cache = l->model->new_cache(20, DType::BF16);
    go.max_new_tokens = requests[i].max_new_tokens;
    EXPECT_EQ(batched.at(i).tokens,
              generate(*l->model, planned, cache, requests[i].prompt, go).tokens)
        << "sequence " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, EngineFixture, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return info.param; });
// Quantized matrices keep the same guarantees (a dense model, a mixture of experts, a sliding
// window and a hybrid).
INSTANTIATE_TEST_SUITE_P(EngineQuantized, EngineFixture,
                         ::testing::Values("llama_tied_gqa@q8_0", "llama_tied_gqa@q4_0",
                                           "qwen3_moe_headdim_mlp_only@q8_0", "mistral_window@q4_0",
                                           "qwen3_next_moe_hybrid@q8_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           n[n.find('@')] = '_';
                           return n;
                         });

// Recurrent layers carry their state from step to step: a prompt run whole, token by token or
// in uneven pieces gives the same logits, and decoding on from each gives the same too. Their
// state is the same size whatever the sequence length.
class RecurrentFixture : public ::testing::TestWithParam<std::string> {
 protected:
  ThreadPool pool{2};
};

TEST_P(RecurrentFixture, PromptWholeTokenByTokenOrInPiecesAgree) {
  auto l = load(GetParam());
  Context ctx{&pool, false, false};
  const int64_t vocab = l->model->info().vocab_size;
  const auto prompt = ids(13, vocab, 3);
  KVCache whole = l->model->new_cache(32);
  const Tensor expected = l->model->forward(ctx, prompt, whole, true);
  for (size_t piece : {size_t{1}, size_t{5}}) {
    KVCache split = l->model->new_cache(32);
    std::vector<float> rows;
    for (size_t i = 0; i < prompt.size(); i += piece) {
      const size_t n = std::min(piece, prompt.size() - i);
      const Tensor t = l->model->forward(ctx, {prompt.data() + i, n}, split, true);
      rows.insert(rows.end(), t.data<float>(), t.data<float>() + t.numel());
    }
    ASSERT_EQ(rows.size(), static_cast<size_t>(expected.numel()));
    // The matmul kernels tile a 13-row step and a 1-row one differently: f32 rounding only.
    const double e = nmse(rows, {expected.data<float>(), rows.size()});
    EXPECT_LE(e, 1e-12) << "pieces of " << piece;
    const int32_t next[] = {3, 9, 27};
    KVCache again = l->model->new_cache(32);
    l->model->forward(ctx, prompt, again, false);
    for (int32_t id : next) {
      const Tensor a = l->model->forward(ctx, {&id, 1}, again, false);
      const Tensor b = l->model->forward(ctx, {&id, 1}, split, false);
      EXPECT_LE(nmse({b.data<float>(), static_cast<size_t>(b.numel())},
                     {a.data<float>(), static_cast<size_t>(a.numel())}),
                1e-12)
          << "pieces of " << piece << ", then token " << id;
    }
  }
}

TEST_P(RecurrentFixture, StateDoesNotGrowWithTheSequence) {
  auto l = load(GetParam());
  const KVCache small = l->model->new_cache(64), big = l->model->new_cache(4096);
  int recurrent = 0;
  for (size_t i = 0; i < big.layers.size(); ++i) {
    if (big.layers[i].kind != StateKind::Recurrent) continue;
    uint64_t a = 0, b = 0;
    for (const Tensor& t : small.layers[i].states) a += t.nbytes();
    for (const Tensor& t : big.layers[i].states) b += t.nbytes();
    EXPECT_EQ(a, b) << "layer " << i;
    // A layer with no tensors keeps nothing (NemotronH's MLP and MoE layers); the others do.
    EXPECT_EQ(a > 0, !big.layers[i].states.empty()) << "layer " << i;
    recurrent += a > 0;
  }
  EXPECT_GT(recurrent, 0) << "the fixture has layers with recurrent state";
}

INSTANTIATE_TEST_SUITE_P(Engine, RecurrentFixture,
                         ::testing::Values("qwen3_next_moe_hybrid", "qwen3_5_dense_interval3_tied",
                                           "qwen3_5_moe_hybrid", "mamba2_groups", "mamba2_tied",
                                           "lfm2_tied_conv_attn", "lfm2_moe_expert_bias_dense2",
                                           "granitemoehybrid_moe_rope",
                                           "nemotron_h_pattern_moe_groups",
                                           "falcon_h1_mup_norm_before_gate"),
                         [](const auto& info) { return info.param; });

TEST(Engine, SlidingWindowStateIsSizedByTheWindow) {
  auto l = load("mistral_window");
  const auto specs = l->graph().layer_states();
  int64_t window = 0;
  for (const LayerStateSpec& s : specs)
    if (s.kind == StateKind::SlidingKV) window = s.window;
  ASSERT_GT(window, 0) << "the fixture has sliding layers";
  const KVCache small = l->model->new_cache(4096);
  const KVCache big = l->model->new_cache(65536);
  EXPECT_EQ(small.bytes(), big.bytes()) << "sliding KV does not grow with max_seq";
  for (const KVCache::Layer& layer : big.layers) {
    EXPECT_EQ(layer.kind, StateKind::SlidingKV);
    EXPECT_EQ(layer.slots, window - 1 + GraphModel::kDefaultMaxStepTokens);
  }
  // Gemma2 alternates sliding and full layers: only the full ones grow with max_seq.
  auto gemma2 = load("gemma2_softcap_window");
  const KVCache g_small = gemma2->model->new_cache(4096), g_big = gemma2->model->new_cache(65536);
  int sliding = 0, full_layers = 0;
  for (size_t i = 0; i < g_big.layers.size(); ++i) {
    const uint64_t small_bytes = g_small.layers[i].k.nbytes(),
                   big_bytes = g_big.layers[i].k.nbytes();
    if (g_big.layers[i].kind == StateKind::SlidingKV) {
      ++sliding;
      EXPECT_EQ(small_bytes, big_bytes) << "layer " << i;
    } else {
      ++full_layers;
      EXPECT_EQ(16 * small_bytes, big_bytes) << "layer " << i;
    }
  }
  EXPECT_GT(sliding, 0);
  EXPECT_GT(full_layers, 0);
  // A full-attention model's cache grows with max_seq.
  auto full = load("llama_tied_gqa");
  EXPECT_EQ(full->model->new_cache(8192).bytes(), 2 * full->model->new_cache(4096).bytes());
}

// Gemma4's KV-shared layers (the last num_kv_shared_layers) keep nothing: the shared fixture's
// cache is the unshared text model's (the same layers, num_kv_shared_layers 0) less its last
// two layers, a sliding one like layer 2 and a full one like layer 1.
TEST(Engine, Gemma4SharedLayersKeepNoCache) {
  auto shared = load("gemma4_text_kv_shared");
  auto own = load("gemma4_multimodal_text");
  const KVCache s = shared->model->new_cache(4096), o = own->model->new_cache(4096);
  ASSERT_EQ(s.layers.size(), 5u);
  ASSERT_EQ(o.layers.size(), 5u);
  for (size_t i : {3u, 4u}) {
    EXPECT_FALSE(s.layers[i].k.defined() || s.layers[i].v.defined()) << "layer " << i;
    EXPECT_TRUE(s.layers[i].states.empty()) << "layer " << i;
  }
  EXPECT_EQ(o.layers[3].kind, StateKind::SlidingKV);
  EXPECT_EQ(o.layers[4].kind, StateKind::FullKV);
  const uint64_t layer2 = s.layers[2].k.nbytes() + s.layers[2].v.nbytes(),
                 layer1 = s.layers[1].k.nbytes() + s.layers[1].v.nbytes();
  EXPECT_GT(layer2, 0u);
  EXPECT_GT(layer1, layer2) << "the full layer grows with max_seq, the ring does not";
  EXPECT_EQ(o.bytes(), s.bytes() + layer1 + layer2);
}

// A bf16 KV cache takes half the bytes of an f32 one in every key and value tensor (full,
// sliding ring, MLA's keys alone, Gemma4's shared layers none); recurrent state stays f32.
// Weights copied at load onto 2 MiB pages (--copy-weights) give the same bits as the mapped
// ones, in f32 and bf16.
TEST_P(EngineFixture, CopiedWeightsGiveTheSameBits) {
  for (DType storage : {DType::F32, DType::BF16}) {
    Tensor out[2];
    for (int copy = 0; copy < 2; ++copy) {
      auto l = load(GetParam(), storage, copy == 1);
      const auto prompt = ids(9, l->model->info().vocab_size, 2);
      Context ctx{&pool, false, false};
      KVCache cache = l->model->new_cache(16);
      l->model->forward(ctx, prompt, cache, false);
      const int32_t next = 5;
      out[copy] = l->model->forward(ctx, {&next, 1}, cache, true);
    }
    EXPECT_TRUE(same_bits(out[0], out[1])) << dtype_name(storage);
  }
}

TEST(Engine, Bf16KvCacheHalvesTheKvBytes) {
  for (const char* name : {"llama_tied_gqa", "gemma2_softcap_window", "deepseek_v3_mla_lora_groups",
                           "qwen3_5_dense_interval3_tied", "gemma4_text_kv_shared"}) {
    auto l = load(name);
    const KVCache f32 = l->model->new_cache(4096), bf16 = l->model->new_cache(4096, DType::BF16);
    uint64_t kv_f32 = 0, kv_bf16 = 0, state_f32 = 0, state_bf16 = 0;
    for (size_t i = 0; i < f32.layers.size(); ++i) {
      const KVCache::Layer &a = f32.layers[i], &b = bf16.layers[i];
      for (const Tensor* t : {&a.k, &a.v}) kv_f32 += t->defined() ? t->nbytes() : 0;
      for (const Tensor* t : {&b.k, &b.v}) kv_bf16 += t->defined() ? t->nbytes() : 0;
      for (const Tensor& t : a.states) state_f32 += t.nbytes();
      for (const Tensor& t : b.states) {
        state_bf16 += t.nbytes();
        EXPECT_EQ(t.dtype(), DType::F32) << name << " layer " << i;
      }
      if (b.k.defined()) {
        EXPECT_EQ(b.k.dtype(), DType::BF16) << name << " layer " << i;
      }
    }
    EXPECT_GT(kv_f32, 0u) << name;
    EXPECT_EQ(kv_f32, 2 * kv_bf16) << name;
    EXPECT_EQ(state_f32, state_bf16) << name;
    EXPECT_EQ(f32.bytes(), kv_f32 + state_f32) << name;
    EXPECT_EQ(bf16.bytes(), kv_bf16 + state_bf16) << name;
  }
  auto llama = load("llama_tied_gqa");
  EXPECT_EQ(llama->model->new_cache(4096).bytes(),
            2 * llama->model->new_cache(4096, DType::BF16).bytes());
}

TEST(Engine, GraphHashIsStableAndTellsGraphsApart) {
  auto l = load("llama_tied_gqa");
  ThreadPool pool(1);
  Context ctx{&pool, false, false};
  Engine engine(l->graph(), ctx);
  const uint64_t h = engine.build_graph(5, 1).hash();
  EXPECT_EQ(h, engine.build_graph(5, 1).hash());
  EXPECT_NE(h, engine.build_graph(6, 1).hash());  // tokens
  EXPECT_NE(h, engine.build_graph(5, 5).hash());  // logit rows
  auto other = load("llama_tied_gqa");
  EXPECT_EQ(h, Engine(other->graph(), ctx).build_graph(5, 1).hash()) << "weights do not count";
  auto bf16 = load("llama_tied_gqa", DType::BF16);
  EXPECT_NE(h, Engine(bf16->graph(), ctx).build_graph(5, 1).hash());  // dtype
  auto mha = load("llama_untied_mha_llama3");
  EXPECT_NE(h, Engine(mha->graph(), ctx).build_graph(5, 1).hash());  // layout
}

TEST(Engine, DecodeStepsReuseOnePlan) {
  auto l = load("llama_tied_gqa");
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  Engine engine(l->graph(), ctx);
  KVCache cache = l->model->new_cache(32);
  KVCache* caches[] = {&cache};
  const auto prompt = ids(6, l->model->info().vocab_size, 9);
  std::vector<int32_t> pos(6), seq(6, 0), last = {5};
  std::iota(pos.begin(), pos.end(), 0);
  engine.step(prompt, pos, seq, last, caches);
  const int32_t zero = 0;
  for (int32_t t = 0; t < 10; ++t) {
    const int32_t id = t + 1, p = static_cast<int32_t>(cache.length);
    engine.step({&id, 1}, {&p, 1}, {&zero, 1}, {&zero, 1}, caches);
  }
  EXPECT_EQ(engine.plans_built(), 2);  // the prompt's and the decode step's
  ASSERT_NE(engine.last_plan(), nullptr);
  EXPECT_LT(engine.last_plan()->arena_bytes(), engine.last_plan()->unplanned_bytes());
}

TEST(Engine, StepErrorsNameTheProblem) {
  auto l = load("llama_tied_gqa");
  ThreadPool pool(1);
  Context ctx{&pool, false, false};
  Engine engine(l->graph(), ctx);
  KVCache cache = l->model->new_cache(4);
  KVCache* caches[] = {&cache};
  const std::vector<int32_t> five = {1, 2, 3, 4, 5}, pos = {0, 1, 2, 3, 4}, seq(5, 0), row = {4};
  try {
    engine.step(five, pos, seq, row, caches);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raise --max-seq"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length, 0) << "a failed step appends nothing";
  const std::vector<int32_t> bad = {1, 1 << 30}, p2 = {0, 1}, s2 = {0, 0}, r2 = {1};
  try {
    engine.step(bad, p2, s2, r2, caches);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length, 0);
}

}  // namespace
}  // namespace lathe
