// The bf16 KV cache (KVCache's kv_dtype, `--kv-dtype bf16`): each appended key and value is
// rounded to bf16 (nearest even) and the attention kernels widen them exactly, so attention
// over a bf16 cache is, bit for bit and at every kernel level, attention over an f32 cache
// holding the same rounded keys and values. Recurrent state stays f32.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "backends/cpu/backend.h"
#include "backends/cpu/isa.h"
#include "backends/op_harness.h"
#include "core/error.h"
#include "core/numeric.h"

namespace lathe::optest {
namespace {

using graph::Builder;

// f32 values rounded to bf16 and widened back.
float round_bf16(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}
Tensor rounded(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.mut<float>()[i] = round_bf16(r.data<float>()[i]);
  return r;
}

// An f32 copy of a cache's keys or values (bf16 widened exactly).
Tensor widened(const Tensor& t) {
  return t.defined() ? t.to(DType::F32) : Tensor();
}

struct KvCase {
  const char* what;
  int64_t heads, kv_heads, head_dim;
  int64_t count, pos0, max_seq;
  int64_t window = 0;
  bool ring = false;           // a SlidingKV layer (slots = window - 1 + count)
  int64_t v_dim = -1;          // the values' head size (-1: head_dim)
  int64_t values_in_keys = 0;  // > 0: MLA, no value cache
};

// gtest prints a failing case's name, not its bytes.
void PrintTo(const KvCase& c, std::ostream* os) {
  *os << c.what;
}

// The caches a step over `c` starts from: history of `seed` as kv_dtype.
std::vector<KVCache> caches(const KvCase& c, DType kv_dtype) {
  LayerStateSpec s{.kind = c.ring ? StateKind::SlidingKV : StateKind::FullKV,
                   .kv_heads = c.kv_heads,
                   .head_dim = c.head_dim,
                   .window = c.window,
                   .recurrent = {},
                   .v_head_dim = c.values_in_keys > 0 ? 0 : c.v_dim};
  std::vector<KVCache> out;
  out.push_back(prefilled_cache({s}, c.max_seq, c.count, c.pos0, 17, kv_dtype));
  return out;
}

// Rounds every key and value an f32 cache holds to bf16 values (still f32).
void round_in_place(KVCache& cache) {
  for (KVCache::Layer& l : cache.layers)
    for (Tensor* t : {&l.k, &l.v})
      if (t->defined())
        for (int64_t i = 0; i < t->numel(); ++i)
          t->mut<float>()[i] = round_bf16(t->data<float>()[i]);
}

std::vector<cpu::Isa> runnable_isas() {
  std::vector<cpu::Isa> out;
  for (int i = 0; i <= static_cast<int>(cpu::detected_isa()); ++i)
    out.push_back(static_cast<cpu::Isa>(i));
  return out;
}

struct IsaGuard {
  cpu::Isa saved = cpu::active_isa();
  ~IsaGuard() { cpu::set_active_isa(saved); }
};

class Bf16Cache : public ::testing::TestWithParam<KvCase> {};

TEST_P(Bf16Cache, EqualsAnF32CacheOfTheRoundedKeysAndValues) {
  const KvCase& c = GetParam();
  const Tensor q = random_tensor({c.count, c.heads, c.head_dim}, 31);
  const Tensor k = random_tensor({c.count, c.kv_heads, c.head_dim}, 32);
  const Tensor v =
      c.values_in_keys > 0
          ? Tensor()
          : random_tensor({c.count, c.kv_heads, c.v_dim > 0 ? c.v_dim : c.head_dim}, 33);
  const Builder::AttentionParams p{.layer = 0,
                                   .window = c.window,
                                   .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                                   .softcap = 0,
                                   .bias = graph::PositionBias::None,
                                   .value_dim = c.values_in_keys};
  auto build = [&](const Tensor& kk, const Tensor& vv) -> Build {
    return [&, kk, vv](Builder& g) {
      return std::vector{g.attention(g.weight(q), g.weight(kk), g.weight(vv), p)};
    };
  };
  Step bf16 = rows_step(c.count, c.pos0), f32 = rows_step(c.count, c.pos0),
       plain = rows_step(c.count, c.pos0);
  bf16.caches = [c] { return caches(c, DType::BF16); };
  f32.caches = [c] {
    std::vector<KVCache> out = caches(c, DType::F32);
    round_in_place(out[0]);
    return out;
  };
  plain.caches = [c] { return caches(c, DType::F32); };
  const Tensor rk = rounded(k), rv = v.defined() ? rounded(v) : Tensor();
  IsaGuard guard;
  ThreadPool one(1), three(3);
  struct Level {
    bool reference;
    cpu::Isa isa;
  };
  std::vector<Level> levels = {{true, cpu::Isa::Portable}};
  for (cpu::Isa isa : runnable_isas()) levels.push_back({false, isa});
  for (const Level& l : levels) {
    cpu::set_active_isa(l.isa);
    const std::string who = l.reference ? "reference" : cpu::isa_name(l.isa);
    ThreadPool& pool = l.reference ? one : three;
    const Backend& backend = cpu_backend(l.reference);
    const Outcome a = run(backend, pool, Mode::Planned, build(k, v), bf16);
    const Outcome b = run(backend, pool, Mode::Planned, build(rk, rv), f32);
    EXPECT_TRUE(same_bits(a.values.at(0), b.values.at(0))) << who;
    const KVCache::Layer &la = a.caches.at(0).layers.at(0), &lb = b.caches.at(0).layers.at(0);
    EXPECT_EQ(la.k.dtype(), DType::BF16) << who;
    EXPECT_EQ(la.k.nbytes() * 2, lb.k.nbytes()) << who;
    EXPECT_TRUE(same_bits(widened(la.k), lb.k)) << who << ": keys";
    EXPECT_TRUE(same_bits(widened(la.v), lb.v)) << who << ": values";
    EXPECT_EQ(la.v.defined(), c.values_in_keys == 0);
    // The rounding happened, and moved the output by about bf16's precision only.
    const Outcome f = run(backend, pool, Mode::Planned, build(k, v), plain);
    const double e = nmse(floats(a.values.at(0)), floats(f.values.at(0)));
    EXPECT_GT(e, 0) << who;
    EXPECT_LT(e, 1e-4) << who;
    // Eager and planned, one thread and three, agree.
    EXPECT_TRUE(same_outcome(a, run(backend, pool, Mode::Eager, build(k, v), bf16))) << who;
    EXPECT_TRUE(same_outcome(a, run(backend, one, Mode::Planned, build(k, v), bf16))) << who;
  }
}

INSTANTIATE_TEST_SUITE_P(Attention, Bf16Cache,
                         ::testing::Values(KvCase{"prefill_gqa", 6, 2, 16, 7, 0, 8},
                                           KvCase{"decode", 4, 4, 64, 1, 40, 48},
                                           KvCase{"head_dim_tail", 4, 2, 12, 5, 9, 16},
                                           KvCase{"v_dim_odd", 4, 2, 12, 5, 3, 12, 0, false, 37},
                                           KvCase{"ring", 4, 2, 8, 3, 40, 64, 4, true},
                                           KvCase{"ring_decode", 8, 2, 64, 1, 300, 320, 33, true},
                                           KvCase{"mla_values_in_keys", 8, 1, 72, 3, 20, 32, 0,
                                                  false, -1, 64}),
                         [](const auto& info) { return std::string(info.param.what); });

// Appending rounds to nearest, ties to even: 1 + 2^-8 lies halfway between the bf16 values 1
// and 1 + 2^-7 and goes to 1 (even); 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and
// 1 + 2^-6 and goes to 1 + 2^-6 (even); just above a tie goes up.
TEST(Bf16Cache, AppendRoundsToNearestEven) {
  const float values[] = {std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x3f818000u),
                          std::bit_cast<float>(0x3f808001u), -2.5f};
  const uint16_t want[] = {0x3f80, 0x3f82, 0x3f81, 0xc020};
  Tensor k = Tensor::zeros(DType::F32, {1, 1, 4});
  std::memcpy(k.mut<float>(), values, sizeof(values));
  const Tensor q = random_tensor({1, 1, 4}, 5), v = random_tensor({1, 1, 4}, 6);
  Step step = rows_step(1, 0);
  step.caches = [] {
    std::vector<KVCache> c;
    c.emplace_back(1, 4, 1, 4, DType::BF16);
    return c;
  };
  for (bool reference : {true, false}) {
    ThreadPool pool(1);
    const Outcome o = run(
        cpu_backend(reference), pool, Mode::Planned,
        [&](Builder& g) {
          return std::vector{g.attention(g.weight(q), g.weight(k), g.weight(v),
                                         {.layer = 0, .window = 0, .scale = 0.5f})};
        },
        step);
    const KVCache::Layer& l = o.caches.at(0).layers.at(0);
    ASSERT_EQ(l.k.dtype(), DType::BF16);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(l.k.data<uint16_t>()[i], want[i]) << "key " << i;
    // One key: the output is its value row, rounded.
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(o.values.at(0).data<float>()[i], round_bf16(v.data<float>()[i])) << i;
  }
}

// Keys and values of every KV kind (full, ring, MLA's keys alone) take half the bytes;
// recurrent state and its bytes stay f32; a cache type other than F32 and BF16 is refused.
TEST(Bf16Cache, HalvesKeysAndValuesOnlyAndRefusesOtherTypes) {
  const std::vector<LayerStateSpec> specs = {
      {.kind = StateKind::FullKV, .kv_heads = 2, .head_dim = 8},
      {.kind = StateKind::SlidingKV, .kv_heads = 2, .head_dim = 8, .window = 4},
      {.kind = StateKind::Recurrent, .recurrent = {{3, 16}, {2, 4, 4}}},
      {.kind = StateKind::FullKV, .kv_heads = 1, .head_dim = 24, .v_head_dim = 0}};
  const KVCache f32(specs, 64, 8), bf16(specs, 64, 8, DType::BF16);
  EXPECT_EQ(f32.kv_dtype(), DType::F32);
  EXPECT_EQ(bf16.kv_dtype(), DType::BF16);
  uint64_t recurrent = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const KVCache::Layer &a = f32.layers[i], &b = bf16.layers[i];
    EXPECT_EQ(a.slots, b.slots);
    for (const Tensor& t : b.states) {
      EXPECT_EQ(t.dtype(), DType::F32);
      recurrent += t.nbytes();
    }
    if (a.kind == StateKind::Recurrent) continue;
    EXPECT_EQ(b.k.dtype(), DType::BF16) << "layer " << i;
    EXPECT_EQ(b.k.shape(), a.k.shape()) << "layer " << i;
    EXPECT_EQ(2 * b.k.nbytes(), a.k.nbytes()) << "layer " << i;
    EXPECT_EQ(b.v.defined(), i != 3) << "layer " << i;
    if (b.v.defined()) {
      EXPECT_EQ(2 * b.v.nbytes(), a.v.nbytes()) << "layer " << i;
    }
  }
  EXPECT_EQ(recurrent, (3 * 16 + 2 * 4 * 4) * sizeof(float));
  EXPECT_EQ(2 * (bf16.bytes() - recurrent), f32.bytes() - recurrent);
  EXPECT_THROW(KVCache(specs, 64, 8, DType::F16), Error);
  EXPECT_THROW(KVCache(2, 8, 1, 4, DType::I32), Error);
}

}  // namespace
}  // namespace lathe::optest
