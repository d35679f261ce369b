// The CPU backends: each graph node mapped onto the kernels of kernels.h. Shapes were checked
// when the node was built (graph/builder.cpp); what is checked here is step data (ids,
// positions) that only execution sees.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/backend.h"
#include "backends/cpu/dsv4.h"
#include "backends/cpu/indexer.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/moe.h"
#include "backends/cpu/recurrent.h"
#include "backends/cpu/rowwise.h"
#include "core/error.h"
#include "core/quant.h"
#include "graph/collectives.h"

namespace lathe {
namespace {

using graph::Op;

const float* f32(const Tensor* t) {
  return t ? t->data<float>() : nullptr;
}

// The position bias of one head for keys 0 .. length - 1 (ALiBi as Bloom or Falcon forms it).
void position_bias(graph::PositionBias kind, const float* slopes, int64_t heads, int64_t head_dim,
                   int64_t length, float* out) {
  const float divisor = static_cast<float>(std::sqrt(static_cast<double>(head_dim)));
  for (int64_t h = 0; h < heads; ++h) {
    float* row = out + h * length;
    switch (kind) {
      case graph::PositionBias::None:
        std::fill(row, row + length, 0.0f);
        break;
      case graph::PositionBias::Alibi:
        for (int64_t j = 0; j < length; ++j) row[j] = slopes[h] * static_cast<float>(j);
        break;
      case graph::PositionBias::AlibiFalcon: {
        const float slope = bf16_to_f32(f32_to_bf16(slopes[h]));
        // torch converts the int64 positions to bf16 before multiplying (so 257 -> 256).
        for (int64_t j = 0; j < length; ++j) {
          const float pos = bf16_to_f32(f32_to_bf16(static_cast<float>(j)));
          row[j] = bf16_to_f32(f32_to_bf16(slope * pos)) / divisor;
        }
        break;
      }
    }
  }
}

// Floats of one attention scratch row: a score per position (and per compressed entry, at
// most one per position), and room for the vector kernels to write whole blocks of 16 past
// the last one.
int64_t score_row(int64_t max_context, bool entries = false) {
  return (entries ? 2 : 1) * max_context + 16;
}

// The compressor `index` of cache layer `layer`, checked.
KVCache::Layer::Compressed& compressed(KVCache& cache, int64_t layer, int64_t index,
                                       const char* op) {
  if (layer < 0 || layer >= static_cast<int64_t>(cache.layers.size()) || index < 0 ||
      index >= static_cast<int64_t>(cache.layers[static_cast<size_t>(layer)].compressed.size()))
    fail("internal: ", op, ": cache layer ", layer, " has no compressor ", index);
  return cache.layers[static_cast<size_t>(layer)].compressed[static_cast<size_t>(index)];
}

// Appends one segment's keys and values to its cache, then attends over it.
// With value_dim set there is no v: the values are the keys' first value_dim dims, and the
// cache layer holds keys only. With kv_read_only there is no k or v: the cache layer already
// holds this step's keys and values (an earlier node appended them), and nothing is appended.
void attention(const NodeArgs& a, bool reference) {
  const auto& p = a.node.attr<graph::AttentionAttrs>();
  const Tensor& q = *a.inputs[0];
  const Tensor* k = p.kv_read_only ? nullptr : a.inputs[1];
  const Tensor* v = p.value_dim > 0 || p.kv_read_only ? nullptr : a.inputs[2];
  const int64_t heads = q.dim(1), head_dim = q.dim(2);
  for (const graph::Segment& s : a.step.segments) {
    KVCache& cache = *a.step.caches[static_cast<size_t>(s.seq)];
    if (p.layer < 0 || p.layer >= static_cast<int64_t>(cache.layers.size()) ||
        !cache.layers[static_cast<size_t>(p.layer)].k.defined())
      fail("internal: attention: layer ", p.layer, " not a KV layer of the cache");
    KVCache::Layer& l = cache.layers[static_cast<size_t>(p.layer)];
    const int64_t kv_heads = k ? k->dim(1) : l.k.dim(1);
    const int64_t v_dim = v ? v->dim(2) : p.kv_read_only ? head_dim : p.value_dim;
    const int64_t kv_row = kv_heads * head_dim, v_row = kv_heads * v_dim;
    if (p.kv_read_only && (!l.v.defined() || l.v.dim(2) != head_dim || heads % kv_heads != 0))
      fail("internal: attention: read-only cache layer ", p.layer, " ", shape_str(l.k.shape()),
           " (values ", shape_str(l.v.shape()), ") for q ", shape_str(q.shape()));
    if (l.k.dim(1) != kv_heads || l.k.dim(2) != head_dim || s.pos0 + s.count > cache.max_seq ||
        (v != nullptr || p.kv_read_only) != l.v.defined() || (v && l.v.dim(2) != v_dim))
      fail("internal: attention: cache ", shape_str(l.k.shape()), " (values ",
           shape_str(l.v.shape()), ") of ", cache.max_seq, " positions for k ",
           k ? shape_str(k->shape()) : "read from the cache", (v ? "" : " holding the values"),
           " at position ", s.pos0 + s.count);
    if (s.count > cache.max_step_tokens())
      fail("internal: attention: a step of ", s.count, " tokens overruns a ring of ", l.slots,
           " slots");
    const DType kv = l.k.dtype();
    if ((kv != DType::F32 && kv != DType::BF16) || (l.v.defined() && l.v.dtype() != kv))
      fail("internal: attention: cache layer ", p.layer, " of ", dtype_name(kv), " keys and ",
           l.v.defined() ? dtype_name(l.v.dtype()) : "no", " values");
    // The append: copies, or each key and value rounded to bf16 (nearest even).
    const size_t kv_size = dtype_size(kv);
    for (int64_t t = 0; k && t < s.count; ++t) {
      const int64_t slot = (s.pos0 + t) % l.slots;
      convert_from_f32(
          kv, k->data<float>() + (s.first + t) * kv_row,
          static_cast<uint8_t*>(l.k.mut<void>()) + static_cast<size_t>(slot * kv_row) * kv_size,
          static_cast<size_t>(kv_row));
      if (v)
        convert_from_f32(
            kv, v->data<float>() + (s.first + t) * v_row,
            static_cast<uint8_t*>(l.v.mut<void>()) + static_cast<size_t>(slot * v_row) * kv_size,
            static_cast<size_t>(v_row));
    }
    const int64_t length = s.pos0 + s.count;
    float* bias = nullptr;
    float* scratch = a.workspace;
    if (p.bias != graph::PositionBias::None) {
      bias = a.workspace;
      scratch = a.workspace + heads * a.step.max_context;
      position_bias(p.bias, f32(a.inputs[3]), heads, head_dim, length, bias);
    }
    const cpu::AttentionScratch scratch_rows =
        cpu::attention_scratch(heads, score_row(a.step.max_context, p.compressor >= 0), v_dim);
    cpu::AttentionArgs args{q.data<float>() + s.first * heads * head_dim,
                            l.k.data<void>(),
                            l.v.defined() ? l.v.data<void>() : l.k.data<void>(),
                            a.out.mut<float>() + s.first * heads * v_dim,
                            s.count,
                            s.pos0,
                            heads,
                            kv_heads,
                            head_dim,
                            p.window,
                            p.scale,
                            p.softcap,
                            bias,
                            length,
                            l.slots,
                            scratch,
                            scratch_rows.floats(),
                            v_dim,
                            l.v.defined() ? v_row : kv_row,
                            l.v.defined() ? v_dim : head_dim,
                            f32(a.inputs[4])};
    args.chunk = p.chunk;
    args.kv_bf16 = kv == DType::BF16;
    args.scratch_heads = scratch_rows.heads;
    if (a.inputs.size() > 5) {  // an Indexer's chosen keys (DeepSeek sparse attention)
      const Tensor& chosen = *a.inputs[5];
      args.chosen_k = chosen.dim(1);
      args.chosen = chosen.data<int32_t>() + s.first * args.chosen_k;
    }
    if (p.compressor >= 0) {  // DeepseekV4: the compressor's entries after the keys
      const KVCache::Layer::Compressed& c = compressed(cache, p.layer, p.compressor, "attention");
      if (c.entries.dim(1) != head_dim)
        fail("internal: attention: entries ", shape_str(c.entries.shape()), " for q ",
             shape_str(q.shape()));
      args.entries = c.entries.data<float>();
      args.entry_rate = c.rate;
    }
    if (reference)
      cpu::attention_reference(args);
    else
      cpu::attention_fast(args, a.pool);
  }
}

// Appends each segment's index keys to its cache layer, then chooses each query's keys
// (with a compressor, chooses among its entries).
void indexer(const NodeArgs& a, bool reference) {
  const auto& p = a.node.attr<graph::IndexerAttrs>();
  const Tensor &q = *a.inputs[0], &w = *a.inputs[2];
  const int64_t heads = q.dim(1), dim = q.dim(2);
  for (const graph::Segment& s : a.step.segments) {
    KVCache& cache = *a.step.caches[static_cast<size_t>(s.seq)];
    if (p.compressor >= 0) {
      const KVCache::Layer::Compressed& c = compressed(cache, p.layer, p.compressor, "indexer");
      if (c.entries.dim(1) != dim)
        fail("internal: indexer: entries ", shape_str(c.entries.shape()), " for q ",
             shape_str(q.shape()));
      cpu::IndexerArgs args{q.data<float>() + s.first * heads * dim,
                            w.data<float>() + s.first * heads,
                            c.entries.data<float>(),
                            s.count,
                            s.pos0,
                            heads,
                            dim,
                            p.top_k,
                            p.scale,
                            a.out.mut<int32_t>() + s.first * p.top_k};
      args.entry_rate = c.rate;
      cpu::indexer(args, a.workspace, a.step.max_context, reference ? nullptr : &a.pool);
      continue;
    }
    const Tensor& k = *a.inputs[1];
    if (p.layer < 0 || p.layer >= static_cast<int64_t>(cache.layers.size()))
      fail("internal: indexer: layer ", p.layer, " not in the cache");
    KVCache::Layer& l = cache.layers[static_cast<size_t>(p.layer)];
    if (!l.index_k.defined() || l.index_k.dim(1) != dim || s.pos0 + s.count > l.slots)
      fail("internal: indexer: cache layer ", p.layer, " index keys ", shape_str(l.index_k.shape()),
           " for k ", shape_str(k.shape()), " at position ", s.pos0 + s.count);
    std::memcpy(l.index_k.mut<float>() + s.pos0 * dim, k.data<float>() + s.first * dim,
                static_cast<size_t>(s.count * dim) * sizeof(float));
    cpu::indexer({q.data<float>() + s.first * heads * dim, w.data<float>() + s.first * heads,
                  l.index_k.data<float>(), s.count, s.pos0, heads, dim, p.top_k, p.scale,
                  a.out.mut<int32_t>() + s.first * p.top_k},
                 a.workspace, a.step.max_context, reference ? nullptr : &a.pool);
  }
}

// DeepseekV4's compressor: each segment's rows into its cache layer's compressor.
void compress(const NodeArgs& a) {
  const auto& p = a.node.attr<graph::CompressAttrs>();
  const Tensor &kv = *a.inputs[0], &norm = *a.inputs[3];
  const int64_t width = kv.dim(1);
  for (const graph::Segment& s : a.step.segments) {
    KVCache& cache = *a.step.caches[static_cast<size_t>(s.seq)];
    cpu::compress({kv.data<float>() + s.first * width, a.inputs[1]->data<float>() + s.first * width,
                   a.inputs[2]->data<float>(), norm.data<float>(), s.count, s.pos0, width,
                   norm.numel(), a.inputs[2]->dim(0), p.eps, p.schedule, p.layout,
                   &compressed(cache, p.layer, p.compressor, "compress"), a.workspace});
  }
  a.out.mut<float>()[0] = 0.0f;
}

// The state tensor a recurrent node of segment s reads and updates, checked against the shape
// the node expects (a span: a decode step allocates nothing).
float* recurrent_state(const NodeArgs& a, const graph::Segment& s,
                       std::initializer_list<int64_t> expect) {
  const graph::StateAttrs p = a.node.op == Op::Ssd
                                  ? graph::StateAttrs{a.node.attr<graph::SsdAttrs>().layer,
                                                      a.node.attr<graph::SsdAttrs>().slot}
                                  : a.node.attr<graph::StateAttrs>();
  KVCache& cache = *a.step.caches[static_cast<size_t>(s.seq)];
  if (p.layer < 0 || p.layer >= static_cast<int64_t>(cache.layers.size()))
    fail("internal: ", graph::op_name(a.node.op), ": layer ", p.layer, " not in the cache");
  KVCache::Layer& l = cache.layers[static_cast<size_t>(p.layer)];
  if (l.kind != StateKind::Recurrent || p.slot < 0 ||
      p.slot >= static_cast<int64_t>(l.states.size()) ||
      !std::ranges::equal(l.states[static_cast<size_t>(p.slot)].shape(), expect))
    fail("internal: ", graph::op_name(a.node.op), ": layer ", p.layer, " has no state ", p.slot,
         " of shape ", shape_str(Shape(expect)));
  return l.states[static_cast<size_t>(p.slot)].mut<float>();
}

void causal_conv(const NodeArgs& a) {
  const Tensor &x = *a.inputs[0], &w = *a.inputs[1];
  const int64_t ch = x.dim(1), kernel = w.numel() / ch;
  for (const graph::Segment& s : a.step.segments)
    cpu::causal_conv(x.data<float>() + s.first * ch, s.count, ch, w.data<float>(), kernel,
                     f32(a.inputs[2]), recurrent_state(a, s, {kernel - 1, ch}),
                     a.out.mut<float>() + s.first * ch);
}

void gated_delta_rule(const NodeArgs& a, bool reference) {
  const Tensor &q = *a.inputs[0], &v = *a.inputs[2];
  const int64_t kh = q.dim(1), dk = q.dim(2), vh = v.dim(1), dv = v.dim(2);
  for (const graph::Segment& s : a.step.segments) {
    cpu::DeltaRuleArgs args{q.data<float>() + s.first * kh * dk,
                            a.inputs[1]->data<float>() + s.first * kh * dk,
                            v.data<float>() + s.first * vh * dv,
                            a.inputs[3]->data<float>() + s.first * vh,
                            a.inputs[4]->data<float>() + s.first * vh,
                            a.inputs[5]->data<float>(),
                            a.inputs[6]->data<float>(),
                            s.count,
                            kh,
                            vh,
                            dk,
                            dv,
                            recurrent_state(a, s, {vh, dk, dv}),
                            a.out.mut<float>() + s.first * vh * dv,
                            a.workspace};
    if (reference)
      cpu::gated_delta_rule(args, nullptr);
    else
      cpu::gated_delta_rule_fast(args, a.pool);
  }
}

void ssd(const NodeArgs& a, bool reference) {
  const Tensor &x = *a.inputs[0], &b = *a.inputs[4];
  const int64_t heads = x.dim(1), dp = x.dim(2), groups = b.dim(1), ds = b.dim(2);
  for (const graph::Segment& s : a.step.segments) {
    cpu::SsdArgs args{x.data<float>() + s.first * heads * dp,
                      a.inputs[1]->data<float>() + s.first * heads,
                      a.inputs[2]->data<float>(),
                      a.inputs[3]->data<float>(),
                      b.data<float>() + s.first * groups * ds,
                      a.inputs[5]->data<float>() + s.first * groups * ds,
                      a.inputs[6]->data<float>(),
                      a.node.attr<graph::SsdAttrs>().dt_min,
                      a.node.attr<graph::SsdAttrs>().dt_max,
                      s.count,
                      heads,
                      dp,
                      groups,
                      ds,
                      recurrent_state(a, s, {heads, ds, dp}),
                      a.out.mut<float>() + s.first * heads * dp};
    if (reference)
      cpu::ssd(args, nullptr);
    else
      cpu::ssd_fast(args, a.pool);
  }
}

// The first expert an Experts node holds: under expert parallelism (src/shard/rank_graph.h)
// a rank's node lacks the other ranks' experts.
size_t first_expert(const graph::Node& node) {
  const size_t experts = (node.inputs.size() - 2) / graph::kExpertInputs;
  for (size_t e = 0; e < experts; ++e)
    if (node.inputs[2 + e * graph::kExpertInputs + 1].valid()) return e;
  fail("internal: an experts node that holds no expert");
}

// Gathers every rank's x into the workspace, then sums it in rank order (AllReduce) or lays
// each row's pieces side by side (AllGather).
void collective(const NodeArgs& a) {
  graph::Collectives& comm = *a.node.attr<graph::CollectiveAttrs>().comm;
  const Tensor& x = *a.inputs[0];
  const int64_t n = x.numel(), ranks = comm.size();
  float* all = a.workspace;
  comm.all_gather(x.data<float>(), n, all,
                  a.node.name.empty() ? graph::op_name(a.node.op) : a.node.name);
  float* out = a.out.mut<float>();
  if (a.node.op == Op::AllReduce) {
    std::memcpy(out, all, static_cast<size_t>(n) * sizeof(float));
    for (int64_t r = 1; r < ranks; ++r)
      for (int64_t i = 0; i < n; ++i) out[i] += all[r * n + i];
    return;
  }
  const int64_t m = x.dim(-1), rows = n / std::max<int64_t>(m, 1);
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t row = 0; row < rows; ++row)
      std::memcpy(out + (row * ranks + r) * m, all + r * n + row * m,
                  static_cast<size_t>(m) * sizeof(float));
}

// Per head h: rows x[:, h, :] times w[h]^T, gathered into the workspace and scattered back.
size_t head_linear_floats(int64_t n, int64_t k, int64_t m, DType w_dtype, bool reference) {
  const size_t scratch = cpu::matmul_scratch_bytes(w_dtype, n, k, reference);
  return static_cast<size_t>(n * (k + m)) + (scratch + sizeof(float) - 1) / sizeof(float);
}

void head_linear(const NodeArgs& a, bool reference) {
  const Tensor &x = *a.inputs[0], &w = *a.inputs[1];
  const int64_t n = x.dim(0), heads = x.dim(1), k = x.dim(2), m = w.dim(1);
  float* xs = a.workspace;
  float* ys = xs + n * k;
  const size_t wbytes = static_cast<size_t>(m * k) * dtype_size(w.dtype());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(xs + t * k, x.data<float>() + (t * heads + h) * k,
                  static_cast<size_t>(k) * sizeof(float));
    const void* wh = w.data<uint8_t>() + static_cast<size_t>(h) * wbytes;
    if (reference)
      cpu::matmul_reference(xs, wh, w.dtype(), nullptr, ys, n, m, k);
    else
      cpu::matmul_fast(xs, wh, w.dtype(), nullptr, ys, n, m, k, ys + n * m, a.pool);
    for (int64_t t = 0; t < n; ++t)
      std::memcpy(a.out.mut<float>() + (t * heads + h) * m, ys + t * m,
                  static_cast<size_t>(m) * sizeof(float));
  }
}

// Runs fn(r0, r1) over `rows` rows of `row_floats` each: on the pool in tasks of at least
// kMinTaskFloats when `parallel`, else at once. The ops split so compute each row (or
// element) as one call would: the bits do not depend on the split.
constexpr int64_t kMinTaskFloats = 16384;

// The ways the fast backend can run a Linear node (Backend::variants): tasks per thread, and
// for f32 and bf16 weights in a step of several rows, the rows of x per pass over a block of
// weights. Variant 0 is the uncompiled default; every one gives the same bits. No variant
// splits coarser than the default: fewer tasks per thread timed faster for a node alone, but
// made whole decode steps slower on a busy machine (a descheduled thread's one big task holds
// up the step; docs/compile-cache.md).
constexpr cpu::MatmulSchedule kMatmulSchedules[] = {{4, 96},  {8, 96}, {4, 32},
                                                    {4, 256}, {8, 32}, {8, 256}};
constexpr int kSplitOnlySchedules = 2;  // the first two differ in the split only

int matmul_schedules(const graph::Graph& g, const graph::Node& node) {
  const graph::Node& w = g.at(node.inputs[1]);
  const int64_t m = shape_numel(node.shape) / w.shape[0];
  const bool tiled = w.dtype == DType::F32 || w.dtype == DType::BF16;
  return m > 1 && tiled ? static_cast<int>(std::size(kMatmulSchedules)) : kSplitOnlySchedules;
}
template <class F>
void over_rows(bool parallel, ThreadPool& pool, int64_t rows, int64_t row_floats, const F& fn) {
  if (!parallel || rows * row_floats < 2 * kMinTaskFloats) return fn(int64_t{0}, rows);
  pool.parallel_for(rows, std::max<int64_t>(1, kMinTaskFloats / std::max<int64_t>(row_floats, 1)),
                    fn);
}

cpu::MatmulSchedule schedule(int variant) {
  return variant > 0 && variant < static_cast<int>(std::size(kMatmulSchedules))
             ? kMatmulSchedules[variant]
             : cpu::MatmulSchedule{};
}

// The weight types the matmul kernels take (kernels.h): Linear, Experts.
bool matmul_weight(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::MXFP4 || t == DType::FP8 ||
         is_quantized(t);
}

// The fast backend's variants and fused Linear groups, which the compiled mode times.
class CpuChoices : public KernelChoices {
 public:
  int variants(const graph::Graph& g, const graph::Node& node) const override {
    return node.op == Op::Linear ? matmul_schedules(g, node) : 1;
  }
  std::string variant_name(const graph::Graph& g, const graph::Node& node, int v) const override {
    const int n = variants(g, node);
    if (n <= 1 || v < 0 || v >= n) return "default";
    const cpu::MatmulSchedule& s = kMatmulSchedules[v];
    if (n == kSplitOnlySchedules) return cat(s.tasks_per_thread, " tasks/thread");
    return cat(s.tasks_per_thread, " tasks/thread, ", s.row_block, " rows/pass");
  }
  bool fuses_linears(const graph::Graph& g, std::span<const int32_t> group) const override {
    if (group.size() > cpu::kMaxMatmulParts) return false;
    // Quantized weights only: run as one, their groups made SmolLM2's decode 4-11% faster
    // end to end (x quantized once, one parallel loop instead of three); bf16 groups made it
    // 8% slower on two threads (docs/performance-log.md).
    const DType t = g.at(g.nodes[static_cast<size_t>(group.front())].inputs[1]).dtype;
    return t == DType::Q8_0 || t == DType::Q4_0;
  }
  void run_linears(std::span<const NodeArgs> group) const override {
    const NodeArgs& first = group.front();
    const Tensor& w = *first.inputs[1];
    const int64_t k = w.dim(1), m = first.inputs[0]->numel() / k;
    cpu::MatmulPart parts[cpu::kMaxMatmulParts];
    for (size_t p = 0; p < group.size(); ++p)
      parts[p] = {group[p].inputs[1]->data<void>(), f32(group[p].inputs[2]),
                  group[p].out.mut<float>(), group[p].inputs[1]->dim(0)};
    cpu::matmul_fast_parts(first.inputs[0]->data<float>(),
                           std::span<const cpu::MatmulPart>(parts, group.size()), w.dtype(), m, k,
                           first.workspace, first.pool, schedule(first.variant));
  }
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(bool reference) : reference_(reference) {}
  const char* name() const override { return reference_ ? "reference" : "cpu"; }
  std::string kernel_level() const override {
    if (reference_) return "reference";
    return cat(cpu::isa_name(cpu::active_isa()), '+', cpu::quant_kernel_name(cpu::quant_kernel()));
  }

  // Both backends have a kernel for every op; what differs is the dtypes: the matmuls take
  // the weight types of matmul_weight(), embeddings read tables of any dtype, ids and chosen
  // positions are I32, and every other input is F32.
  bool supports(const graph::Graph& g, const graph::Node& n) const override {
    auto dtype = [&](size_t i) {
      return i < n.inputs.size() && n.inputs[i].valid() ? g.at(n.inputs[i]).dtype : DType::F32;
    };
    auto all_f32 = [&](size_t from, size_t to) {
      for (size_t i = from; i < std::min(to, n.inputs.size()); ++i)
        if (dtype(i) != DType::F32) return false;
      return true;
    };
    switch (n.op) {
      case Op::Input:
      case Op::Weight:
      case Op::Reshape:  // no compute
        return true;
      case Op::Embedding:
        return dtype(1) == DType::I32;
      case Op::Rows:
        return dtype(0) == DType::F32 && dtype(1) == DType::I32;
      case Op::RopeTables:
        return dtype(0) == DType::I32;
      case Op::Linear:
        return dtype(0) == DType::F32 && matmul_weight(dtype(1)) && dtype(2) == DType::F32;
      case Op::HeadLinear:
        return dtype(0) == DType::F32 && (dtype(1) == DType::F32 || dtype(1) == DType::BF16);
      case Op::Experts:
        for (size_t i = 2; i < n.inputs.size(); ++i)
          if ((i - 2) % graph::kExpertInputs < 3 ? !matmul_weight(dtype(i))
                                                 : dtype(i) != DType::F32)
            return false;
        return all_f32(0, 2);
      case Op::Attention:  // q, k, v, slopes, sinks, then an Indexer's chosen keys
        return all_f32(0, 5) && (n.inputs.size() < 6 || dtype(5) == DType::I32);
      case Op::RmsNorm:
      case Op::LayerNorm:
      case Op::ActMul:
      case Op::Activation:
      case Op::Add:
      case Op::Scale:
      case Op::Divide:
      case Op::Softcap:
      case Op::Clamp:
      case Op::Xielu:
      case Op::Rope:
      case Op::Route:
      case Op::Concat:
      case Op::Slice:
      case Op::CausalConv:
      case Op::GatedDeltaRule:
      case Op::Ssd:
      case Op::RowStat:
      case Op::Binary:
      case Op::BatchMatmul:
      case Op::Indexer:
      case Op::AllReduce:
      case Op::AllGather:
      case Op::HyperMix:
      case Op::Compress:
        return all_f32(0, n.inputs.size());
    }
    return false;
  }

  const KernelChoices* choices() const override { return reference_ ? nullptr : &choices_; }

  size_t workspace_floats(const graph::Graph& g, const graph::Node& node, int threads,
                          int64_t max_context) const override {
    if (node.op == Op::Linear) {
      const graph::Node& w = g.at(node.inputs[1]);
      const int64_t k = w.shape[1], m = shape_numel(node.shape) / w.shape[0];
      return (cpu::matmul_scratch_bytes(w.dtype, m, k, reference_) + sizeof(float) - 1) /
             sizeof(float);
    }
    if (node.op == Op::Route)
      return cpu::route_workspace_floats(g.at(node.inputs[0]).shape[1],
                                         node.attr<graph::RouteAttrs>().top_k,
                                         node.attr<graph::RouteAttrs>().groups);
    if (node.op == Op::Experts) {
      const graph::Node& up = g.at(node.inputs[first_expert(node) * graph::kExpertInputs + 3]);
      const int64_t experts = static_cast<int64_t>(node.inputs.size() - 2) / graph::kExpertInputs;
      size_t scratch = 0;  // the most any of its matrices needs
      for (int64_t e = 0; e < experts; ++e)
        for (int i = 0; i < 3; ++i)
          if (const graph::Value w = node.inputs[2 + e * graph::kExpertInputs + i]; w.valid())
            scratch = std::max(
                scratch, cpu::experts_scratch_bytes(g.at(w).dtype, node.shape[0], node.shape[1],
                                                    up.shape[0], reference_));
      return cpu::experts_workspace_floats(node.shape[0], node.shape[1], up.shape[0],
                                           node.attr<graph::ExpertsAttrs>().top_k, experts,
                                           scratch);
    }
    if (node.op == Op::HeadLinear) {
      const graph::Node& w = g.at(node.inputs[1]);
      return head_linear_floats(node.shape[0], w.shape[2], w.shape[1], w.dtype, reference_);
    }
    if (node.op == Op::GatedDeltaRule) {
      const int64_t k_dim = g.at(node.inputs[0]).shape[2];
      return static_cast<size_t>((reference_ ? 1 : threads) *
                                 cpu::delta_rule_scratch_floats(k_dim, node.shape[2]));
    }
    if (node.op == Op::Indexer)
      return cpu::indexer_workspace_floats(max_context, reference_ ? 1 : threads);
    if (node.op == Op::Compress)
      return cpu::compress_scratch_floats(node.attr<graph::CompressAttrs>().schedule->rot_dim());
    if (node.op == Op::Rope && node.attr<graph::RopeAttrs>().inverse)  // the tables' sin, negated
      return static_cast<size_t>(shape_numel(g.at(node.inputs[1]).shape) / 2);
    if (node.op == Op::AllReduce || node.op == Op::AllGather)
      return static_cast<size_t>(shape_numel(g.at(node.inputs[0]).shape) *
                                 node.attr<graph::CollectiveAttrs>().comm->size());
    if (node.op != Op::Attention) return 0;
    const auto& p = node.attr<graph::AttentionAttrs>();
    const int64_t heads = node.shape[1];
    const int64_t rows = reference_ ? 1 : threads;
    const int64_t bias = p.bias != graph::PositionBias::None ? heads * max_context : 0;
    const cpu::AttentionScratch scratch_rows =
        cpu::attention_scratch(heads, score_row(max_context, p.compressor >= 0), node.shape[2]);
    return static_cast<size_t>(bias + rows * scratch_rows.floats());
  }

  void run(const NodeArgs& a) const override {
    const graph::Node& n = a.node;
    const Tensor* x = a.inputs.empty() ? nullptr : a.inputs[0];
    const int64_t numel = a.out.numel();
    switch (n.op) {
      case Op::Input:
      case Op::Weight:
      case Op::Reshape:
        return;  // no compute: bound or aliased by the executor
      case Op::Embedding: {
        const auto& p = n.attr<graph::EmbeddingAttrs>();
        const Tensor& table = *a.inputs[0];
        const Tensor& ids = *a.inputs[1];
        const int64_t vocab = table.dim(0), dim = table.dim(1);
        const size_t row_bytes = lathe::row_bytes(table.dtype(), dim);
        for (int64_t i = 0; i < ids.numel(); ++i) {
          const int64_t id = int64_t{ids.data<int32_t>()[i]} + p.id_offset;
          float* row = a.out.mut<float>() + i * dim;
          const graph::IdRange range = p.id_range;
          if ((id < 0 && (range == graph::IdRange::Zeros || range == graph::IdRange::ZerosBelow)) ||
              (id >= vocab &&
               (range == graph::IdRange::Zeros || range == graph::IdRange::ZerosPast))) {
            std::fill(row, row + dim, 0.0f);
            continue;
          }
          if ((id < 0 || id >= vocab) && range == graph::IdRange::FirstRow) {
            convert_to_f32(table.dtype(), table.data<uint8_t>(), row, static_cast<size_t>(dim));
            continue;
          }
          if (id < 0 || id >= vocab) {
            if (p.id_offset != 0)
              fail("position ", id - p.id_offset, " is past the model's ", vocab - p.id_offset,
                   " learned positions (max_position_embeddings)");
            fail("token id ", id, " is outside the vocabulary of ", vocab, " tokens");
          }
          convert_to_f32(table.dtype(), table.data<uint8_t>() + static_cast<size_t>(id) * row_bytes,
                         row, static_cast<size_t>(dim));
        }
        return;
      }
      case Op::Linear: {
        const Tensor& w = *a.inputs[1];
        const int64_t k = w.dim(1), rows = w.dim(0), m = x->numel() / k;
        if (reference_)
          cpu::matmul_reference(x->data<float>(), w.data<void>(), w.dtype(), f32(a.inputs[2]),
                                a.out.mut<float>(), m, rows, k, a.workspace);
        else
          cpu::matmul_fast(x->data<float>(), w.data<void>(), w.dtype(), f32(a.inputs[2]),
                           a.out.mut<float>(), m, rows, k, a.workspace, a.pool,
                           schedule(a.variant));
        return;
      }
      case Op::RmsNorm: {
        const auto& p = n.attr<graph::RmsNormAttrs>();
        const int64_t dim = x->dim(-1), groups = a.inputs[1]->numel() / dim;
        const float* w = a.inputs[1]->data<float>();
        auto norm = reference_ ? cpu::rms_norm : cpu::rms_norm_fast;
        over_rows(!reference_, a.pool, numel / dim, dim, [&](int64_t r0, int64_t r1) {
          if (groups == 1)
            return norm(x->data<float>() + r0 * dim, w, p.offset, p.eps,
                        a.out.mut<float>() + r0 * dim, r1 - r0, dim);
          for (int64_t r = r0; r < r1; ++r)  // row r reads weight row r % groups
            norm(x->data<float>() + r * dim, w + (r % groups) * dim, p.offset, p.eps,
                 a.out.mut<float>() + r * dim, 1, dim);
        });
        return;
      }
      case Op::LayerNorm: {
        const int64_t dim = x->dim(-1);
        const Tensor* w = a.inputs[1];
        const Tensor* b = a.inputs[2];
        const int64_t groups = std::max(w ? w->numel() / dim : 1, b ? b->numel() / dim : 1);
        cpu::layer_norm(x->data<float>(), f32(w), f32(b), groups,
                        n.attr<graph::LayerNormAttrs>().eps, a.out.mut<float>(), numel / dim, dim);
        return;
      }
      case Op::ActMul: {
        const graph::Activation act = n.attr<graph::ActAttrs>().act;
        if (x->numel() != numel) {  // one gate value per row
          const int64_t dim = a.out.dim(-1);
          const float* up = a.inputs[1]->data<float>();
          float* o = a.out.mut<float>();
          for (int64_t r = 0; r < numel / dim; ++r) {
            float g;
            cpu::activation(act, x->data<float>() + r, &g, 1);
            for (int64_t i = 0; i < dim; ++i) o[r * dim + i] = g * up[r * dim + i];
          }
          return;
        }
        auto act_mul = reference_ ? cpu::act_mul : cpu::act_mul_fast;
        over_rows(!reference_, a.pool, numel, 1, [&](int64_t i0, int64_t i1) {
          act_mul(act, x->data<float>() + i0, a.inputs[1]->data<float>() + i0,
                  a.out.mut<float>() + i0, i1 - i0);
        });
        return;
      }
      case Op::Activation:
        over_rows(!reference_, a.pool, numel, 1, [&](int64_t i0, int64_t i1) {
          cpu::activation(n.attr<graph::ActAttrs>().act, x->data<float>() + i0,
                          a.out.mut<float>() + i0, i1 - i0);
        });
        return;
      case Op::Add: {
        const float *pa = x->data<float>(), *pb = a.inputs[1]->data<float>();
        float* o = a.out.mut<float>();
        over_rows(!reference_, a.pool, numel, 1, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) o[i] = pa[i] + pb[i];
        });
        return;
      }
      case Op::Scale: {
        const float* px = x->data<float>();
        float* o = a.out.mut<float>();
        const float s = n.attr<graph::ScaleAttrs>().value;
        for (int64_t i = 0; i < numel; ++i) o[i] = px[i] * s;
        return;
      }
      case Op::Divide: {
        const float* px = x->data<float>();
        float* o = a.out.mut<float>();
        const float s = n.attr<graph::ScaleAttrs>().value;
        for (int64_t i = 0; i < numel; ++i) o[i] = px[i] / s;
        return;
      }
      case Op::Softcap:
        std::memcpy(a.out.mut<float>(), x->data<float>(), a.out.nbytes());
        cpu::softcap(a.out.mut<float>(), numel, n.attr<graph::SoftcapAttrs>().cap);
        return;
      case Op::Clamp: {
        const float* px = x->data<float>();
        float* o = a.out.mut<float>();
        const auto& p = n.attr<graph::ClampAttrs>();
        const float lim = p.limit;
        if (p.upper_only)
          for (int64_t i = 0; i < numel; ++i) o[i] = std::min(px[i], lim);
        else
          for (int64_t i = 0; i < numel; ++i) o[i] = std::clamp(px[i], -lim, lim);
        return;
      }
      case Op::Xielu: {
        const auto& c = n.attr<graph::XieluAttrs>();
        cpu::xielu(x->data<float>(), a.out.mut<float>(), numel, c.alpha_p, c.alpha_n, c.beta,
                   c.eps);
        return;
      }
      case Op::RopeTables: {
        const int64_t tokens = n.shape[1], half = n.shape[2];
        float* cos = a.out.mut<float>();
        float* sin = cos + tokens * half;
        for (const graph::Segment& s : a.step.segments)
          n.attr<graph::RopeTablesAttrs>().schedule->fill(s.pos0, s.count, cos + s.first * half,
                                                          sin + s.first * half, half);
        return;
      }
      case Op::Rope: {
        const auto& p = n.attr<graph::RopeAttrs>();
        const Tensor& t = *a.inputs[1];
        const int64_t tokens = t.dim(1), half = t.dim(2);
        std::memcpy(a.out.mut<float>(), x->data<float>(), a.out.nbytes());
        const float* cos = t.data<float>();
        const float* sin = cos + tokens * half;
        if (p.inverse) {  // by -theta: a*c - b*(-s) is a*c + b*s exactly
          for (int64_t i = 0; i < tokens * half; ++i) a.workspace[i] = -sin[i];
          sin = a.workspace;
        }
        // With tail, each head's last 2 * half dims: the same kernel from a later first dim.
        float* o = a.out.mut<float>() + (p.tail ? x->dim(2) - 2 * half : 0);
        switch (p.layout) {
          case graph::RopeLayout::HalfSplit:
            cpu::rope_half_split(o, cos, sin, x->dim(0), x->dim(1), x->dim(2), 2 * half);
            return;
          case graph::RopeLayout::Interleaved:
            cpu::rope_interleaved(o, cos, sin, x->dim(0), x->dim(1), x->dim(2), 2 * half);
            return;
        }
        return;
      }
      case Op::Attention:
        attention(a, reference_);
        return;
      case Op::Indexer:
        indexer(a, reference_);
        return;
      case Op::Route:
        cpu::route(x->data<float>(), f32(a.inputs[1]), x->dim(0), x->dim(1),
                   n.attr<graph::RouteAttrs>(), a.out.mut<float>(), a.workspace, f32(a.inputs[2]),
                   a.inputs.size() > 3 ? f32(a.inputs[3]) : nullptr);
        return;
      case Op::Experts: {
        const auto& p = n.attr<graph::ExpertsAttrs>();
        const int64_t experts = static_cast<int64_t>(a.inputs.size() - 2) / graph::kExpertInputs;
        const Tensor& up = *a.inputs[first_expert(n) * graph::kExpertInputs + 3];
        cpu::experts({x->data<float>(), a.inputs[1]->data<float>(), x->dim(0), x->dim(1), up.dim(0),
                      p.top_k, experts, a.inputs.data() + 2, p.act, a.out.mut<float>(), a.workspace,
                      p.glu, p.limit, p.alpha, p.scale_inputs},
                     reference_, a.pool);
        return;
      }
      case Op::Concat: {
        const Tensor& b = *a.inputs[1];
        const int64_t da = x->dim(-1), db = b.dim(-1), rows = x->numel() / da;
        float* o = a.out.mut<float>();
        for (int64_t r = 0; r < rows; ++r) {
          std::memcpy(o + r * (da + db), x->data<float>() + r * da,
                      static_cast<size_t>(da) * sizeof(float));
          std::memcpy(o + r * (da + db) + da, b.data<float>() + r * db,
                      static_cast<size_t>(db) * sizeof(float));
        }
        return;
      }
      case Op::HeadLinear:
        head_linear(a, reference_);
        return;
      case Op::Slice: {
        const int64_t cols = x->dim(-1), m = a.out.dim(-1), rows = numel / m;
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(a.out.mut<float>() + r * m,
                      x->data<float>() + r * cols + n.attr<graph::SliceAttrs>().start,
                      static_cast<size_t>(m) * sizeof(float));
        return;
      }
      case Op::CausalConv:
        causal_conv(a);
        return;
      case Op::GatedDeltaRule:
        gated_delta_rule(a, reference_);
        return;
      case Op::Ssd:
        ssd(a, reference_);
        return;
      case Op::RowStat:
        cpu::row_stat(n.attr<graph::RowStatAttrs>().stat, n.attr<graph::RowStatAttrs>().eps,
                      x->data<float>(), a.out.mut<float>(), numel, x->dim(-1));
        return;
      case Op::Binary:
        cpu::binary(n.attr<graph::BinaryAttrs>().op, x->data<float>(), x->shape(),
                    a.inputs[1]->data<float>(), a.inputs[1]->shape(), a.out.mut<float>(),
                    a.out.shape());
        return;
      case Op::BatchMatmul: {
        const Tensor& b = *a.inputs[1];
        cpu::batch_matmul(x->data<float>(), b.data<float>(), a.out.mut<float>(), x->dim(0),
                          x->dim(1), x->dim(2), b.dim(2));
        return;
      }
      case Op::AllReduce:
      case Op::AllGather:
        collective(a);
        return;
      case Op::HyperMix: {
        const auto& p = n.attr<graph::HyperMixAttrs>();
        cpu::hyper_mix(x->data<float>(), a.inputs[1]->data<float>(), a.inputs[2]->data<float>(),
                       a.out.mut<float>(), x->dim(0), x->dim(1), p.streams, p.iters, p.eps);
        return;
      }
      case Op::Compress:
        compress(a);
        return;
      case Op::Rows: {
        const Tensor& idx = *a.inputs[1];
        const int64_t rows = x->dim(0), dim = x->dim(1);
        for (int64_t i = 0; i < idx.numel(); ++i) {
          const int32_t r = idx.data<int32_t>()[i];
          if (r < 0 || r >= rows) fail("internal: rows: row ", r, " of ", rows);
          std::memcpy(a.out.mut<float>() + i * dim, x->data<float>() + int64_t{r} * dim,
                      static_cast<size_t>(dim) * sizeof(float));
        }
        return;
      }
    }
  }

 private:
  bool reference_;
  CpuChoices choices_;
};

}  // namespace

const Backend& cpu_backend(bool reference) {
  static const CpuBackend fast(false), ref(true);
  return reference ? ref : fast;
}

}  // namespace lathe
