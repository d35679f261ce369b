#include "graph/executor.h"

#include <algorithm>

#include "core/error.h"

namespace lathe::graph {
namespace {

constexpr size_t kAlign = 64;

size_t round_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Nodes that compute into memory of their own; the others are bound (inputs), constant
// (weights) or views of another node (reshapes).
bool has_buffer(Op op) {
  return op != Op::Input && op != Op::Weight && op != Op::Reshape;
}

std::span<const int32_t> input_data(const StepData& step, const Node& n) {
  switch (static_cast<InputSlot>(n.params.input_slot)) {
    case InputSlot::Tokens:
      return step.tokens;
    case InputSlot::Positions:
      return step.positions;
    case InputSlot::LogitRows:
      return step.logit_rows;
  }
  fail("internal: input slot ", n.params.input_slot);
}

// The step input an Input node is bound to, checked against the shape it was built for.
std::span<const int32_t> checked_input(const StepData& step, const Node& n) {
  const std::span<const int32_t> data = input_data(step, n);
  if (static_cast<int64_t>(data.size()) != n.shape[0])
    fail("internal: step input of ", data.size(), " values for a graph built for ", n.shape[0]);
  return data;
}

// One buffer to place: live from node `first` to node `last`, both included.
struct Interval {
  size_t first, last, bytes, offset = 0;
  int32_t node;
  bool workspace;
};

// Greedy placement, largest first: each buffer goes to the lowest offset where it overlaps
// no placed buffer that is live at the same time. Returns the arena size.
size_t place(std::vector<Interval>& items) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return items[a].bytes > items[b].bytes; });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t i : order) {
    Interval& it = items[i];
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping live buffers
    for (size_t j : placed) {
      const Interval& o = items[j];
      if (o.first <= it.last && it.first <= o.last) busy.emplace_back(o.offset, o.offset + o.bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto [b, e] : busy) {
      if (offset + it.bytes <= b) break;
      offset = std::max(offset, e);
    }
    it.offset = offset;
    total = std::max(total, offset + it.bytes);
    placed.push_back(i);
  }
  return total;
}

}  // namespace

Plan::Plan(Graph graph, const Backend& backend, int threads, int64_t max_context)
    : graph_(std::move(graph)), backend_(backend), threads_(threads), max_context_(max_context) {
  const size_t n = graph_.nodes.size();
  for (const Node& node : graph_.nodes)
    if (!backend_.supports(node))
      fail("backend ", backend_.name(), " cannot run ", op_name(node.op), " ", node.name);
  // Liveness: a buffer lives from its node to its last reader (through views); outputs to
  // the end.
  std::vector<int32_t> root(n);
  std::vector<size_t> last(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = graph_.nodes[i];
    root[i] = node.op == Op::Reshape ? root[static_cast<size_t>(node.inputs[0].id)]
                                     : static_cast<int32_t>(i);
    last[i] = i;
    for (Value in : node.inputs)
      if (in.valid()) {
        const size_t r = static_cast<size_t>(root[static_cast<size_t>(in.id)]);
        last[r] = std::max(last[r], i);
      }
  }
  for (Value out : graph_.outputs) last[static_cast<size_t>(root[static_cast<size_t>(out.id)])] = n;
  std::vector<Interval> items;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = graph_.nodes[i];
    if (has_buffer(node.op)) {
      const size_t bytes =
          round_up(static_cast<size_t>(shape_numel(node.shape)) * dtype_size(node.dtype));
      items.push_back({i, last[i], bytes, 0, static_cast<int32_t>(i), false});
      unplanned_bytes_ += bytes;
    }
    const size_t ws = backend_.workspace_floats(graph_, node, threads, max_context);
    if (ws > 0)
      items.push_back({i, i, round_up(ws * sizeof(float)), 0, static_cast<int32_t>(i), true});
  }
  arena_bytes_ = place(items);
  arena_storage_.assign(arena_bytes_ + kAlign, 0);
  const auto base = reinterpret_cast<uintptr_t>(arena_storage_.data());
  arena_ = arena_storage_.data() + (round_up(base) - base);

  values_.resize(n);
  workspace_.assign(n, nullptr);
  for (const Interval& it : items) {
    const Node& node = graph_.nodes[static_cast<size_t>(it.node)];
    if (it.workspace)
      workspace_[static_cast<size_t>(it.node)] = reinterpret_cast<float*>(arena_ + it.offset);
    else
      values_[static_cast<size_t>(it.node)] =
          Tensor::wrap(node.dtype, node.shape, arena_ + it.offset);
  }
  args_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = graph_.nodes[i];
    if (node.op == Op::Weight) values_[i] = node.constant;
    if (node.op == Op::Input) values_[i] = Tensor::wrap(DType::I32, node.shape, nullptr);
    if (node.op == Op::Reshape) {
      const Tensor& src = values_[static_cast<size_t>(node.inputs[0].id)];
      values_[i] = Tensor::wrap(node.dtype, node.shape, const_cast<void*>(src.data<void>()));
    }
    for (Value in : node.inputs)
      args_[i].push_back(in.valid() ? &values_[static_cast<size_t>(in.id)] : nullptr);
  }
}

void Plan::run(ThreadPool& pool, const StepData& step, const Trace* trace) {
  if (pool.size() > threads_)
    fail("internal: a pool of ", pool.size(), " threads on a plan for ", threads_);
  if (step.max_context > max_context_)
    fail("internal: a step over caches of ", step.max_context, " positions on a plan for ",
         max_context_);
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const Node& node = graph_.nodes[i];
    if (node.op == Op::Input) {
      values_[i].rebind(const_cast<int32_t*>(checked_input(step, node).data()));
    } else if (has_buffer(node.op)) {
      backend_.run({node, args_[i], values_[i], workspace_[i], step, pool});
    }
    if (trace && *trace && !node.name.empty()) (*trace)(node.name, values_[i]);
  }
}

EagerRunner::EagerRunner(const Backend& backend, ThreadPool& pool, const StepData& step,
                         const Trace* trace)
    : backend_(backend), pool_(pool), step_(step), trace_(trace) {}

Builder::OnNode EagerRunner::hook() {
  return [this](const Graph& g, Value v) { run(g, v); };
}

Builder::OnNode EagerRunner::name_hook() {
  return [this](const Graph& g, Value v) {
    if (trace_ && *trace_) (*trace_)(g.at(v).name, values_.at(static_cast<size_t>(v.id)));
  };
}

void EagerRunner::run(const Graph& g, Value v) {
  const Node& node = g.at(v);
  if (!backend_.supports(node))
    fail("backend ", backend_.name(), " cannot run ", op_name(node.op), " ", node.name);
  values_.resize(g.nodes.size());
  Tensor& out = values_[static_cast<size_t>(v.id)];
  switch (node.op) {
    case Op::Input:
      out = Tensor::wrap(DType::I32, node.shape,
                         const_cast<int32_t*>(checked_input(step_, node).data()));
      break;
    case Op::Weight:
      out = node.constant;
      break;
    case Op::Reshape: {
      const Tensor& src = values_[static_cast<size_t>(node.inputs[0].id)];
      out = Tensor::wrap(node.dtype, node.shape, const_cast<void*>(src.data<void>()));
      break;
    }
    default: {
      out = Tensor::zeros(node.dtype, node.shape);
      std::vector<const Tensor*> args;
      for (Value in : node.inputs)
        args.push_back(in.valid() ? &values_[static_cast<size_t>(in.id)] : nullptr);
      std::vector<float> ws(backend_.workspace_floats(g, node, pool_.size(), step_.max_context));
      backend_.run({node, args, out, ws.empty() ? nullptr : ws.data(), step_, pool_});
    }
  }
}

}  // namespace lathe::graph
