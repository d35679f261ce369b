#include "shard/rank_graph.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/pages.h"
#include "core/quant.h"
#include "shard/tp_analysis.h"

namespace lathe::shard {

using graph::Builder;
using graph::Graph;
using graph::Node;
using graph::Op;
using graph::Value;
using Role = Layout::Role;
using detail::Split;

const Tensor& WeightSlices::get(const Tensor& t, int dim, int64_t begin, int64_t end,
                                graph::WeightQuantizer* quantizer) {
  std::lock_guard lock(mutex_);
  const Key key{t.data<void>(), dim, begin, end, quantizer != nullptr};
  if (auto it = slices_.find(key); it != slices_.end()) return it->second;
  if (quantizer) {
    // The slice made before the model was quantized (ShardedModel's probe at load) gives way
    // to its quantized copy: the two are not kept side by side.
    if (auto it = slices_.find({t.data<void>(), dim, begin, end, false}); it != slices_.end()) {
      Tensor q = quantizer->take(it->second);
      slices_.erase(it);
      return slices_.emplace(key, std::move(q)).first->second;
    }
  }
  // A matrix of blocks (FP8, MXFP4) splits at its blocks; a column split inside one takes the
  // rank's slice from the matrix dequantized (exactly, in f32). Block-quantized types are
  // made after the split (under --quantize, from the slices).
  Tensor dequantized;
  const int64_t block = dtype_traits(t.dtype()).block_size;
  const bool columns = static_cast<size_t>(dim) + 1 == t.shape().size();
  if (is_quantized(t.dtype()))
    fail("internal: a ", dtype_name(t.dtype()), " weight ", shape_str(t.shape()),
         " split across ranks (quantize the slices instead)");
  if (block > 1 && columns && (begin % block != 0 || end % block != 0))
    dequantized = t.to(DType::F32);
  const Tensor& src_tensor = dequantized.defined() ? dequantized : t;
  const DType dt = src_tensor.dtype();
  Shape shape = t.shape();
  const size_t d = static_cast<size_t>(dim);
  if (d >= shape.size() || begin < 0 || end > shape[d] || begin >= end)
    fail("internal: slice [", begin, ", ", end, ") of dimension ", dim, " of ",
         shape_str(t.shape()));
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i) outer *= shape[i];
  for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  // Bytes of `count` consecutive indices of dimension d (whole blocks along the last one).
  auto span_bytes = [&](int64_t count) {
    return columns ? row_bytes(dt, count) : static_cast<size_t>(count) * row_bytes(dt, inner);
  };
  const int64_t whole = shape[d];
  shape[d] = end - begin;
  Tensor out = Tensor::zeros(dt, shape);
  const auto* src = src_tensor.data<uint8_t>();
  auto* dst = static_cast<uint8_t*>(out.mut<void>());
  const size_t bytes = span_bytes(end - begin);
  for (int64_t o = 0; o < outer; ++o, dst += bytes)
    std::memcpy(dst, src + span_bytes(o * whole + begin), bytes);
  // The copy replaces the mapped source for this rank: its pages stop counting in the rank's
  // memory (read again from the file if a node uses the whole tensor too).
  if (!t.owned()) page_out(t.data<void>(), t.nbytes());
  if (quantizer) out = quantizer->take(std::move(out));
  return slices_.emplace(key, std::move(out)).first->second;
}

uint64_t WeightSlices::bytes() {
  std::lock_guard lock(mutex_);
  uint64_t n = 0;
  for (const auto& [key, t] : slices_) n += t.nbytes();
  return n;
}

namespace {

// The units of a split value a rank holds: units / degree of them, or, for kv heads fewer
// than the ranks (the degree a multiple of them), the one its q heads use.
struct Units {
  int64_t first = 0, count = 0;
};

Units rank_units(int64_t units, Role unit, const RankSpec& s, const std::string& where) {
  const int64_t n = s.degree;
  if (units % n == 0) return {s.rank * (units / n), units / n};
  if (unit == Role::ColumnKv && n % units == 0) return {s.rank / (n / units), 1};
  fail(where, ": ", units,
       unit == Role::ColumnHeads ? " heads"
       : unit == Role::ColumnKv  ? " kv heads"
                                 : " features",
       " across ", n, " ranks: they must divide evenly");
}

// A split value's shape on the rank: the dimension its units run along (the first after the
// tokens that is not 1) holds the rank's share.
Shape local_shape(const Shape& s, int64_t units, const Units& u, const std::string& where) {
  Shape out = s;
  for (size_t d = 1; d < s.size(); ++d) {
    if (s[d] == 1 && units > 1) continue;
    if (s[d] % units != 0) break;
    out[d] = s[d] / units * u.count;
    return out;
  }
  fail("internal: ", where, ": cannot split ", shape_str(s), " into ", units, " units");
}

class RankGraph {
 public:
  RankGraph(const Graph& g, const StepInputs& in, const RankSpec& spec, WeightSlices& slices,
            Builder& b)
      : g_(g), in_(in), spec_(spec), slices_(slices), b_(b), map_(g.nodes.size()) {}

  Value run() {
    const bool tp = spec_.parallelism == Parallelism::Tensor && spec_.degree > 1;
    if (spec_.degree > 1 && !spec_.comm) fail("internal: a sharded graph without collectives");
    if (spec_.parallelism == Parallelism::Expert && spec_.degree > 1 &&
        std::none_of(g_.nodes.begin(), g_.nodes.end(),
                     [](const Node& n) { return n.op == Op::Experts; }))
      fail("it has no experts for expert parallelism to split (tensor parallelism: --tp)");
    if (tp) {
      a_ = detail::analyze_tp(g_);
      if (!a_.problem.empty()) fail(a_.problem);
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.op == Op::Weight) continue;  // made where a node reads it, whole or sliced
      if (n.op == Op::Input) {
        map_[i] = input(n);
      } else if (spec_.degree == 1) {
        map_[i] = copy(n, mapped(n), n.shape, true);
      } else if (!tp) {
        map_[i] = n.op == Op::Experts ? experts(n) : copy(n, mapped(n), n.shape, true);
      } else {
        map_[i] = tensor_parallel(i);
      }
    }
    if (g_.outputs.empty()) fail("internal: a step graph without logits");
    return at(g_.outputs[0]);
  }

 private:
  Value input(const Node& n) {
    switch (n.attr<graph::InputAttrs>().slot) {
      case graph::InputSlot::Tokens:
        return in_.tokens;
      case graph::InputSlot::Positions:
        return in_.positions;
      case graph::InputSlot::LogitRows:
        return in_.logit_rows;
    }
    fail("internal: input slot ", static_cast<int64_t>(n.attr<graph::InputAttrs>().slot));
  }

  // The rank's value of v: a node made before, or the whole weight.
  Value at(Value v) {
    if (!v.valid()) return v;
    const Node& n = g_.at(v);
    if (n.op != Op::Weight) return map_.at(static_cast<size_t>(v.id));
    auto [it, added] = whole_.emplace(v.id, Value{});
    if (added) it->second = b_.append(Node{n.op, "", {}, n.shape, n.dtype, n.attrs, n.constant});
    return it->second;
  }
  std::vector<Value> mapped(const Node& n) {
    std::vector<Value> out;
    for (Value v : n.inputs) out.push_back(at(v));
    return out;
  }
  // Indices [begin, end) of dimension `dim` of weight w, as a Weight node (quantized when it
  // is a matmul's, under --quantize).
  Value sliced(Value w, int dim, int64_t begin, int64_t end, bool matmul = false) {
    const Node& n = g_.at(w);
    if (n.op != Op::Weight) fail("internal: slicing ", op_name(n.op), " node %", w.id);
    const Tensor& t = slices_.get(n.constant, dim, begin, end, matmul ? b_.quantizer() : nullptr);
    return b_.append(Node{.op = Op::Weight, .shape = t.shape(), .dtype = t.dtype(), .constant = t});
  }
  // The rank's units of weight w's dimension `dim`, which holds `units` equal blocks.
  Value sliced_units(Value w, int dim, int64_t units, const Units& u, bool matmul = false) {
    if (!w.valid()) return w;
    const int64_t size = g_.at(w).shape.at(static_cast<size_t>(dim));
    if (size % units != 0)
      fail("internal: ", shape_str(g_.at(w).shape), " has no ", units, " equal blocks");
    const int64_t per = size / units;
    return sliced(w, dim, u.first * per, (u.first + u.count) * per, matmul);
  }
  // A node of the rank's graph. Under --quantize the matrices of Linears (routers aside) and
  // experts take their quantized copies, as the builder gives one process.
  Value copy(const Node& n, std::vector<Value> inputs, Shape shape, bool named) {
    Node c = n;
    if (n.op == Op::Linear && !n.attr<graph::LinearAttrs>().keep_dtype)
      inputs[1] = b_.quantized(inputs[1]);
    if (n.op == Op::Experts)
      for (size_t k = 2; k < inputs.size(); ++k)
        if ((k - 2) % graph::kExpertInputs < 3) inputs[k] = b_.quantized(inputs[k]);
    c.inputs = std::move(inputs);
    c.shape = std::move(shape);
    if (!named) c.name.clear();
    return b_.append(std::move(c));
  }
  // Gives `v` the name of node n (a whole value that a rank computes as one process does).
  Value named(Value v, const Node& n) { return n.name.empty() ? v : b_.name(v, n.name); }

  Units units_of(size_t i) {
    const Split& s = a_.split[i];
    return rank_units(s.units, s.unit, spec_, detail::label(g_, i));
  }

  Value tensor_parallel(size_t i) {
    const Node& n = g_.nodes[i];
    const Split& out = a_.split[i];
    const std::string where = detail::label(g_, i);
    const auto split = [&](Value v) {
      return v.valid() && a_.split[static_cast<size_t>(v.id)].split();
    };
    switch (n.op) {
      case Op::Linear:
        return linear(i);
      case Op::Embedding:
        return embedding(n);
      case Op::RmsNorm:
      case Op::LayerNorm:
        if (split(n.inputs[0])) return norm(i);
        break;
      case Op::Experts:  // split by experts, as expert parallelism splits them
        return experts(n);
      case Op::HeadLinear:
        if (!out.split()) break;
        return copy(n, {at(n.inputs[0]), sliced_units(n.inputs[1], 0, out.units, units_of(i))},
                    local_shape(n.shape, out.units, units_of(i), where), false);
      case Op::Attention: {
        if (!out.split()) break;
        const Units u = units_of(i);
        std::vector<Value> inputs = mapped(n);
        for (size_t k = 3; k < 5 && k < n.inputs.size(); ++k)  // ALiBi slopes, sinks: per head
          inputs[k] = sliced_units(n.inputs[k], 0, out.units, u);
        return copy(n, std::move(inputs), local_shape(n.shape, out.units, u, where), false);
      }
      default:
        break;
    }
    if (!out.split()) return copy(n, mapped(n), n.shape, true);
    // Ops that act on each unit alone: reshape, rotary, activations, scales, residual joins of
    // split values.
    return copy(n, mapped(n), local_shape(n.shape, out.units, units_of(i), where), false);
  }

  Value linear(size_t i) {
    const Node& n = g_.nodes[i];
    const Value x = n.inputs[0], w = n.inputs[1];
    const Value bias = n.inputs.size() > 2 ? n.inputs[2] : Value{};
    const Split& in = a_.split[static_cast<size_t>(x.id)];
    if (in.split()) {
      // Row-parallel: the rank's columns, the ranks' products summed, the bias added once.
      const Units u = rank_units(in.units, in.unit, spec_, detail::label(g_, i));
      const Value part =
          copy(n,
               {at(x), sliced_units(w, 1, in.units, u, !n.attr<graph::LinearAttrs>().keep_dtype),
                Value{}},
               n.shape, false);
      Value sum = b_.all_reduce(part, *spec_.comm);
      if (bias.valid()) sum = b_.binary(graph::BinaryOp::Add, sum, at(bias));
      return named(sum, n);
    }
    if (auto c = a_.column.find(static_cast<int32_t>(i)); c != a_.column.end()) {
      const Units u = rank_units(c->second.units, c->second.role, spec_, detail::label(g_, i));
      return copy(
          n,
          {at(x), sliced_units(w, 0, c->second.units, u, !n.attr<graph::LinearAttrs>().keep_dtype),
           sliced_units(bias, 0, c->second.units, u)},
          local_shape(n.shape, c->second.units, u, detail::label(g_, i)), false);
    }
    const int64_t vocab = g_.at(w).shape[0];
    if (static_cast<int32_t>(i) == a_.head && vocab % spec_.degree == 0) {
      // Vocabulary-parallel head: the rank's columns of the logits, then gathered.
      const Units u{spec_.rank, 1};
      Shape shape = n.shape;
      shape.back() /= spec_.degree;
      const Value part = copy(
          n,
          {at(x), sliced_units(w, 0, spec_.degree, u, !n.attr<graph::LinearAttrs>().keep_dtype),
           sliced_units(bias, 0, spec_.degree, u)},
          shape, false);
      return named(b_.all_gather(part, *spec_.comm), n);
    }
    return copy(n, mapped(n), n.shape, true);
  }

  Value embedding(const Node& n) {
    const Value table = n.inputs[0];
    const int64_t vocab = g_.at(table).shape[0], ranks = spec_.degree;
    auto role = a_.weight.find(table.id);
    if (role == a_.weight.end() || role->second.role != Role::Vocab || vocab % ranks != 0 ||
        n.attr<graph::EmbeddingAttrs>().id_range != graph::IdRange::Fail)
      return copy(n, mapped(n), n.shape, true);
    // Each rank embeds the ids in its rows (zeros for the others'), and the sum joins them.
    // An id outside the whole table still fails: below it on rank 0, past it on the last.
    const int64_t rows = vocab / ranks, begin = spec_.rank * rows;
    Node c = n;
    auto& attrs = c.attr<graph::EmbeddingAttrs>();
    attrs.id_offset -= begin;
    attrs.id_range = spec_.rank == 0           ? graph::IdRange::ZerosPast
                     : spec_.rank == ranks - 1 ? graph::IdRange::ZerosBelow
                                               : graph::IdRange::Zeros;
    const Value part =
        copy(c, {sliced(table, 0, begin, begin + rows), at(n.inputs[1])}, n.shape, false);
    return named(b_.all_reduce(part, *spec_.comm), n);
  }

  Value norm(size_t i) {
    const Node& n = g_.nodes[i];
    const Node& x = g_.at(n.inputs[0]);
    const Split& s = a_.split[i];
    const Units u = units_of(i);
    const std::string where = detail::label(g_, i);
    const int64_t per_unit = detail::row_features(x) / s.units;
    if (x.shape.back() > per_unit) {
      // A norm over several units (OLMo2's q_norm over all heads): gather the whole row, norm
      // it as one process does, keep the rank's columns.
      if (u.count * spec_.degree != s.units)
        fail(where, ": a norm across all kv heads needs them to divide evenly across the ranks (",
             s.units, " kv heads across ", spec_.degree, " ranks)");
      const Value whole = b_.all_gather(at(n.inputs[0]), *spec_.comm);
      std::vector<Value> inputs = mapped(n);
      inputs[0] = whole;
      const Value normed = copy(n, std::move(inputs), n.shape, true);
      const int64_t cols = x.shape.back() / s.units;
      return b_.slice(normed, u.first * cols, u.count * cols);
    }
    // A norm within one unit; a weight that holds one row per unit (Cohere's per-head q_norm
    // [heads, head_dim]) keeps the rank's rows.
    std::vector<Value> inputs = mapped(n);
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.inputs[k].valid() && shape_numel(g_.at(n.inputs[k]).shape) > x.shape.back())
        inputs[k] = sliced_units(n.inputs[k], 0, s.units, u);
    return copy(n, std::move(inputs), local_shape(n.shape, s.units, u, where), false);
  }

  // Expert parallelism: the rank's experts only, the ranks' shares summed.
  Value experts(const Node& n) {
    const int64_t experts = static_cast<int64_t>(n.inputs.size() - 2) / graph::kExpertInputs;
    if (experts < spec_.degree)
      fail(n.name.empty() ? "an experts node" : n.name, ": ", experts, " experts across ",
           spec_.degree, " ranks: each rank must hold at least one");
    const Range mine = expert_block(experts, spec_.degree, spec_.rank);
    std::vector<Value> inputs = mapped(n);
    for (int64_t e = 0; e < experts; ++e)
      if (e < mine.begin || e >= mine.end)
        for (int k = 0; k < graph::kExpertInputs; ++k)
          inputs[static_cast<size_t>(2 + e * graph::kExpertInputs + k)] = Value{};
    const Value part = copy(n, std::move(inputs), n.shape, false);
    return named(b_.all_reduce(part, *spec_.comm), n);
  }

  const Graph& g_;
  const StepInputs& in_;
  const RankSpec& spec_;
  WeightSlices& slices_;
  Builder& b_;
  detail::TpAnalysis a_;
  std::vector<Value> map_;
  std::map<int32_t, Value> whole_;  // Weight node -> its whole copy in the rank's graph
};

}  // namespace

Value append_rank_graph(const Graph& g, const StepInputs& in, const RankSpec& spec,
                        WeightSlices& slices, Builder& out) {
  return RankGraph(g, in, spec, slices, out).run();
}

std::vector<LayerStateSpec> rank_layer_states(std::vector<LayerStateSpec> states,
                                              const RankSpec& spec) {
  if (spec.parallelism != Parallelism::Tensor || spec.degree == 1) return states;
  for (LayerStateSpec& s : states) {
    if (s.kind == StateKind::Recurrent || s.kv_heads == 0) continue;
    s.kv_heads = rank_units(s.kv_heads, Role::ColumnKv, spec, "the KV cache").count;
  }
  return states;
}

ShardedModel::ShardedModel(std::unique_ptr<Model> inner, const RankSpec& spec)
    : owner_(std::move(inner)), spec_(spec) {
  inner_ = dynamic_cast<const GraphModel*>(owner_.get());
  if (!inner_) fail(owner_->info().architecture, " builds no step graph, so it cannot be sharded");
  if (spec.degree < 1 || spec.rank < 0 || spec.rank >= spec.degree)
    fail("internal: rank ", spec.rank, " of ", spec.degree);
  // --quantize comes after: each rank quantizes its own slices (models/registry.cpp).
  if (inner_->quantizer()) fail("internal: a model quantized before it is sharded");
  info_ = inner_->info();
  const std::string what =
      cat(info_.architecture, " (", parallelism_name(spec.parallelism), "=", spec.degree, ")");
  try {
    if (spec.parallelism == Parallelism::Tensor && spec.degree > 1) {
      info_.kv_heads = rank_units(info_.kv_heads, Role::ColumnKv, spec, "the kv heads").count;
    }
    Builder probe;
    const StepInputs in{probe.input(graph::InputSlot::Tokens, 1),
                        probe.input(graph::InputSlot::Positions, 1),
                        probe.input(graph::InputSlot::LogitRows, 1)};
    build_rank(probe, in);
  } catch (const Error& e) {
    throw NotShardable(cat(what, ": ", e.what()));
  }
}

Value ShardedModel::build_rank(Builder& g, const StepInputs& in) const {
  Builder one;
  one.set_quantizer(inner_->quantizer());
  const StepInputs own{one.input(graph::InputSlot::Tokens, g.dim(in.tokens, 0)),
                       one.input(graph::InputSlot::Positions, g.dim(in.positions, 0)),
                       one.input(graph::InputSlot::LogitRows, g.dim(in.logit_rows, 0))};
  one.output(inner_->build(one, own));
  return append_rank_graph(one.graph(), in, spec_, slices_, g);
}

Value ShardedModel::build(Builder& g, const StepInputs& in) const {
  try {
    return build_rank(g, in);
  } catch (const Error& e) {
    fail(info_.architecture, " (", parallelism_name(spec_.parallelism), "=", spec_.degree,
         "): ", e.what());
  }
}

std::vector<LayerStateSpec> ShardedModel::layer_states() const {
  return rank_layer_states(inner_->layer_states(), spec_);
}

}  // namespace lathe::shard
