#include "graph/executor.h"

#include <algorithm>
#include <chrono>
#include <utility>

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
  switch (n.attr<InputAttrs>().slot) {
    case InputSlot::Tokens:
      return step.tokens;
    case InputSlot::Positions:
      return step.positions;
    case InputSlot::LogitRows:
      return step.logit_rows;
  }
  fail("internal: input slot ", static_cast<int64_t>(n.attr<InputAttrs>().slot));
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

bool live_together(const Interval& a, const Interval& b) {
  return a.first <= b.last && b.first <= a.last;
}

// The buffers `g` needs, in node order (a node's output, then its scratch), each with the
// span of nodes it lives through: from its node (a grouped Linear's: its group's first) to its
// last reader (through views); the graph's outputs to the end.
std::vector<Interval> buffers(const Graph& g, const Backend& backend, int threads,
                              int64_t max_context,
                              const std::vector<std::vector<int32_t>>& groups) {
  const size_t n = g.nodes.size();
  std::vector<size_t> start(n);
  for (size_t i = 0; i < n; ++i) start[i] = i;
  for (const std::vector<int32_t>& group : groups)
    for (int32_t member : group)
      start[static_cast<size_t>(member)] = static_cast<size_t>(group.front());
  std::vector<int32_t> root(n);
  std::vector<size_t> last(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    root[i] = node.op == Op::Reshape ? root[static_cast<size_t>(node.inputs[0].id)]
                                     : static_cast<int32_t>(i);
    last[i] = i;
    for (Value in : node.inputs)
      if (in.valid()) {
        const size_t r = static_cast<size_t>(root[static_cast<size_t>(in.id)]);
        last[r] = std::max(last[r], i);
      }
  }
  for (Value out : g.outputs) last[static_cast<size_t>(root[static_cast<size_t>(out.id)])] = n;
  std::vector<Interval> items;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    if (has_buffer(node.op)) {
      const size_t bytes =
          round_up(static_cast<size_t>(shape_numel(node.shape)) * dtype_size(node.dtype));
      items.push_back({start[i], last[i], bytes, 0, static_cast<int32_t>(i), false});
    }
    const size_t ws = backend.workspace_floats(g, node, threads, max_context);
    if (ws > 0)
      items.push_back(
          {start[i], start[i], round_up(ws * sizeof(float)), 0, static_cast<int32_t>(i), true});
  }
  return items;
}

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
      if (live_together(o, it)) busy.emplace_back(o.offset, o.offset + o.bytes);
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

void check_support(const Graph& g, const Backend& backend) {
  for (const Node& node : g.nodes) check_supported(backend, g, node);
}

// A Linear node whose weight (and bias, if any) are constants: all it reads besides x.
bool constant_linear(const Graph& g, const Node& node) {
  if (node.op != Op::Linear || g.at(node.inputs[1]).op != Op::Weight) return false;
  return node.inputs.size() < 3 || !node.inputs[2].valid() || g.at(node.inputs[2]).op == Op::Weight;
}

void check_groups(const Graph& g, const Backend& backend,
                  const std::vector<std::vector<int32_t>>& groups) {
  if (groups.empty()) return;
  const std::vector<std::vector<int32_t>> allowed = linear_groups(g, backend);
  std::vector<bool> taken(allowed.size(), false);
  for (const std::vector<int32_t>& group : groups) {
    const auto it = std::find(allowed.begin(), allowed.end(), group);
    if (it == allowed.end())
      fail("schedule group of ", group.size(), " nodes from node ",
           group.empty() ? -1 : group.front(), " is not a group of Linear nodes the ",
           backend.name(), " backend runs as one");
    if (taken[static_cast<size_t>(it - allowed.begin())])
      fail("schedule group from node ", group.front(), " is listed twice");
    taken[static_cast<size_t>(it - allowed.begin())] = true;
  }
}

}  // namespace

std::vector<std::vector<int32_t>> linear_groups(const Graph& g, const Backend& backend) {
  const KernelChoices* choices = backend.choices();
  std::vector<std::vector<int32_t>> open;  // by x, the group being filled
  std::vector<std::vector<int32_t>> groups;
  auto close = [&](std::vector<int32_t>& group) {
    if (group.size() >= 2 && choices && choices->fuses_linears(g, group)) groups.push_back(group);
    group.clear();
  };
  std::vector<int32_t> group_of(g.nodes.size(), -1);  // x's node -> index into `open`
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    if (!constant_linear(g, node)) continue;
    const Node& w = g.at(node.inputs[1]);
    int32_t& slot = group_of[static_cast<size_t>(node.inputs[0].id)];
    if (slot < 0) {
      slot = static_cast<int32_t>(open.size());
      open.emplace_back();
    }
    std::vector<int32_t>& group = open[static_cast<size_t>(slot)];
    if (!group.empty()) {
      const Node& first_w = g.at(g.nodes[static_cast<size_t>(group.front())].inputs[1]);
      if (first_w.dtype != w.dtype || first_w.shape[1] != w.shape[1] ||
          group.size() == kMaxLinearGroup)
        close(group);
    }
    group.push_back(static_cast<int32_t>(i));
  }
  for (std::vector<int32_t>& group : open) close(group);
  std::sort(groups.begin(), groups.end());
  return groups;
}

Schedule plan_schedule(const Graph& g, const Backend& backend, int threads, int64_t max_context,
                       const std::vector<std::vector<int32_t>>& groups) {
  check_support(g, backend);
  check_groups(g, backend, groups);
  std::vector<Interval> items = buffers(g, backend, threads, max_context, groups);
  Schedule s;
  s.arena_bytes = place(items);
  for (const Interval& it : items) s.slots.push_back({it.node, it.workspace, it.offset, it.bytes});
  s.variants.assign(g.nodes.size(), 0);
  s.groups = groups;
  return s;
}

void check_schedule(const Graph& g, const Backend& backend, int threads, int64_t max_context,
                    const Schedule& s, bool exact) {
  check_groups(g, backend, s.groups);
  const std::vector<Interval> items = buffers(g, backend, threads, max_context, s.groups);
  if (s.slots.size() != items.size())
    fail("schedule of ", s.slots.size(), " buffers for a graph that needs ", items.size());
  uint64_t end_to_end = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const Schedule::Slot& slot = s.slots[i];
    const Interval& it = items[i];
    if (slot.node != it.node || slot.workspace != it.workspace)
      fail("schedule buffer ", i, " is node ", slot.node, "'s, the graph's is node ", it.node,
           "'s");
    if (slot.bytes < it.bytes || (exact && slot.bytes != it.bytes))
      fail("schedule buffer ", i, " (node ", it.node, ") holds ", slot.bytes,
           " bytes, the graph needs ", it.bytes);
    if (slot.offset % kAlign != 0 || slot.offset > s.arena_bytes ||
        slot.bytes > s.arena_bytes - slot.offset)
      fail("schedule buffer ", i, " at ", slot.offset, " (", slot.bytes,
           " bytes) is not an aligned place in an arena of ", s.arena_bytes);
    end_to_end += slot.bytes;  // no overflow: each slot is within the arena
  }
  if (s.arena_bytes > end_to_end)
    fail("schedule arena of ", s.arena_bytes, " bytes, more than its buffers' ", end_to_end);
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t j = i + 1; j < items.size(); ++j) {
      const Schedule::Slot &a = s.slots[i], &b = s.slots[j];
      if (live_together(items[i], items[j]) && a.offset < b.offset + b.bytes &&
          b.offset < a.offset + a.bytes)
        fail("schedule buffers of nodes ", a.node, " and ", b.node, " overlap while both are live");
    }
  if (!s.variants.empty()) {
    if (s.variants.size() != g.nodes.size())
      fail("schedule variants for ", s.variants.size(), " nodes in a graph of ", g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (s.variants[i] < 0 || s.variants[i] >= variant_count(backend, g, g.nodes[i]))
        fail("schedule variant ", s.variants[i], " for node ", i, ", which has ",
             variant_count(backend, g, g.nodes[i]));
  }
}

Plan::Plan(Graph graph, const Backend& backend, int threads, int64_t max_context,
           const Schedule* given)
    : graph_(std::move(graph)), backend_(backend), threads_(threads), max_context_(max_context) {
  const size_t n = graph_.nodes.size();
  if (given) {
    check_support(graph_, backend_);
    check_schedule(graph_, backend_, threads, max_context, *given, false);
    schedule_ = *given;
    if (schedule_.variants.empty()) schedule_.variants.assign(n, 0);
  } else {
    schedule_ =
        plan_schedule(graph_, backend_, threads, max_context, linear_groups(graph_, backend_));
  }
  for (const Node& node : graph_.nodes)
    if (has_buffer(node.op))
      unplanned_bytes_ +=
          round_up(static_cast<size_t>(shape_numel(node.shape)) * dtype_size(node.dtype));
  arena_bytes_ = schedule_.arena_bytes;
  arena_storage_.assign(arena_bytes_ + kAlign, 0);
  const auto base = reinterpret_cast<uintptr_t>(arena_storage_.data());
  arena_ = arena_storage_.data() + (round_up(base) - base);

  values_.resize(n);
  workspace_.assign(n, nullptr);
  for (const Schedule::Slot& slot : schedule_.slots) {
    const Node& node = graph_.nodes[static_cast<size_t>(slot.node)];
    if (slot.workspace)
      workspace_[static_cast<size_t>(slot.node)] = reinterpret_cast<float*>(arena_ + slot.offset);
    else
      values_[static_cast<size_t>(slot.node)] =
          Tensor::wrap(node.dtype, node.shape, arena_ + slot.offset);
  }
  group_at_.assign(n, kAlone);
  for (size_t gi = 0; gi < schedule_.groups.size(); ++gi)
    for (int32_t member : schedule_.groups[gi])
      group_at_[static_cast<size_t>(member)] =
          member == schedule_.groups[gi].front() ? static_cast<int32_t>(gi) : kInGroup;
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

double Plan::time_node(ThreadPool& pool, size_t i, int variant) {
  const Node& node = graph_.nodes.at(i);
  if (!has_buffer(node.op)) return 0;
  for (const Tensor* in : args_[i])
    if (in && !in->data<void>()) fail("internal: timing node ", i, ", which reads a step input");
  const StepData none{};
  const auto start = std::chrono::steady_clock::now();
  backend_.run({node, args_[i], values_[i], workspace_[i], none, pool, variant});
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Plan::time_group(ThreadPool& pool, size_t g) {
  const StepData none{};
  const auto start = std::chrono::steady_clock::now();
  run_group(pool, g, none);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Plan::time_nodes(ThreadPool& pool, const std::vector<bool>& which) {
  if (which.size() != graph_.nodes.size()) fail("internal: time_nodes over another graph");
  const StepData none{};
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    if (!which[i]) continue;
    const Node& node = graph_.nodes[i];
    for (const Tensor* in : args_[i])
      if (in && !in->data<void>()) fail("internal: timing node ", i, ", which reads a step input");
    if (group_at_[i] >= 0) {
      run_group(pool, static_cast<size_t>(group_at_[i]), none);
    } else if (has_buffer(node.op) && group_at_[i] == kAlone) {
      backend_.run({node, args_[i], values_[i], workspace_[i], none, pool, schedule_.variants[i]});
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The NodeArgs of a group's nodes, in an array on the stack (a planned step allocates nothing).
template <size_t... I>
void run_linears(const Backend& backend, std::index_sequence<I...>, const int32_t* nodes,
                 const Graph& graph, const std::vector<std::vector<const Tensor*>>& args,
                 std::vector<Tensor>& values, const std::vector<float*>& workspace,
                 const std::vector<int32_t>& variants, const StepData& step, ThreadPool& pool) {
  const NodeArgs group[] = {
      NodeArgs{graph.nodes[static_cast<size_t>(nodes[I])], args[static_cast<size_t>(nodes[I])],
               values[static_cast<size_t>(nodes[I])], workspace[static_cast<size_t>(nodes[I])],
               step, pool, variants[static_cast<size_t>(nodes[I])]}...};
  backend.choices()->run_linears(group);
}

void Plan::run_group(ThreadPool& pool, size_t g, const StepData& step) {
  const std::vector<int32_t>& nodes = schedule_.groups.at(g);
  static_assert(kMaxLinearGroup == 4);
  switch (nodes.size()) {
    case 2:
      return run_linears(backend_, std::make_index_sequence<2>{}, nodes.data(), graph_, args_,
                         values_, workspace_, schedule_.variants, step, pool);
    case 3:
      return run_linears(backend_, std::make_index_sequence<3>{}, nodes.data(), graph_, args_,
                         values_, workspace_, schedule_.variants, step, pool);
    case 4:
      return run_linears(backend_, std::make_index_sequence<4>{}, nodes.data(), graph_, args_,
                         values_, workspace_, schedule_.variants, step, pool);
  }
  fail("internal: a Linear group of ", nodes.size(), " nodes");
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
    } else if (group_at_[i] >= 0) {
      run_group(pool, static_cast<size_t>(group_at_[i]), step);
    } else if (has_buffer(node.op) && group_at_[i] == kAlone) {
      backend_.run({node, args_[i], values_[i], workspace_[i], step, pool, schedule_.variants[i]});
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
  check_supported(backend_, g, node);
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

namespace lathe {

void check_supported(const Backend& b, const graph::Graph& g, const graph::Node& n) {
  if (b.supports(g, n)) return;
  std::string dtypes;
  for (graph::Value v : n.inputs)
    dtypes += cat(dtypes.empty() ? "" : ", ", v.valid() ? dtype_name(g.at(v).dtype) : "-");
  fail("the ", b.name(), " backend has no kernel for ", graph::op_name(n.op), " (",
       n.name.empty() ? "unnamed" : n.name, ") of ", dtypes.empty() ? "no" : dtypes, " inputs");
}

}  // namespace lathe
