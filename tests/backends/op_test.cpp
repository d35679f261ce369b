// The op test bench, in the spirit of llama.cpp's test-backend-ops: every graph op over shape
// classes (one row as in decode, odd row counts, k not a multiple of 8, n not a multiple of 4,
// larger sizes) and dtypes, on every CPU backend. Each case proves three things:
//  - each backend's output is within tolerances.h of the reference backend's (bit for bit
//    where the table says 0), caches included;
//  - eager (EagerRunner) and planned (Plan) execution agree bit for bit;
//  - the fast backend's threaded split (3 threads) gives the bits of one thread.
// LATHE_OP_BENCH_REPORT=1 prints the fast backend's observed NMSE and max abs error per case,
// the figures behind the tolerances.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>

#include "backends/cpu/backend.h"
#include "backends/cpu/isa.h"
#include "backends/op_cases.h"
#include "backends/op_harness.h"
#include "backends/tolerances.h"
#include "core/numeric.h"
#include "models/rope.h"

namespace lathe::optest {

using graph::Activation;
using graph::Builder;
using graph::Op;
using graph::PositionBias;
using graph::RopeLayout;
using graph::Value;

std::string label(const Shape& s) {
  std::string out;
  for (int64_t d : s) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

uint32_t next_seed() {
  static uint32_t seed = 1000;
  return seed++;
}

namespace {

const char* act_name(Activation a) {
  switch (a) {
    case Activation::Silu:
      return "silu";
    case Activation::Gelu:
      return "gelu";
    case Activation::GeluTanh:
      return "gelu_tanh";
    case Activation::Relu:
      return "relu";
    case Activation::Relu2:
      return "relu2";
    case Activation::Sigmoid:
      return "sigmoid";
  }
  return "?";
}
// Every graph::Activation.
constexpr Activation kActivations[] = {Activation::Silu, Activation::Gelu,  Activation::GeluTanh,
                                       Activation::Relu, Activation::Relu2, Activation::Sigmoid};

// Elementwise and row-wise shape classes: decode (one row), odd rows and dims, larger, rank 3.
const Shape kRowShapes[] = {{1, 64}, {7, 13}, {37, 300}, {3, 5, 7}};

}  // namespace

void elementwise(std::vector<Case>& out, Op op, const std::string& name,
                 std::function<Value(Builder&, Value)> f, float scale) {
  for (const Shape& s : kRowShapes) {
    const Tensor x = random_tensor(s, next_seed(), scale);
    out.push_back({name + "_" + label(s), op, DType::F32,
                   [x, f](Builder& b) { return std::vector{f(b, b.weight(x))}; }, Step{}});
  }
}

namespace {

void linear_cases(std::vector<Case>& out) {
  struct S {
    int64_t m, n, k;
    const char* what;
  };
  const S shapes[] = {
      {1, 1, 1, "tiny"},          {1, 64, 128, "decode"}, {1, 7, 13, "decode_k13_n7"},
      {7, 16, 64, "odd_rows"},    {3, 9, 64, "n9"},       {5, 33, 70, "k70_n33"},
      {17, 5, 31, "k31_n5"},      {2, 64, 576, "k576"},   {37, 300, 200, "large"},
      {37, 301, 203, "large_odd"}};
  for (DType dt : {DType::F32, DType::BF16})
    for (bool bias : {false, true}) {
      const std::string suffix = std::string(bias ? "_bias_" : "_") + std::string(dtype_name(dt));
      for (const S& s : shapes) {
        const Tensor x = random_tensor({s.m, s.k}, next_seed());
        const Tensor w = random_tensor({s.n, s.k}, next_seed()).to(dt);
        const Tensor b = bias ? random_tensor({s.n}, next_seed()) : Tensor();
        out.push_back({std::string("linear_") + s.what + "_" + label({s.m, s.n, s.k}) + suffix,
                       Op::Linear, dt,
                       [x, w, b](Builder& g) {
                         return std::vector{g.linear(g.weight(x), g.weight(w), g.weight(b))};
                       },
                       Step{}});
      }
      // x of rank 3: [.., k] rows of every leading dimension.
      const Tensor x = random_tensor({3, 2, 24}, next_seed());
      const Tensor w = random_tensor({10, 24}, next_seed()).to(dt);
      const Tensor b = bias ? random_tensor({10}, next_seed()) : Tensor();
      out.push_back({"linear_rank3_3x2x24_n10" + suffix, Op::Linear, dt,
                     [x, w, b](Builder& g) {
                       return std::vector{g.linear(g.weight(x), g.weight(w), g.weight(b))};
                     },
                     Step{}});
    }
}

void embedding_cases(std::vector<Case>& out) {
  struct S {
    int64_t vocab, dim, ids;
  };
  const S shapes[] = {{50, 13, 1}, {50, 300, 7}, {1000, 64, 37}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (int64_t offset : {0, 2})  // 2: OPT's learned positions, read at positions
      for (const S& s : shapes) {
        const Tensor table = random_tensor({s.vocab, s.dim}, next_seed()).to(dt);
        Step step = rows_step(s.ids);
        std::mt19937 rng(next_seed());
        std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(s.vocab - offset - 1));
        for (int32_t& t : offset ? step.positions : step.tokens) t = id(rng);
        const graph::InputSlot slot =
            offset ? graph::InputSlot::Positions : graph::InputSlot::Tokens;
        out.push_back({"embedding_" + label({s.vocab, s.dim}) + "_ids" + std::to_string(s.ids) +
                           "_offset" + std::to_string(offset) + "_" + std::string(dtype_name(dt)),
                       Op::Embedding, dt,
                       [table, slot, n = s.ids, offset](Builder& g) {
                         return std::vector{g.embedding(g.weight(table), g.input(slot, n), offset)};
                       },
                       std::move(step)});
      }
}

void norm_cases(std::vector<Case>& out) {
  for (float offset : {0.0f, 1.0f})
    for (const Shape& s : kRowShapes) {
      const Tensor x = random_tensor(s, next_seed(), 3.0f);
      const Tensor w = random_tensor({s.back()}, next_seed());
      out.push_back({"rms_norm_offset" + std::to_string(static_cast<int>(offset)) + "_" + label(s),
                     Op::RmsNorm, DType::F32,
                     [x, w, offset](Builder& g) {
                       return std::vector{g.rms_norm(g.weight(x), g.weight(w), 1e-6f, offset)};
                     },
                     Step{}});
    }
  // Per-group weights [groups, group_size] that the rows of x [tokens, groups, group_size]
  // cycle through (Mamba2's gated norm).
  for (const Shape& s : {Shape{5, 3, 8}, Shape{1, 4, 16}, Shape{40, 2, 96}}) {
    const Tensor x = random_tensor(s, next_seed(), 3.0f);
    const Tensor w = random_tensor({s[1] * s[2]}, next_seed());
    out.push_back(
        {"rms_norm_grouped_" + label(s), Op::RmsNorm, DType::F32,
         [x, w](Builder& g) { return std::vector{g.rms_norm(g.weight(x), g.weight(w), 1e-5f)}; },
         Step{}});
  }
  // Shared weights and biases, each optional; then per-head ones [heads, head_dim] that the
  // rows of x [tokens, heads, head_dim] cycle through.
  struct Variant {
    const char* what;
    bool weight, bias;
  };
  const Variant variants[] = {{"weight_bias", true, true},
                              {"weight", true, false},
                              {"bias", false, true},
                              {"none", false, false}};
  auto add = [&](const std::string& name, const Shape& s, const Shape& wshape, Variant v) {
    const Tensor x = random_tensor(s, next_seed(), 3.0f);
    const Tensor w = v.weight ? random_tensor(wshape, next_seed()) : Tensor();
    const Tensor b = v.bias ? random_tensor(wshape, next_seed()) : Tensor();
    out.push_back({name + "_" + v.what + "_" + label(s), Op::LayerNorm, DType::F32,
                   [x, w, b](Builder& g) {
                     return std::vector{g.layer_norm(g.weight(x), g.weight(w), g.weight(b), 1e-5f)};
                   },
                   Step{}});
  };
  for (const Variant& v : variants)
    for (const Shape& s : kRowShapes) add("layer_norm", s, {s.back()}, v);
  for (const Shape& s : {Shape{1, 4, 16}, Shape{7, 3, 13}, Shape{37, 8, 32}})
    for (const Variant& v : variants)
      if (v.weight || v.bias) add("layer_norm_per_head", s, {s[1], s[2]}, v);
}

void elementwise_cases(std::vector<Case>& out) {
  for (Activation a : kActivations) {
    elementwise(
        out, Op::Activation, std::string("activation_") + act_name(a),
        [a](Builder& g, Value x) { return g.activation(a, x); }, 4.0f);
    for (const Shape& s : kRowShapes) {
      const Tensor gate = random_tensor(s, next_seed(), 4.0f), up = random_tensor(s, next_seed());
      out.push_back({std::string("act_mul_") + act_name(a) + "_" + label(s), Op::ActMul, DType::F32,
                     [a, gate, up](Builder& g) {
                       return std::vector{g.act_mul(a, g.weight(gate), g.weight(up))};
                     },
                     Step{}});
    }
  }
  for (const Shape& s : kRowShapes) {
    const Tensor a = random_tensor(s, next_seed()), b = random_tensor(s, next_seed());
    out.push_back({"add_" + label(s), Op::Add, DType::F32,
                   [a, b](Builder& g) { return std::vector{g.add(g.weight(a), g.weight(b))}; },
                   Step{}});
  }
  elementwise(out, Op::Scale, "scale", [](Builder& g, Value x) { return g.scale(x, 0.37f); });
  elementwise(out, Op::Divide, "divide", [](Builder& g, Value x) { return g.divide(x, 3.0f); });
  elementwise(
      out, Op::Softcap, "softcap", [](Builder& g, Value x) { return g.softcap(x, 2.5f); }, 6.0f);
  elementwise(out, Op::Clamp, "clamp", [](Builder& g, Value x) { return g.clamp(x, 0.6f); });
  elementwise(
      out, Op::Xielu, "xielu",
      [](Builder& g, Value x) { return g.xielu(x, 1.3f, 0.9f, 0.5f, -1e-6f); }, 4.0f);
  // A view of a computed node read by a later node: the planner must keep the viewed buffer
  // alive through the view's readers.
  const std::pair<Shape, Shape> reshapes[] = {
      {{7, 12}, {7, 3, 4}}, {{1, 64}, {1, 4, 16}}, {{37, 300}, {11100}}};
  for (const auto& pair : reshapes) {
    // Captured by name: clang before 16 cannot capture a structured binding.
    const Shape& from = pair.first;
    const Shape to = pair.second;
    const Tensor x = random_tensor(from, next_seed()), y = random_tensor(to, next_seed());
    out.push_back({"reshape_" + label(from) + "_to_" + label(to), Op::Reshape, DType::F32,
                   [x, y, to](Builder& g) {
                     const Value r = g.reshape(g.scale(g.weight(x), 2.0f), to);
                     return std::vector{r, g.add(r, g.weight(y))};
                   },
                   Step{}});
  }
}

// A rotary schedule of head_dim 16 (rot_dim < 16: partial rotary).
RopeConfig rope_config(RopeKind kind, int64_t rot_dim, int64_t max_positions, double factor) {
  RopeConfig c;
  c.kind = kind;
  c.head_dim = 16;
  c.rot_dim = rot_dim;
  c.max_position_embeddings = max_positions;
  c.original_max_position_embeddings = max_positions;
  c.factor = factor;
  return c;
}

void rope_cases(std::vector<Case>& out) {
  struct R {
    const char* what;
    RopeConfig config;
  };
  const R ropes[] = {
      {"default", rope_config(RopeKind::Default, 16, 64, 1.0)},
      {"partial", rope_config(RopeKind::Default, 8, 64, 1.0)},
      {"linear", rope_config(RopeKind::Linear, 16, 64, 2.0)},
      // Past max_position_embeddings: the tables depend on each sequence's length.
      {"dynamic", rope_config(RopeKind::Dynamic, 16, 16, 2.0)},
  };
  struct S {
    const char* what;
    std::vector<graph::Segment> segments;
  };
  const S steps[] = {
      {"first", {{.seq = 0, .first = 0, .count = 1, .pos0 = 0}}},
      {"decode", {{.seq = 0, .first = 0, .count = 1, .pos0 = 17}}},
      {"prefill7", {{.seq = 0, .first = 0, .count = 7, .pos0 = 0}}},
      {"two_sequences",
       {{.seq = 0, .first = 0, .count = 3, .pos0 = 5},
        {.seq = 1, .first = 3, .count = 4, .pos0 = 0}}},
      {"large", {{.seq = 0, .first = 0, .count = 37, .pos0 = 20}}},
  };
  for (const R& r : ropes)
    for (const S& s : steps) {
      auto rope = std::make_shared<Rope>(r.config);
      Step step = segment_step(s.segments);
      const int64_t n = static_cast<int64_t>(step.positions.size());
      out.push_back(
          {std::string("rope_tables_") + r.what + "_" + s.what, Op::RopeTables, DType::F32,
           [rope, n](Builder& g) {
             return std::vector{g.rope_tables(*rope, g.input(graph::InputSlot::Positions, n))};
           },
           std::move(step)});
    }
  struct X {
    int64_t n, heads, head_dim, rot;
  };
  const X shapes[] = {
      {1, 4, 16, 16}, {7, 3, 12, 8}, {5, 2, 8, 6}, {37, 8, 64, 32}, {37, 8, 64, 64}};
  for (RopeLayout layout : {RopeLayout::HalfSplit, RopeLayout::Interleaved})
    for (const X& s : shapes) {
      const Tensor x = random_tensor({s.n, s.heads, s.head_dim}, next_seed());
      const Tensor tables = random_tensor({2, s.n, s.rot / 2}, next_seed());
      out.push_back({std::string("rope_") +
                         (layout == RopeLayout::HalfSplit ? "half_split_" : "interleaved_") +
                         label({s.n, s.heads, s.head_dim}) + "_rot" + std::to_string(s.rot),
                     Op::Rope, DType::F32,
                     [x, tables, layout](Builder& g) {
                       return std::vector{g.rope(g.weight(x), g.weight(tables), layout)};
                     },
                     Step{}});
    }
}

// One attention case: sequences (tokens, first position, cache size each) on layer 1 of a
// two-layer cache, full or a ring sized by the window.
struct AttentionCase {
  const char* what;
  int64_t heads, kv_heads, head_dim;
  struct Seq {
    int64_t count, pos0, max_seq;
  };
  std::vector<Seq> seqs;
  int64_t window = 0;
  float softcap = 0;
  PositionBias bias = PositionBias::None;
  bool ring = false;  // layer 1 is SlidingKV: slots = window - 1 + the longest segment
  float scale = 0;    // 0: 1 / sqrt(head_dim)
  float qk_scale = 1;
  int64_t v_dim = 0;           // values' head size (0: head_dim)
  int64_t values_in_keys = 0;  // > 0: no v, the keys' first values_in_keys dims (MLA)
  float sinks = 0;             // > 0: GptOss sinks per head, uniform in (-sinks, sinks)
  // No k, v: the cache already holds the step's positions (prefilled to pos0 + count) and
  // the op only reads it (Gemma4's KV-shared layers).
  bool read_only = false;
  int64_t chunk = 0;      // > 0: Llama 4's chunked attention (a ring: slots = chunk - 1 + ...)
  DType kv = DType::F32;  // the caches' storage (BF16: the tolerance table's Attention BF16 row)
};

Case attention_case(const AttentionCase& a) {
  std::vector<graph::Segment> segments;
  int64_t rows = 0, max_count = 0;
  for (size_t i = 0; i < a.seqs.size(); ++i) {
    segments.push_back({.seq = static_cast<int64_t>(i),
                        .first = rows,
                        .count = a.seqs[i].count,
                        .pos0 = a.seqs[i].pos0});
    rows += a.seqs[i].count;
    max_count = std::max(max_count, a.seqs[i].count);
  }
  Step step = segment_step(segments);
  const uint32_t seed = next_seed() * 1000;
  step.caches = [a, seed, max_count] {
    std::vector<KVCache> caches;
    const LayerStateSpec full{.kind = StateKind::FullKV,
                              .kv_heads = a.kv_heads,
                              .head_dim = a.head_dim,
                              .window = 0,
                              .recurrent = {},
                              .v_head_dim = a.values_in_keys > 0 ? 0
                                            : a.v_dim > 0        ? a.v_dim
                                                                 : -1};
    LayerStateSpec layer1 = full;
    if (a.ring) {
      layer1.kind = StateKind::SlidingKV;
      layer1.window = a.window > 0 ? a.window : a.chunk;
    }
    for (size_t i = 0; i < a.seqs.size(); ++i)
      caches.push_back(prefilled_cache({full, layer1}, a.seqs[i].max_seq, max_count,
                                       a.seqs[i].pos0 + (a.read_only ? a.seqs[i].count : 0),
                                       seed + static_cast<uint32_t>(i), a.kv));
    return caches;
  };
  const Tensor q = random_tensor({rows, a.heads, a.head_dim}, next_seed(), a.qk_scale);
  const Tensor k = random_tensor({rows, a.kv_heads, a.head_dim}, next_seed(), a.qk_scale);
  const Tensor v =
      a.values_in_keys > 0
          ? Tensor()
          : random_tensor({rows, a.kv_heads, a.v_dim > 0 ? a.v_dim : a.head_dim}, next_seed());
  Tensor slopes;
  if (a.bias != PositionBias::None) {
    slopes = Tensor::zeros(DType::F32, {a.heads});
    for (int64_t h = 0; h < a.heads; ++h)  // not powers of 2: bf16 rounding shows
      slopes.mut<float>()[h] = 0.3f / static_cast<float>(h + 1);
  }
  const Tensor sinks = a.sinks > 0 ? random_tensor({a.heads}, next_seed(), a.sinks) : Tensor();
  const Builder::AttentionParams p{
      .layer = 1,
      .window = a.window,
      .scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(a.head_dim)),
      .softcap = a.softcap,
      .bias = a.bias,
      .value_dim = a.values_in_keys,
      .kv_read_only = a.read_only,
      .chunk = a.chunk};
  return {std::string(a.kv == DType::BF16 ? "attention_bf16kv_" : "attention_") + a.what,
          Op::Attention, a.kv,
          [q, k, v, slopes, sinks, p](Builder& g) {
            if (p.kv_read_only) return std::vector{g.attention(g.weight(q), {}, {}, p)};
            return std::vector{g.attention(g.weight(q), g.weight(k), g.weight(v), p,
                                           g.weight(slopes), g.weight(sinks))};
          },
          std::move(step)};
}

// kv: the caches' storage. Over BF16 caches every level is checked against the reference
// kernel reading the same bf16 keys and values.
void attention_cases(std::vector<Case>& out, DType kv) {
  using S = AttentionCase::Seq;
  const AttentionCase cases[] = {
      {.what = "decode_first", .heads = 4, .kv_heads = 4, .head_dim = 16, .seqs = {S{1, 0, 8}}},
      {.what = "decode", .heads = 4, .kv_heads = 4, .head_dim = 16, .seqs = {S{1, 9, 16}}},
      {.what = "prefill_odd", .heads = 4, .kv_heads = 4, .head_dim = 16, .seqs = {S{7, 0, 8}}},
      {.what = "gqa_prefilled", .heads = 6, .kv_heads = 2, .head_dim = 8, .seqs = {S{4, 5, 12}}},
      {.what = "gqa_window3",
       .heads = 6,
       .kv_heads = 2,
       .head_dim = 8,
       .seqs = {S{4, 5, 12}},
       .window = 3},
      {.what = "window1",
       .heads = 6,
       .kv_heads = 2,
       .head_dim = 8,
       .seqs = {S{4, 5, 12}},
       .window = 1},
      {.what = "softcap",
       .heads = 2,
       .kv_heads = 1,
       .head_dim = 4,
       .seqs = {S{3, 4, 9}},
       .softcap = 2.0f,
       .scale = 0.5f,
       .qk_scale = 3.0f},
      {.what = "softcap_window2",
       .heads = 2,
       .kv_heads = 1,
       .head_dim = 4,
       .seqs = {S{3, 4, 9}},
       .window = 2,
       .softcap = 2.0f,
       .scale = 0.5f,
       .qk_scale = 3.0f},
      {.what = "alibi",
       .heads = 3,
       .kv_heads = 1,
       .head_dim = 4,
       .seqs = {S{4, 3, 10}},
       .bias = PositionBias::Alibi},
      {.what = "alibi_window2",
       .heads = 3,
       .kv_heads = 1,
       .head_dim = 4,
       .seqs = {S{4, 3, 10}},
       .window = 2,
       .bias = PositionBias::Alibi},
      {.what = "alibi_falcon",
       .heads = 4,
       .kv_heads = 4,
       .head_dim = 16,
       .seqs = {S{5, 30, 40}},
       .bias = PositionBias::AlibiFalcon},
      {.what = "alibi_falcon_gqa_decode_long",
       .heads = 8,
       .kv_heads = 2,
       .head_dim = 16,
       .seqs = {S{1, 300, 320}},
       .bias = PositionBias::AlibiFalcon},
      {.what = "ring",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 8,
       .seqs = {S{3, 11, 32}},
       .window = 4,
       .ring = true},
      {.what = "ring_decode",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 8,
       .seqs = {S{1, 20, 32}},
       .window = 5,
       .ring = true},
      {.what = "two_sequences",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 8,
       .seqs = {S{3, 5, 16}, S{2, 0, 12}}},
      {.what = "two_sequences_ring",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 8,
       .seqs = {S{3, 9, 16}, S{2, 0, 12}},
       .window = 3,
       .ring = true},
      {.what = "two_sequences_alibi_softcap",
       .heads = 4,
       .kv_heads = 4,
       .head_dim = 8,
       .seqs = {S{1, 7, 16}, S{3, 2, 12}},
       .softcap = 5.0f,
       .bias = PositionBias::Alibi},
      {.what = "large", .heads = 8, .kv_heads = 2, .head_dim = 64, .seqs = {S{37, 20, 64}}},
      // Values of another head size than the keys, and MLA's values inside the keys (one
      // latent "head" of 36 dims whose first 20 are the values), prefill and decode.
      {.what = "v_dim_odd",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 12,
       .seqs = {S{5, 3, 12}},
       .v_dim = 37},
      {.what = "values_in_keys_prefill",
       .heads = 4,
       .kv_heads = 1,
       .head_dim = 36,
       .seqs = {S{7, 2, 16}},
       .values_in_keys = 20},
      {.what = "values_in_keys_decode_window",
       .heads = 8,
       .kv_heads = 1,
       .head_dim = 72,
       .seqs = {S{1, 40, 48}},
       .window = 9,
       .values_in_keys = 64},
      {.what = "values_in_keys_two_sequences",
       .heads = 3,
       .kv_heads = 1,
       .head_dim = 24,
       .seqs = {S{3, 5, 16}, S{2, 0, 12}},
       .values_in_keys = 17},
      {.what = "large_two_sequences",
       .heads = 8,
       .kv_heads = 2,
       .head_dim = 64,
       .seqs = {S{37, 0, 64}, S{1, 50, 64}}},
      // GptOss's sinks: prefill and decode, grouped heads, a ring, two sequences, sinks above
      // every score (the softmax's max is the sink's).
      {.what = "sinks_prefill_gqa",
       .heads = 6,
       .kv_heads = 2,
       .head_dim = 16,
       .seqs = {S{7, 0, 8}},
       .sinks = 2.0f},
      {.what = "sinks_decode_ring",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 8,
       .seqs = {S{1, 20, 32}},
       .window = 5,
       .ring = true,
       .sinks = 2.0f},
      {.what = "sinks_two_sequences_window",
       .heads = 4,
       .kv_heads = 1,
       .head_dim = 12,
       .seqs = {S{3, 9, 16}, S{2, 0, 12}},
       .window = 3,
       .sinks = 1.0f},
      {.what = "sinks_dominant_large",
       .heads = 8,
       .kv_heads = 2,
       .head_dim = 64,
       .seqs = {S{37, 20, 64}},
       .sinks = 30.0f},
      {.what = "read_only_gqa_two_sequences",
       .heads = 6,
       .kv_heads = 2,
       .head_dim = 12,
       .seqs = {S{4, 5, 12}, S{1, 9, 16}},
       .read_only = true},
      {.what = "read_only_ring_window3",
       .heads = 4,
       .kv_heads = 1,
       .head_dim = 16,
       .seqs = {S{5, 9, 32}},
       .window = 3,
       .ring = true,
       .scale = 1.0f,
       .read_only = true},
      // Chunked: a prefill across chunk boundaries, rings of two sequences, chunks that start
      // inside key blocks.
      {.what = "chunk5_prefill",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 12,
       .seqs = {S{11, 3, 16}},
       .chunk = 5},
      {.what = "chunk4_ring_two_sequences",
       .heads = 4,
       .kv_heads = 2,
       .head_dim = 12,
       .seqs = {S{1, 22, 32}, S{6, 7, 16}},
       .ring = true,
       .chunk = 4},
      {.what = "chunk13_large",
       .heads = 8,
       .kv_heads = 2,
       .head_dim = 64,
       .seqs = {S{37, 20, 64}},
       .chunk = 13},
  };
  for (AttentionCase a : cases) {
    a.kv = kv;
    out.push_back(attention_case(a));
  }
}

void rows_cases(std::vector<Case>& out) {
  struct S {
    int64_t n, dim;
    std::vector<int32_t> rows;
  };
  const S shapes[] = {{1, 64, {0}}, {7, 13, {6}}, {7, 13, {0, 3, 6}}, {37, 300, {36, 0, 5, 5}}};
  for (const S& s : shapes) {
    const Tensor x = random_tensor({s.n, s.dim}, next_seed());
    Step step = rows_step(s.n);
    step.logit_rows = s.rows;
    const int64_t r = static_cast<int64_t>(s.rows.size());
    out.push_back({"rows_" + label({s.n, s.dim}) + "_r" + std::to_string(r), Op::Rows, DType::F32,
                   [x, r](Builder& g) {
                     return std::vector{
                         g.rows(g.weight(x), g.input(graph::InputSlot::LogitRows, r))};
                   },
                   std::move(step)});
  }
}

// Routing: every Routing kind, with and without norm_topk and scaling, k of 1 and more, a
// grouped sigmoid router with a correction bias, and logits full of ties (torch's order).
void route_cases(std::vector<Case>& out) {
  using graph::Routing;
  struct S {
    const char* what;
    Builder::RouteParams p;
    int64_t tokens, experts;
    bool bias, ties;
  };
  const S cases[] = {
      {"softmax_top2_norm", {Routing::SoftmaxTopK, 2, true, 0, 1}, 7, 8, false, false},
      {"softmax_top1", {Routing::SoftmaxTopK, 1, false, 0, 1}, 1, 5, false, false},
      {"softmax_top4_ties", {Routing::SoftmaxTopK, 4, false, 0, 1}, 9, 60, false, true},
      {"topk_softmax_top2", {Routing::TopKSoftmax, 2, false, 0, 1}, 7, 6, false, false},
      {"sigmoid_top3_groups_bias",
       {Routing::Sigmoid, 3, true, 1e-20f, 2.5f, 4, 2},
       7,
       16,
       true,
       false},
      {"sigmoid_top2_ties", {Routing::Sigmoid, 2, true, 1e-20f, 1, 2, 1}, 5, 8, false, true},
  };
  for (const S& s : cases) {
    Tensor logits = random_tensor({s.tokens, s.experts}, next_seed(), 3.0f);
    if (s.ties)  // a few distinct values only
      for (int64_t i = 0; i < logits.numel(); ++i)
        logits.mut<float>()[i] = std::round(logits.data<float>()[i]);
    const Tensor bias = s.bias ? random_tensor({s.experts}, next_seed(), 0.5f) : Tensor();
    out.push_back({std::string("route_") + s.what, Op::Route, DType::F32,
                   [logits, bias, p = s.p](Builder& g) {
                     return std::vector{g.route(g.weight(logits), p, g.weight(bias))};
                   },
                   Step{}});
  }
}

// Experts after a route: decode (one token), odd token counts and sizes, k of 1 and more,
// gated and ungated, F32 and BF16 weights; experts no token chose are skipped. GptOss's
// experts: biases on gate, up and down, and the clamped SwiGLU with a limit that clamps.
void experts_cases(std::vector<Case>& out) {
  struct S {
    int64_t tokens, dim, inter, experts, k;
    bool gated;
    bool biases = false;
    graph::ExpertGluParams glu = {};
  };
  const graph::ExpertGluParams clamped{graph::ExpertGlu::ClampedSwiglu, 0.7f, 1.702f};
  const S shapes[] = {{1, 64, 32, 8, 2, true},
                      {7, 13, 9, 5, 2, true},
                      {37, 64, 40, 6, 3, true},
                      {5, 24, 17, 4, 1, false},
                      {3, 16, 8, 64, 4, true},
                      {1, 64, 32, 8, 2, true, true, clamped},
                      {7, 13, 9, 5, 2, true, true, clamped},
                      {37, 64, 40, 6, 3, true, false, clamped},
                      {9, 24, 17, 4, 2, true, true},
                      {5, 24, 17, 4, 1, false, true}};
  for (DType dt : {DType::F32, DType::BF16})
    for (const S& s : shapes) {
      const Tensor x = random_tensor({s.tokens, s.dim}, next_seed());
      const Tensor router = random_tensor({s.experts, s.dim}, next_seed());
      std::vector<std::array<Tensor, 6>> w;
      auto bias = [&](int64_t n, bool on) {
        return on ? random_tensor({n}, next_seed()) : Tensor();
      };
      for (int64_t e = 0; e < s.experts; ++e)
        w.push_back({s.gated ? random_tensor({s.inter, s.dim}, next_seed()).to(dt) : Tensor(),
                     random_tensor({s.inter, s.dim}, next_seed()).to(dt),
                     random_tensor({s.dim, s.inter}, next_seed()).to(dt),
                     bias(s.inter, s.biases && s.gated), bias(s.inter, s.biases),
                     bias(s.dim, s.biases)});
      const bool clamps = s.glu.kind == graph::ExpertGlu::ClampedSwiglu;
      out.push_back({"experts_" + label({s.tokens, s.dim, s.inter}) + "_e" +
                         std::to_string(s.experts) + "_k" + std::to_string(s.k) +
                         (s.gated ? "_gated" : "_ungated") + (s.biases ? "_biases" : "") +
                         (clamps ? "_clamped_swiglu_" : "_") + std::string(dtype_name(dt)),
                     Op::Experts, dt,
                     [x, router, w, k = s.k, glu = s.glu](Builder& g) {
                       Value xv = g.weight(x);
                       Value r = g.route(g.linear(xv, g.weight(router)),
                                         {.routing = graph::Routing::SoftmaxTopK, .top_k = k});
                       std::vector<Builder::Expert> ex;
                       for (const auto& e : w)
                         ex.push_back({g.weight(e[0]), g.weight(e[1]), g.weight(e[2]),
                                       g.weight(e[3]), g.weight(e[4]), g.weight(e[5])});
                       return std::vector{g.experts(xv, r, ex, Activation::Silu, glu)};
                     },
                     Step{}});
    }
  // Concat (MLA's [latent query | rotary query]) and per-head linears (its absorbed W_uk,
  // W_uv), f32 and bf16 weights.
  for (const Shape& s : {Shape{1, 4, 20}, Shape{7, 3, 13}, Shape{5, 16}}) {
    const Tensor a = random_tensor(s, next_seed());
    Shape bs = s;
    bs.back() = 5;
    const Tensor b = random_tensor(bs, next_seed());
    out.push_back({"concat_" + label(s) + "_5", Op::Concat, DType::F32,
                   [a, b](Builder& g) { return std::vector{g.concat(g.weight(a), g.weight(b))}; },
                   Step{}});
  }
  for (DType dt : {DType::F32, DType::BF16})
    for (const Shape& s : {Shape{1, 4, 12, 20}, Shape{7, 3, 13, 9}, Shape{37, 8, 64, 40}}) {
      const Tensor x = random_tensor({s[0], s[1], s[2]}, next_seed());
      const Tensor w = random_tensor({s[1], s[3], s[2]}, next_seed()).to(dt);
      out.push_back(
          {"head_linear_" + label(s) + "_" + std::string(dtype_name(dt)), Op::HeadLinear, dt,
           [x, w](Builder& g) { return std::vector{g.head_linear(g.weight(x), g.weight(w))}; },
           Step{}});
    }
  // One gate value per row (Qwen2Moe's sigmoid shared-expert gate).
  for (const Shape& s : kRowShapes) {
    Shape gs = s;
    gs.back() = 1;
    const Tensor gate = random_tensor(gs, next_seed(), 4.0f), up = random_tensor(s, next_seed());
    out.push_back({"act_mul_per_row_sigmoid_" + label(s), Op::ActMul, DType::F32,
                   [gate, up](Builder& g) {
                     return std::vector{
                         g.act_mul(Activation::Sigmoid, g.weight(gate), g.weight(up))};
                   },
                   Step{}});
  }
}

// A step of one segment per sequence, (count, pos0) each, over a cache whose layer 0 is
// recurrent with these state tensors; a sequence with pos0 > 0 starts from random state.
Step recurrent_step(const std::vector<std::pair<int64_t, int64_t>>& seqs,
                    std::vector<Shape> states) {
  std::vector<graph::Segment> segments;
  int64_t rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    segments.push_back({.seq = static_cast<int64_t>(i),
                        .first = rows,
                        .count = seqs[i].first,
                        .pos0 = seqs[i].second});
    rows += seqs[i].first;
  }
  Step step = segment_step(segments);
  const uint32_t seed = next_seed() * 1000;
  step.caches = [seqs, states, seed] {
    std::vector<KVCache> caches;
    for (size_t i = 0; i < seqs.size(); ++i)
      caches.push_back(prefilled_cache({{.kind = StateKind::Recurrent, .recurrent = states}}, 64,
                                       64, seqs[i].second, seed + static_cast<uint32_t>(i)));
    return caches;
  };
  return step;
}

// Slices, causal convolutions and gated delta rules: decode from a carried state, a prompt
// from zeros, fewer rows than the convolution's memory, two sequences in one step.
void recurrent_cases(std::vector<Case>& out) {
  for (const auto& [shape, first, length] :
       {std::tuple{Shape{1, 64}, 3, 20}, {Shape{7, 3, 13}, 5, 8}, {Shape{5, 12}, 0, 12}}) {
    // Plain copies: a lambda may not capture structured bindings before C++20 (clang 14).
    const int64_t start = first, len = length;
    const Tensor x = random_tensor(shape, next_seed());
    out.push_back(
        {"slice_" + label(shape) + "_" + std::to_string(start) + "_" + std::to_string(len),
         Op::Slice, DType::F32,
         [x, start, len](Builder& g) { return std::vector{g.slice(g.weight(x), start, len)}; },
         Step{}});
  }
  using Seqs = std::vector<std::pair<int64_t, int64_t>>;
  struct Conv {
    const char* what;
    int64_t channels, kernel;
    Seqs seqs;
    bool bias, weight_3d;
  };
  const Conv convs[] = {{"decode", 13, 4, {{1, 5}}, false, true},
                        {"prompt", 13, 4, {{7, 0}}, true, true},
                        {"short_step", 9, 4, {{2, 3}}, false, false},
                        {"kernel2", 6, 2, {{3, 1}}, true, false},
                        {"two_sequences", 16, 3, {{3, 0}, {1, 4}}, false, true}};
  for (const Conv& c : convs) {
    int64_t rows = 0;
    for (auto [count, pos0] : c.seqs) rows += count;
    const Tensor x = random_tensor({rows, c.channels}, next_seed());
    const Tensor w = random_tensor(
        c.weight_3d ? Shape{c.channels, 1, c.kernel} : Shape{c.channels, c.kernel}, next_seed());
    const Tensor b = c.bias ? random_tensor({c.channels}, next_seed()) : Tensor();
    out.push_back(
        {std::string("causal_conv_") + c.what + "_" + label({rows, c.channels}) + "_k" +
             std::to_string(c.kernel),
         Op::CausalConv, DType::F32,
         [x, w, b](Builder& g) {
           return std::vector{g.causal_conv(g.weight(x), g.weight(w), g.weight(b), {0, 0})};
         },
         recurrent_step(c.seqs, {{c.kernel - 1, c.channels}})});
  }
  struct Delta {
    const char* what;
    int64_t k_heads, v_heads, k_dim, v_dim;
    Seqs seqs;
  };
  const Delta deltas[] = {{"decode", 2, 4, 8, 6, {{1, 3}}},
                          {"prompt", 2, 4, 8, 6, {{9, 0}}},
                          {"equal_heads", 3, 3, 5, 7, {{4, 2}}},
                          {"two_sequences", 1, 2, 16, 16, {{5, 0}, {1, 7}}},
                          {"large", 4, 8, 32, 32, {{33, 0}}}};
  for (const Delta& d : deltas) {
    int64_t n = 0;
    for (auto [count, pos0] : d.seqs) n += count;
    const Tensor q = random_tensor({n, d.k_heads, d.k_dim}, next_seed());
    const Tensor k = random_tensor({n, d.k_heads, d.k_dim}, next_seed());
    const Tensor v = random_tensor({n, d.v_heads, d.v_dim}, next_seed());
    const Tensor a = random_tensor({n, d.v_heads}, next_seed(), 3.0f);
    const Tensor b = random_tensor({n, d.v_heads}, next_seed(), 3.0f);
    const Tensor a_log = random_tensor({d.v_heads}, next_seed());
    const Tensor dt_bias = random_tensor({d.v_heads}, next_seed());
    // State slot 1 (slot 0 stands for a convolution's).
    out.push_back({std::string("gated_delta_rule_") + d.what + "_" +
                       label({n, d.k_heads, d.v_heads, d.k_dim, d.v_dim}),
                   Op::GatedDeltaRule, DType::F32,
                   [=](Builder& g) {
                     return std::vector{g.gated_delta_rule(
                         g.weight(q), g.weight(k), g.weight(v), g.weight(a), g.weight(b),
                         g.weight(a_log), g.weight(dt_bias), {0, 1})};
                   },
                   recurrent_step(d.seqs, {{3, 5}, {d.v_heads, d.k_dim, d.v_dim}})});
  }
}

// Mamba2 selective scans: decode from a carried state, a prompt from zeros, one group and
// several, a dt clamp that bites, two sequences in one step.
void ssd_cases(std::vector<Case>& out) {
  using Seqs = std::vector<std::pair<int64_t, int64_t>>;
  struct Scan {
    const char* what;
    int64_t heads, head_dim, groups, d_state;
    float dt_min, dt_max;
    Seqs seqs;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Scan scans[] = {{"decode", 4, 6, 2, 8, 0, inf, {{1, 3}}},
                        {"prompt", 4, 6, 2, 8, 0, inf, {{9, 0}}},
                        {"one_group", 3, 5, 1, 7, 0, inf, {{4, 2}}},
                        {"clamped", 4, 4, 4, 4, 0.5f, 1.5f, {{6, 0}}},
                        {"two_sequences", 2, 16, 1, 16, 0, inf, {{5, 0}, {1, 7}}},
                        {"large", 8, 16, 2, 32, 0, inf, {{33, 0}}}};
  for (const Scan& c : scans) {
    int64_t n = 0;
    for (auto [count, pos0] : c.seqs) n += count;
    const Tensor x = random_tensor({n, c.heads, c.head_dim}, next_seed());
    const Tensor dt = random_tensor({n, c.heads}, next_seed(), 3.0f);
    const Tensor a_log = random_tensor({c.heads}, next_seed());
    const Tensor dt_bias = random_tensor({c.heads}, next_seed());
    const Tensor b = random_tensor({n, c.groups, c.d_state}, next_seed());
    const Tensor cc = random_tensor({n, c.groups, c.d_state}, next_seed());
    const Tensor d = random_tensor({c.heads}, next_seed());
    // State slot 1 (slot 0 stands for a convolution's).
    out.push_back(
        {std::string("ssd_") + c.what + "_" + label({n, c.heads, c.head_dim, c.groups, c.d_state}),
         Op::Ssd, DType::F32,
         [=](Builder& g) {
           return std::vector{g.ssd(g.weight(x), g.weight(dt), g.weight(a_log), g.weight(dt_bias),
                                    g.weight(b), g.weight(cc), g.weight(d), c.dt_min, c.dt_max,
                                    {0, 1})};
         },
         recurrent_step(c.seqs, {{3, 5}, {c.heads, c.d_state, c.head_dim}})});
  }
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c;
    embedding_cases(c);
    linear_cases(c);
    norm_cases(c);
    elementwise_cases(c);
    rope_cases(c);
    attention_cases(c, DType::F32);
    rows_cases(c);
    route_cases(c);
    experts_cases(c);
    recurrent_cases(c);
    ssd_cases(c);
    rowwise_cases(c);
    quant_cases(c);
    attention_cases(c, DType::BF16);
    mxfp4_cases(c);
    dsa_cases(c);
    fp8_cases(c);  // last: the cases above keep their seeds
    return c;
  }();
  return cases;
}

}  // namespace

// gtest prints a failing case's parameter: its name, not its bytes (found beside Case).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

namespace {

class OpBench : public ::testing::TestWithParam<Case> {};

// Restores the process's kernel level when a test that switches levels ends.
struct IsaGuard {
  cpu::Isa saved = cpu::active_isa();
  ~IsaGuard() { cpu::set_active_isa(saved); }
};

// The levels of fast kernels this machine can run (each is checked on its own).
std::vector<cpu::Isa> runnable_isas() {
  std::vector<cpu::Isa> out;
  for (int i = 0; i <= static_cast<int>(cpu::detected_isa()); ++i)
    out.push_back(static_cast<cpu::Isa>(i));
  return out;
}

TEST_P(OpBench, BackendsMatchReference) {
  const Case& c = GetParam();
  ThreadPool one(1), three(3);
  const Outcome want = run(cpu_backend(true), one, Mode::Planned, c.build, c.step);
  IsaGuard guard;
  struct Run {
    const Backend& backend;
    cpu::Isa isa;
  };
  std::vector<Run> runs = {{cpu_backend(true), cpu::Isa::Portable}};
  for (cpu::Isa isa : runnable_isas()) runs.push_back({cpu_backend(false), isa});
  for (const Run& r : runs) {
    cpu::set_active_isa(r.isa);
    const bool reference = &r.backend == &cpu_backend(true);
    const std::string who = reference ? "reference" : std::string("cpu/") + cpu::isa_name(r.isa);
    const std::optional<Tolerance> tol = tolerance(c.op, c.dtype, r.isa);
    ASSERT_TRUE(tol) << "tolerances.h has no row for " << graph::op_name(c.op) << " "
                     << dtype_name(c.dtype) << " on " << cpu::isa_name(r.isa);
    const Outcome got = run(r.backend, three, Mode::Planned, c.build, c.step);
    EXPECT_TRUE(same_outcome(got, run(r.backend, three, Mode::Eager, c.build, c.step)))
        << who << ": eager and planned differ";
    EXPECT_TRUE(same_outcome(got, run(r.backend, one, Mode::Planned, c.build, c.step)))
        << who << ": 3 threads and 1 differ";
    // The caches hold copies of the step's keys and values: the same on every backend.
    EXPECT_TRUE(same_caches(got, want)) << who;
    ASSERT_EQ(got.values.size(), want.values.size());
    for (size_t i = 0; i < got.values.size(); ++i) {
      const Tensor &a = got.values[i], &b = want.values[i];
      ASSERT_EQ(a.shape(), b.shape()) << who << " value " << i;
      const Tolerance t = reference ? Tolerance{} : *tol;
      if (t.exact()) {
        EXPECT_TRUE(same_bits(a, b)) << who << " value " << i << " differs from "
                                     << "the reference (tolerance 0)";
        continue;
      }
      const double e = nmse(floats(a), floats(b)), m = max_abs_error(floats(a), floats(b));
      if (std::getenv("LATHE_OP_BENCH_REPORT"))
        std::printf("observed\t%s\t%s\t%s\t%s\tnmse %.3e\tmax_abs %.3e\n", graph::op_name(c.op),
                    std::string(dtype_name(c.dtype)).c_str(), cpu::isa_name(r.isa), c.name.c_str(),
                    e, m);
      EXPECT_LE(e, t.nmse) << who << " value " << i;
      EXPECT_LE(m, t.max_abs) << who << " value " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpBench, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Every computing op of graph::Op has cases (a new op must join the bench; Indexer is the
// last).
TEST(OpBenchCoverage, EveryComputingOpHasCases) {
  std::vector<bool> seen(static_cast<size_t>(Op::Indexer) + 1, false);
  for (const Case& c : all_cases()) seen[static_cast<size_t>(c.op)] = true;
  for (size_t i = 0; i < seen.size(); ++i) {
    const Op op = static_cast<Op>(i);
    if (op == Op::Input || op == Op::Weight) continue;  // bound or constant: nothing computed
    EXPECT_TRUE(seen[i]) << graph::op_name(op) << " has no case";
  }
}

}  // namespace
}  // namespace lathe::optest
