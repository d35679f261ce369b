#include "graph/builder.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/error.h"
#include "graph/collectives.h"

namespace lathe::graph {

int64_t Builder::dim(Value v, int i) const {
  const Shape& s = shape(v);
  return s.at(i < 0 ? s.size() + i : i);
}

Value Builder::name(Value v, std::string name) {
  g_.nodes.at(static_cast<size_t>(v.id)).name = std::move(name);
  if (on_name_) on_name_(g_, v);
  return v;
}

Value Builder::add_node(Node node) {
  for (int64_t d : node.shape)
    if (d < 0) fail("internal: ", op_name(node.op), ": negative dimension");
  if (!attrs_fit(node.op, node.attrs))
    fail("internal: ", op_name(node.op), ": attributes of another op");
  if (backend_) check_supported(*backend_, g_, node);
  g_.nodes.push_back(std::move(node));
  const Value v{static_cast<int32_t>(g_.nodes.size() - 1)};
  if (on_node_) on_node_(g_, v);
  return v;
}

void Builder::expect(Value v, const char* op, const char* arg) const {
  if (!v.valid() || v.id >= static_cast<int32_t>(g_.nodes.size()))
    fail("internal: ", op, ": ", arg, " is not a node of this graph");
}

void Builder::expect_f32(Value v, const char* op, const char* arg) const {
  expect(v, op, arg);
  if (node(v).dtype != DType::F32)
    fail("internal: ", op, ": ", arg, " must be F32, got ", dtype_name(node(v).dtype));
}

void Builder::expect_same_shape(Value a, Value b, const char* op) const {
  expect_f32(a, op, "a");
  expect_f32(b, op, "b");
  if (shape(a) != shape(b))
    fail("internal: ", op, ": shapes ", shape_str(shape(a)), " and ", shape_str(shape(b)),
         " differ");
}

Value Builder::input(InputSlot slot, int64_t n) {
  return add_node({.op = Op::Input, .shape = {n}, .dtype = DType::I32, .attrs = InputAttrs{slot}});
}

Value Builder::weight(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  return add_node({.op = Op::Weight, .shape = t.shape(), .dtype = t.dtype(), .constant = t});
}

Value Builder::embedding(Value table, Value ids, int64_t id_offset, IdRange range) {
  expect(table, "embedding", "table");
  expect(ids, "embedding", "ids");
  if (shape(table).size() != 2 || node(ids).dtype != DType::I32 || shape(ids).size() != 1)
    fail("internal: embedding: table ", shape_str(shape(table)), " with ids ",
         shape_str(shape(ids)));
  return add_node({.op = Op::Embedding,
                   .inputs = {table, ids},
                   .shape = {dim(ids, 0), dim(table, 1)},
                   .attrs = EmbeddingAttrs{.id_offset = id_offset, .id_range = range}});
}

Value Builder::quantized(Value w) {
  if (!quantizer_ || !w.valid() || node(w).op != Op::Weight) return w;
  const Tensor& t = node(w).constant;
  return quantizer_->applies(t) ? weight(quantizer_->get(t)) : w;
}

Value Builder::linear(Value x, Value w, Value bias, Quantize quantize) {
  expect_f32(x, "linear", "input");
  expect(w, "linear", "weight");
  if (quantize == Quantize::Allowed) w = quantized(w);
  const Node& wn = node(w);
  if (wn.shape.size() != 2 || dim(x, -1) != wn.shape[1])
    fail("internal: linear: input ", shape_str(shape(x)), " does not match weight ",
         shape_str(wn.shape));
  if (bias.valid()) {
    expect_f32(bias, "linear", "bias");
    if (shape_numel(shape(bias)) != wn.shape[0])
      fail("internal: linear: bias ", shape_str(shape(bias)), " does not match weight ",
           shape_str(wn.shape));
  }
  Shape out = shape(x);
  out.back() = wn.shape[0];
  return add_node({.op = Op::Linear,
                   .inputs = {x, w, bias},
                   .shape = std::move(out),
                   .attrs = LinearAttrs{.keep_dtype = quantize == Quantize::Never}});
}

Value Builder::rms_norm(Value x, Value weight, float eps, float offset) {
  expect_f32(x, "rms_norm", "input");
  expect_f32(weight, "rms_norm", "weight");
  const int64_t cols = dim(x, -1), rows = shape_numel(shape(x)) / cols;
  const int64_t count = shape_numel(shape(weight)), groups = count / cols;
  if (groups <= 0 || groups * cols != count || rows % groups != 0)
    fail("internal: rms_norm: weight ", shape_str(shape(weight)), " for input ",
         shape_str(shape(x)));
  return add_node({.op = Op::RmsNorm,
                   .inputs = {x, weight},
                   .shape = shape(x),
                   .attrs = RmsNormAttrs{.eps = eps, .offset = offset}});
}

Value Builder::layer_norm(Value x, Value weight, Value bias, float eps) {
  expect_f32(x, "layer_norm", "input");
  const int64_t n = dim(x, -1), rows = shape_numel(shape(x)) / n;
  auto groups = [&](Value t, const char* arg) -> int64_t {
    if (!t.valid()) return 1;
    expect_f32(t, "layer_norm", arg);
    const int64_t count = shape_numel(shape(t)), g = count / n;
    if (g <= 0 || g * n != count || rows % g != 0)
      fail("internal: layer_norm: ", arg, " ", shape_str(shape(t)), " for input ",
           shape_str(shape(x)));
    return g;
  };
  const int64_t gw = groups(weight, "weight"), gb = groups(bias, "bias");
  if (weight.valid() && bias.valid() && gw != gb)
    fail("internal: layer_norm: weight ", shape_str(shape(weight)), " and bias ",
         shape_str(shape(bias)), " differ");
  return add_node({.op = Op::LayerNorm,
                   .inputs = {x, weight, bias},
                   .shape = shape(x),
                   .attrs = LayerNormAttrs{.eps = eps}});
}

Value Builder::unary(Op op, Value x, Attrs attrs) {
  expect_f32(x, op_name(op), "input");
  return add_node({.op = op, .inputs = {x}, .shape = shape(x), .attrs = std::move(attrs)});
}

Value Builder::act_mul(Activation act, Value gate, Value up) {
  expect_f32(gate, "act_mul", "gate");
  expect_f32(up, "act_mul", "up");
  const bool per_row =
      dim(gate, -1) == 1 && shape_numel(shape(gate)) * dim(up, -1) == shape_numel(shape(up));
  if (shape(gate) != shape(up) && !per_row)
    fail("internal: act_mul: gate ", shape_str(shape(gate)), " for up ", shape_str(shape(up)));
  return add_node(
      {.op = Op::ActMul, .inputs = {gate, up}, .shape = shape(up), .attrs = ActAttrs{act}});
}

Value Builder::activation(Activation act, Value x) {
  return unary(Op::Activation, x, ActAttrs{act});
}

Value Builder::add(Value a, Value b) {
  expect_same_shape(a, b, "add");
  return add_node({.op = Op::Add, .inputs = {a, b}, .shape = shape(a)});
}

Value Builder::scale(Value x, float s) {
  return unary(Op::Scale, x, ScaleAttrs{s});
}

Value Builder::divide(Value x, float divisor) {
  return unary(Op::Divide, x, ScaleAttrs{divisor});
}

Value Builder::softcap(Value x, float cap) {
  if (!(cap > 0)) fail("internal: softcap: cap ", cap, " must be positive");
  return unary(Op::Softcap, x, SoftcapAttrs{cap});
}

Value Builder::clamp(Value x, float limit, bool upper_only) {
  return unary(Op::Clamp, x, ClampAttrs{.limit = limit, .upper_only = upper_only});
}

Value Builder::xielu(Value x, float alpha_p, float alpha_n, float beta, float eps) {
  return unary(Op::Xielu, x, XieluAttrs{alpha_p, alpha_n, beta, eps});
}

Value Builder::reshape(Value x, Shape s) {
  expect(x, "reshape", "input");
  if (shape_numel(s) != shape_numel(shape(x)))
    fail("internal: cannot reshape ", shape_str(shape(x)), " to ", shape_str(s));
  return add_node(
      {.op = Op::Reshape, .inputs = {x}, .shape = std::move(s), .dtype = node(x).dtype});
}

Value Builder::rope_tables(const RopeSchedule& rope, Value positions) {
  expect(positions, "rope_tables", "positions");
  if (node(positions).dtype != DType::I32 || shape(positions).size() != 1)
    fail("internal: rope_tables: positions ", shape_str(shape(positions)));
  const int64_t half = rope.rot_dim() / 2;
  return add_node({.op = Op::RopeTables,
                   .inputs = {positions},
                   .shape = {2, dim(positions, 0), half},
                   .attrs = RopeTablesAttrs{&rope}});
}

Value Builder::rope(Value x, Value tables, RopeLayout layout, bool tail, bool inverse) {
  expect_f32(x, "rope", "input");
  expect_f32(tables, "rope", "tables");
  const Shape& t = shape(tables);
  if (shape(x).size() != 3 || t.size() != 3 || t[0] != 2 || t[1] != dim(x, 0) ||
      2 * t[2] > dim(x, 2))
    fail("internal: rope: x ", shape_str(shape(x)), " with tables ", shape_str(t));
  return add_node({.op = Op::Rope,
                   .inputs = {x, tables},
                   .shape = shape(x),
                   .attrs = RopeAttrs{.layout = layout, .tail = tail, .inverse = inverse}});
}

Value Builder::attention(Value q, Value k, Value v, const AttentionParams& p, Value slopes,
                         Value sinks, Value chosen) {
  expect_f32(q, "attention", "q");
  if (p.compressor >= 0 && (p.kv_read_only || p.value_dim <= 0 || p.chunk > 0 || p.softcap > 0 ||
                            p.bias != PositionBias::None))
    fail(
        "internal: attention: compressed entries are read with the values in the keys, "
        "without a chunk, cap or position bias");
  if (chosen.valid() && p.compressor >= 0 &&
      (node(chosen).op != Op::Indexer || dim(chosen, 0) != dim(q, 0)))
    fail("internal: attention: chosen entries ", shape_str(shape(chosen)), " for q ",
         shape_str(shape(q)), " must come from an indexer");
  if (chosen.valid() && p.compressor < 0 &&
      (node(chosen).op != Op::Indexer || dim(chosen, 0) != dim(q, 0) || p.kv_read_only ||
       p.window > 0 || p.chunk > 0 || p.softcap > 0 || p.bias != PositionBias::None ||
       sinks.valid()))
    fail("internal: attention: chosen keys ", shape_str(shape(chosen)), " for q ",
         shape_str(shape(q)),
         " must come from an indexer, without a window, chunk, cap, position bias or sinks");
  if (p.window < 0 || p.chunk < 0)
    fail("internal: attention: window ", p.window, " and chunk ", p.chunk, " must not be negative");
  if (p.kv_read_only) {
    const Shape& qs = shape(q);
    if (k.valid() || v.valid() || p.value_dim > 0 || p.bias != PositionBias::None ||
        slopes.valid() || sinks.valid() || qs.size() != 3)
      fail("internal: attention: a read-only cache layer with q ", shape_str(qs),
           " takes no k, v, value_dim, position bias or sinks");
    return add_node({.op = Op::Attention,
                     .inputs = {q, k, v, slopes, sinks},
                     .shape = qs,
                     .attrs = AttentionAttrs{.layer = p.layer,
                                             .window = p.window,
                                             .chunk = p.chunk,
                                             .scale = p.scale,
                                             .softcap = p.softcap,
                                             .kv_read_only = true}});
  }
  expect_f32(k, "attention", "k");
  const Shape &qs = shape(q), &ks = shape(k);
  if (qs.size() != 3 || ks.size() != 3 || qs[0] != ks[0] || qs[2] != ks[2] || ks[1] <= 0 ||
      qs[1] % ks[1] != 0)
    fail("internal: attention: q ", shape_str(qs), " with k ", shape_str(ks));
  int64_t v_dim = p.value_dim;
  if (p.value_dim > 0) {
    if (v.valid() || p.value_dim > ks[2])
      fail("internal: attention: values in the keys' first ", p.value_dim, " dims of ",
           shape_str(ks), (v.valid() ? ", and a v" : ""));
  } else {
    expect_f32(v, "attention", "v");
    const Shape& vs = shape(v);
    if (vs.size() != 3 || vs[0] != ks[0] || vs[1] != ks[1])
      fail("internal: attention: v ", shape_str(vs), " with k ", shape_str(ks));
    v_dim = vs[2];
  }
  if ((p.bias != PositionBias::None) != slopes.valid() ||
      (slopes.valid() && shape_numel(shape(slopes)) != qs[1]))
    fail("internal: attention: position bias slopes do not match ", qs[1], " heads");
  if (sinks.valid()) {
    expect_f32(sinks, "attention", "sinks");
    if (shape_numel(shape(sinks)) != qs[1])
      fail("internal: attention: sinks ", shape_str(shape(sinks)), " do not match ", qs[1],
           " heads");
  }
  Node n{.op = Op::Attention, .inputs = {q, k, v, slopes, sinks}, .shape = {qs[0], qs[1], v_dim}};
  // A sixth input only when there is one, so that other graphs keep their hashes.
  if (chosen.valid()) n.inputs.push_back(chosen);
  n.attrs = AttentionAttrs{.layer = p.layer,
                           .window = p.window,
                           .value_dim = p.value_dim,
                           .chunk = p.chunk,
                           .scale = p.scale,
                           .softcap = p.softcap,
                           .bias = p.bias,
                           .compressor = p.compressor};
  return add_node(std::move(n));
}

Value Builder::indexer(Value q, Value k, Value w, int64_t layer, int64_t top_k, float scale,
                       int64_t compressor) {
  expect_f32(q, "indexer", "q");
  expect_f32(w, "indexer", "weights");
  const Shape &qs = shape(q), &ws = shape(w);
  if (compressor < 0) {
    expect_f32(k, "indexer", "k");
  } else if (k.valid()) {
    fail("internal: indexer: keys from compressor ", compressor, " and a k");
  }
  const Shape ks = k.valid() ? shape(k) : Shape{qs.at(0), qs.at(2)};
  if (qs.size() != 3 || ks.size() != 2 || ws.size() != 2 || ks[0] != qs[0] || ks[1] != qs[2] ||
      ws[0] != qs[0] || ws[1] != qs[1] || top_k < 1 || layer < 0)
    fail("internal: indexer: q ", shape_str(qs), ", k ", shape_str(ks), ", weights ", shape_str(ws),
         ", top ", top_k, " keys, cache layer ", layer);
  return add_node({.op = Op::Indexer,
                   .inputs = {q, k, w},
                   .shape = {qs[0], top_k},
                   .dtype = DType::I32,
                   .attrs = IndexerAttrs{
                       .layer = layer, .top_k = top_k, .scale = scale, .compressor = compressor}});
}

Value Builder::hyper_mix(Value mixes, Value base, Value scale, int64_t streams, int64_t iters,
                         float eps) {
  expect_f32(mixes, "hyper_mix", "mixes");
  expect_f32(base, "hyper_mix", "base");
  expect_f32(scale, "hyper_mix", "scale");
  const Shape& ms = shape(mixes);
  const int64_t m = ms.empty() ? 0 : ms.back();
  const bool head = m == streams;
  if (ms.size() != 2 || streams < 1 || (!head && m != (2 + streams) * streams) ||
      shape_numel(shape(base)) != m || shape_numel(shape(scale)) != (head ? 1 : 3) ||
      (!head && iters < 1))
    fail("internal: hyper_mix: mixes ", shape_str(ms), ", base ", shape_str(shape(base)),
         ", scale ", shape_str(shape(scale)), " for ", streams, " streams, ", iters,
         " Sinkhorn iterations");
  return add_node({.op = Op::HyperMix,
                   .inputs = {mixes, base, scale},
                   .shape = ms,
                   .attrs = HyperMixAttrs{.streams = streams, .iters = iters, .eps = eps}});
}

Value Builder::compress(Value kv, Value gate, Value ape, Value norm, const RopeSchedule& rope,
                        const CompressParams& p) {
  for (auto [v, what] : {std::pair{kv, "kv"}, {gate, "gate"}, {ape, "ape"}, {norm, "norm"}})
    expect_f32(v, "compress", what);
  const Shape &ks = shape(kv), &as = shape(ape);
  const int64_t dim = shape_numel(shape(norm));
  if (ks.size() != 2 || shape(gate) != ks || as.size() != 2 || as[1] != ks[1] || as[0] < 1 ||
      (ks[1] != dim && ks[1] != 2 * dim) || p.layer < 0 || p.compressor < 0 || rope.rot_dim() > dim)
    fail("internal: compress: kv ", shape_str(ks), ", gate ", shape_str(shape(gate)), ", ape ",
         shape_str(as), ", norm of ", dim, ", rotary of ", rope.rot_dim(), " dims");
  return add_node({.op = Op::Compress,
                   .inputs = {kv, gate, ape, norm},
                   .shape = {1},
                   .attrs = CompressAttrs{.layer = p.layer,
                                          .compressor = p.compressor,
                                          .eps = p.eps,
                                          .layout = p.layout,
                                          .schedule = &rope}});
}

Value Builder::all_reduce(Value x, Collectives& comm) {
  expect_f32(x, "all_reduce", "x");
  return add_node(
      {.op = Op::AllReduce, .inputs = {x}, .shape = shape(x), .attrs = CollectiveAttrs{&comm}});
}

Value Builder::all_gather(Value x, Collectives& comm) {
  expect_f32(x, "all_gather", "x");
  Shape s = shape(x);
  if (s.empty()) fail("internal: all_gather of a scalar");
  s.back() *= comm.size();
  return add_node(
      {.op = Op::AllGather, .inputs = {x}, .shape = s, .attrs = CollectiveAttrs{&comm}});
}

Value Builder::append(Node node) {
  for (Value v : node.inputs)
    if (v.valid()) expect(v, op_name(node.op), "input");
  std::string name = std::move(node.name);
  node.name.clear();
  const Value v = add_node(std::move(node));
  return name.empty() ? v : this->name(v, std::move(name));
}

Value Builder::rows(Value x, Value indices) {
  expect_f32(x, "rows", "input");
  expect(indices, "rows", "indices");
  if (shape(x).size() != 2 || node(indices).dtype != DType::I32 || shape(indices).size() != 1)
    fail("internal: rows: x ", shape_str(shape(x)), " at ", shape_str(shape(indices)));
  return add_node({.op = Op::Rows, .inputs = {x, indices}, .shape = {dim(indices, 0), dim(x, 1)}});
}

Value Builder::concat(Value a, Value b) {
  expect_f32(a, "concat", "a");
  expect_f32(b, "concat", "b");
  Shape sa = shape(a), sb = shape(b);
  if (sa.size() != sb.size() || sa.empty() ||
      !std::equal(sa.begin(), sa.end() - 1, sb.begin(), sb.end() - 1))
    fail("internal: concat: ", shape_str(sa), " and ", shape_str(sb));
  sa.back() += sb.back();
  return add_node({.op = Op::Concat, .inputs = {a, b}, .shape = std::move(sa)});
}

Value Builder::slice(Value x, int64_t start, int64_t length) {
  expect_f32(x, "slice", "input");
  Shape s = shape(x);
  if (s.empty() || start < 0 || length <= 0 || start + length > s.back())
    fail("internal: slice: columns [", start, ", ", start + length, ") of ", shape_str(s));
  s.back() = length;
  return add_node(
      {.op = Op::Slice, .inputs = {x}, .shape = std::move(s), .attrs = SliceAttrs{start}});
}

Value Builder::row_stat(Value x, RowStat stat, float eps) {
  expect_f32(x, "row_stat", "input");
  Shape s = shape(x);
  if (s.empty() || s.back() <= 0 || !(eps >= 0))
    fail("internal: row_stat: input ", shape_str(s), " with eps ", eps);
  s.back() = 1;
  return add_node({.op = Op::RowStat,
                   .inputs = {x},
                   .shape = std::move(s),
                   .attrs = RowStatAttrs{.stat = stat, .eps = eps}});
}

Value Builder::binary(BinaryOp op, Value a, Value b) {
  expect_f32(a, "binary", "a");
  expect_f32(b, "binary", "b");
  const Shape &sa = shape(a), &sb = shape(b);
  Shape out(std::max(sa.size(), sb.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < sa.size() ? sa[sa.size() - 1 - i] : 1;
    const int64_t db = i < sb.size() ? sb[sb.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      fail("internal: binary: shapes ", shape_str(sa), " and ", shape_str(sb), " do not broadcast");
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return add_node(
      {.op = Op::Binary, .inputs = {a, b}, .shape = std::move(out), .attrs = BinaryAttrs{op}});
}

Value Builder::batch_matmul(Value a, Value b) {
  expect_f32(a, "batch_matmul", "a");
  expect_f32(b, "batch_matmul", "b");
  const Shape &sa = shape(a), &sb = shape(b);
  if (sa.size() != 3 || sb.size() != 3 || sa[0] != sb[0] || sa[2] != sb[1])
    fail("internal: batch_matmul: ", shape_str(sa), " and ", shape_str(sb));
  return add_node({.op = Op::BatchMatmul, .inputs = {a, b}, .shape = {sa[0], sa[1], sb[2]}});
}

Value Builder::causal_conv(Value x, Value w, Value bias, StateRef state) {
  expect_f32(x, "causal_conv", "input");
  expect_f32(w, "causal_conv", "weight");
  const Shape &xs = shape(x), &ws = shape(w);
  if (xs.size() != 2 || ws.empty() || ws[0] != xs[1] || ws.size() > 3 ||
      (ws.size() == 3 && ws[1] != 1) || shape_numel(ws) < xs[1])
    fail("internal: causal_conv: input ", shape_str(xs), " with weight ", shape_str(ws));
  if (bias.valid()) {
    expect_f32(bias, "causal_conv", "bias");
    if (shape_numel(shape(bias)) != xs[1])
      fail("internal: causal_conv: bias ", shape_str(shape(bias)), " for ", xs[1], " channels");
  }
  return add_node({.op = Op::CausalConv,
                   .inputs = {x, w, bias},
                   .shape = xs,
                   .attrs = StateAttrs{.layer = state.layer, .slot = state.slot}});
}

Value Builder::gated_delta_rule(Value q, Value k, Value v, Value a, Value b, Value a_log,
                                Value dt_bias, StateRef state) {
  const char* op = "gated_delta_rule";
  expect_same_shape(q, k, op);
  expect_f32(v, op, "v");
  expect_same_shape(a, b, op);
  expect_same_shape(a_log, dt_bias, op);
  const Shape &qs = shape(q), &vs = shape(v), &as = shape(a);
  if (qs.size() != 3 || vs.size() != 3 || vs[0] != qs[0] || qs[1] <= 0 || vs[1] % qs[1] != 0 ||
      as != Shape{qs[0], vs[1]} || shape_numel(shape(a_log)) != vs[1])
    fail("internal: gated_delta_rule: q ", shape_str(qs), ", v ", shape_str(vs), ", a ",
         shape_str(as), ", A_log ", shape_str(shape(a_log)));
  return add_node({.op = Op::GatedDeltaRule,
                   .inputs = {q, k, v, a, b, a_log, dt_bias},
                   .shape = vs,
                   .attrs = StateAttrs{.layer = state.layer, .slot = state.slot}});
}

Value Builder::ssd(Value x, Value dt, Value a_log, Value dt_bias, Value b, Value c, Value d,
                   float dt_min, float dt_max, StateRef state) {
  const char* op = "ssd";
  expect_f32(x, op, "x");
  expect_f32(dt, op, "dt");
  expect_same_shape(a_log, dt_bias, op);
  expect_same_shape(a_log, d, op);
  expect_same_shape(b, c, op);
  const Shape &xs = shape(x), &ds = shape(dt), &bs = shape(b);
  if (xs.size() != 3 || bs.size() != 3 || ds != Shape{xs[0], xs[1]} || bs[0] != xs[0] ||
      bs[1] <= 0 || xs[1] % bs[1] != 0 || shape_numel(shape(a_log)) != xs[1])
    fail("internal: ssd: x ", shape_str(xs), ", dt ", shape_str(ds), ", B ", shape_str(bs),
         ", A_log ", shape_str(shape(a_log)));
  if (!(dt_min <= dt_max)) fail("internal: ssd: dt limit [", dt_min, ", ", dt_max, "]");
  return add_node(
      {.op = Op::Ssd,
       .inputs = {x, dt, a_log, dt_bias, b, c, d},
       .shape = xs,
       .attrs =
           SsdAttrs{.layer = state.layer, .slot = state.slot, .dt_min = dt_min, .dt_max = dt_max}});
}

Value Builder::head_linear(Value x, Value w) {
  expect_f32(x, "head_linear", "input");
  expect(w, "head_linear", "weight");
  const Shape &xs = shape(x), &ws = shape(w);
  if (xs.size() != 3 || ws.size() != 3 || ws[0] != xs[1] || ws[2] != xs[2])
    fail("internal: head_linear: input ", shape_str(xs), " with weight ", shape_str(ws));
  return add_node({.op = Op::HeadLinear, .inputs = {x, w}, .shape = {xs[0], xs[1], ws[1]}});
}

Value Builder::route(Value logits, const RouteParams& p, Value bias, Value expert_scale,
                     Value ids) {
  expect_f32(logits, "route", "logits");
  if (shape(logits).size() != 2)
    fail("internal: route: logits ", shape_str(shape(logits)), " must be [tokens, experts]");
  const int64_t experts = dim(logits, 1);
  if (p.top_k < 1 || p.top_k > experts || (p.routing == Routing::SparseMixer && p.top_k != 2))
    fail("internal: route: top ", p.top_k, " of ", experts, " experts");
  if (p.groups < 1 || experts % p.groups != 0 || p.top_groups < 1 || p.top_groups > p.groups ||
      (p.groups > 1 && p.routing != Routing::Sigmoid && p.routing != Routing::SoftmaxGreedy) ||
      p.top_k > p.top_groups * (experts / p.groups))
    fail("internal: route: ", experts, " experts in ", p.groups, " groups, best ", p.top_groups,
         ", top ", p.top_k);
  if (bias.valid()) {
    expect_f32(bias, "route", "bias");
    if ((p.routing != Routing::Sigmoid && p.routing != Routing::SoftmaxBiased &&
         p.routing != Routing::SigmoidTopK && p.routing != Routing::SqrtSoftplus) ||
        shape_numel(shape(bias)) != experts)
      fail("internal: route: bias ", shape_str(shape(bias)), " for ", experts, " experts");
  }
  if (expert_scale.valid()) {
    expect_f32(expert_scale, "route", "expert_scale");
    if (shape_numel(shape(expert_scale)) != experts)
      fail("internal: route: expert_scale ", shape_str(shape(expert_scale)), " for ", experts,
           " experts");
  }
  if (ids.valid()) {
    expect_f32(ids, "route", "ids");
    if (p.routing != Routing::SqrtSoftplus || bias.valid() ||
        shape(ids) != Shape{dim(logits, 0), p.top_k})
      fail("internal: route: given experts ", shape_str(shape(ids)), " for ",
           shape_str(shape(logits)), " logits, top ", p.top_k);
  }
  Node n{.op = Op::Route,
         .inputs = {logits, bias, expert_scale},
         .shape = {2, dim(logits, 0), p.top_k}};
  // A fourth input only when there is one, so that other graphs keep their hashes.
  if (ids.valid()) n.inputs.push_back(ids);
  n.attrs = RouteAttrs{.routing = p.routing,
                       .top_k = p.top_k,
                       .norm_topk = p.norm_topk,
                       .eps = p.norm_eps,
                       .scale = p.scale,
                       .groups = p.groups,
                       .top_groups = p.top_groups};
  return add_node(std::move(n));
}

Value Builder::experts(Value x, Value route, const std::vector<Expert>& given, Activation act,
                       ExpertGluParams glu, bool scale_inputs) {
  std::vector<Expert> experts = given;
  for (Expert& e : experts) {
    e.gate = quantized(e.gate);
    e.up = quantized(e.up);
    e.down = quantized(e.down);
  }
  expect_f32(x, "experts", "input");
  expect_f32(route, "experts", "route");
  if (shape(x).size() != 2 || node(route).op != Op::Route || dim(route, 1) != dim(x, 0))
    fail("internal: experts: input ", shape_str(shape(x)), " with route ", shape_str(shape(route)));
  if (experts.empty()) fail("internal: experts: no experts");
  if (glu.kind != ExpertGlu::ActMul &&
      (!experts.front().gate.valid() || !std::isfinite(glu.limit) || !std::isfinite(glu.alpha)))
    fail("internal: experts: a clamped GLU needs gated experts and a finite limit ", glu.limit,
         " and alpha ", glu.alpha);
  Node n{.op = Op::Experts,
         .inputs = {x, route},
         .shape = shape(x),
         .attrs = ExpertsAttrs{.act = act,
                               .top_k = dim(route, 2),
                               .glu = glu.kind,
                               .limit = glu.limit,
                               .alpha = glu.alpha,
                               .scale_inputs = scale_inputs}};
  const int64_t d = dim(x, 1);
  int64_t inter = -1;
  for (const Expert& e : experts) {
    expect(e.up, "experts", "up");
    expect(e.down, "experts", "down");
    const Shape &up = shape(e.up), &down = shape(e.down);
    if (inter < 0) inter = up.at(0);
    const bool gate_ok = !e.gate.valid() || shape(e.gate) == up;
    if (up.size() != 2 || up[1] != d || up[0] != inter || down != Shape{d, inter} || !gate_ok)
      fail("internal: experts: expert ", (n.inputs.size() - 2) / kExpertInputs, " up ",
           shape_str(up), " down ", shape_str(down), " for input ", shape_str(shape(x)));
    if (e.gate.valid() != experts.front().gate.valid())
      fail("internal: experts: every expert is gated, or none");
    if (e.gate_bias.valid() && !e.gate.valid())
      fail("internal: experts: a gate bias without a gate");
    for (auto [b, size, what] : {std::tuple{e.gate_bias, inter, "gate bias"},
                                 {e.up_bias, inter, "up bias"},
                                 {e.down_bias, d, "down bias"}}) {
      if (!b.valid()) continue;
      expect_f32(b, "experts", what);
      if (shape_numel(shape(b)) != size)
        fail("internal: experts: expert ", (n.inputs.size() - 2) / kExpertInputs, " ", what, " ",
             shape_str(shape(b)), " for ", size, " rows");
    }
    n.inputs.insert(n.inputs.end(), {e.gate, e.up, e.down, e.gate_bias, e.up_bias, e.down_bias});
  }
  return add_node(std::move(n));
}

}  // namespace lathe::graph
