// The CPU backends' attention ops (ops.h): rotary tables and rotation, attention over each
// sequence's cache, DeepSeek sparse attention's indexer and DeepseekV4's compressor.
#include <cmath>
#include <cstring>

#include "backends/cpu/dsv4.h"
#include "backends/cpu/indexer.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/ops.h"
#include "core/error.h"

namespace lathe::cpu {
namespace {

using graph::Op;

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
template <bool kFast>
void run_attention(const NodeArgs& a) {
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
      position_bias(p.bias, f32_or_null(a.inputs[3]), heads, head_dim, length, bias);
    }
    const AttentionScratch scratch_rows =
        attention_scratch(heads, score_row(a.step.max_context, p.compressor >= 0), v_dim);
    AttentionArgs args{q.data<float>() + s.first * heads * head_dim,
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
                       f32_or_null(a.inputs[4])};
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
    if constexpr (kFast)
      attention_fast(args, a.pool);
    else
      attention_reference(args);
  }
}

// Appends each segment's index keys to its cache layer, then chooses each query's keys
// (with a compressor, chooses among its entries).
template <bool kFast>
void run_indexer(const NodeArgs& a) {
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
      IndexerArgs args{q.data<float>() + s.first * heads * dim,
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
      indexer(args, a.workspace, a.step.max_context, kFast ? &a.pool : nullptr);
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
    indexer({q.data<float>() + s.first * heads * dim, w.data<float>() + s.first * heads,
             l.index_k.data<float>(), s.count, s.pos0, heads, dim, p.top_k, p.scale,
             a.out.mut<int32_t>() + s.first * p.top_k},
            a.workspace, a.step.max_context, kFast ? &a.pool : nullptr);
  }
}

// DeepseekV4's compressor: each segment's rows into its cache layer's compressor.
void run_compress(const NodeArgs& a) {
  const auto& p = a.node.attr<graph::CompressAttrs>();
  const Tensor &kv = *a.inputs[0], &norm = *a.inputs[3];
  const int64_t width = kv.dim(1);
  for (const graph::Segment& s : a.step.segments) {
    KVCache& cache = *a.step.caches[static_cast<size_t>(s.seq)];
    compress({kv.data<float>() + s.first * width, a.inputs[1]->data<float>() + s.first * width,
              a.inputs[2]->data<float>(), norm.data<float>(), s.count, s.pos0, width, norm.numel(),
              a.inputs[2]->dim(0), p.eps, p.schedule, p.layout,
              &compressed(cache, p.layer, p.compressor, "compress"), a.workspace});
  }
  a.out.mut<float>()[0] = 0.0f;
}

void run_rope_tables(const NodeArgs& a) {
  const int64_t tokens = a.node.shape[1], half = a.node.shape[2];
  float* cos = a.out.mut<float>();
  float* sin = cos + tokens * half;
  for (const graph::Segment& s : a.step.segments)
    a.node.attr<graph::RopeTablesAttrs>().schedule->fill(s.pos0, s.count, cos + s.first * half,
                                                         sin + s.first * half, half);
}

void run_rope(const NodeArgs& a) {
  const Tensor* x = a.inputs[0];
  const auto& p = a.node.attr<graph::RopeAttrs>();
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
      rope_half_split(o, cos, sin, x->dim(0), x->dim(1), x->dim(2), 2 * half);
      break;
    case graph::RopeLayout::Interleaved:
      rope_interleaved(o, cos, sin, x->dim(0), x->dim(1), x->dim(2), 2 * half);
      break;
  }
}

template <bool kFast>
size_t attention_floats(const graph::Graph&, const graph::Node& node, int threads,
                        int64_t max_context) {
  const auto& p = node.attr<graph::AttentionAttrs>();
  const int64_t heads = node.shape[1];
  const int64_t rows = kFast ? threads : 1;
  const int64_t bias = p.bias != graph::PositionBias::None ? heads * max_context : 0;
  const AttentionScratch scratch_rows =
      attention_scratch(heads, score_row(max_context, p.compressor >= 0), node.shape[2]);
  return static_cast<size_t>(bias + rows * scratch_rows.floats());
}

template <bool kFast>
size_t indexer_floats(const graph::Graph&, const graph::Node&, int threads, int64_t max_context) {
  return indexer_workspace_floats(max_context, kFast ? threads : 1);
}

size_t compress_floats(const graph::Graph&, const graph::Node& n, int, int64_t) {
  return compress_scratch_floats(n.attr<graph::CompressAttrs>().schedule->rot_dim());
}

// By -theta, the tables' sin negated into the workspace.
size_t rope_floats(const graph::Graph& g, const graph::Node& n, int, int64_t) {
  return n.attr<graph::RopeAttrs>().inverse
             ? static_cast<size_t>(shape_numel(g.at(n.inputs[1]).shape) / 2)
             : 0;
}

template <bool kFast>
void add(OpTable& t) {
  entry(t, Op::RopeTables) = {run_rope_tables};
  entry(t, Op::Rope) = {run_rope, rope_floats};
  entry(t, Op::Attention) = {run_attention<kFast>, attention_floats<kFast>};
  entry(t, Op::Indexer) = {run_indexer<kFast>, indexer_floats<kFast>};
  entry(t, Op::Compress) = {run_compress, compress_floats};
}

}  // namespace

void add_attention_ops(OpTable& t, bool fast) {
  fast ? add<true>(t) : add<false>(t);
}

}  // namespace lathe::cpu
