#include "shard/plan.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "core/error.h"
#include "graph/quantize.h"
#include "models/engine.h"
#include "shard/tp_analysis.h"

namespace lathe::shard {

using graph::Graph;
using graph::Node;
using graph::Op;
using graph::Value;
using Role = Layout::Role;

const char* parallelism_name(Parallelism p) {
  switch (p) {
    case Parallelism::Tensor:
      return "tp";
    case Parallelism::Expert:
      return "ep";
  }
  return "?";
}

const char* kind_name(ShardKind k) {
  switch (k) {
    case ShardKind::Column:
      return "column";
    case ShardKind::Row:
      return "row";
    case ShardKind::Replicated:
      return "replicated";
    case ShardKind::Vocab:
      return "vocab";
    case ShardKind::Expert:
      return "expert";
    case ShardKind::Unused:
      return "unused";
  }
  return "?";
}

int64_t TensorShard::extent(int rank) const {
  int64_t n = 0;
  for (const Range& r : ranks.at(static_cast<size_t>(rank))) n += r.size();
  return n;
}

double TensorShard::fraction(int rank) const {
  const int64_t whole = shape.empty() ? 1 : shape.at(static_cast<size_t>(dim));
  return whole == 0 ? 0.0 : static_cast<double>(extent(rank)) / static_cast<double>(whole);
}

int64_t ShardPlan::count(ShardKind k) const {
  return std::count_if(tensors.begin(), tensors.end(),
                       [&](const TensorShard& t) { return t.kind == k; });
}

namespace detail {

// Where a node sits, for messages: its name, else the next named node built after it (names
// carry the layer: "the linear before layer.0.q").
std::string label(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (!n.name.empty()) return n.name;
  for (size_t j = i + 1; j < g.nodes.size(); ++j)
    if (!g.nodes[j].name.empty()) return cat("the ", op_name(n.op), " before ", g.nodes[j].name);
  return cat("node %", i, " (", op_name(n.op), ")");
}

// What tensor parallelism runs whole on every rank (recurrent mixers, DeepSeek's indexer,
// Gemma3n's AltUp: their weights and state replicated), one line each; empty when nothing.
std::vector<std::string> replicated_parts(const Graph& g) {
  std::map<std::string, int> count;
  for (const Node& n : g.nodes) switch (n.op) {
      case Op::Ssd:
        ++count["Mamba2 mixers (ssd)"];
        break;
      case Op::GatedDeltaRule:
        ++count["Gated DeltaNet mixers (gated_delta_rule)"];
        break;
      case Op::CausalConv:
        ++count["causal convolutions (causal_conv)"];
        break;
      case Op::Indexer:
        ++count["DeepSeek sparse attention indexers (indexer)"];
        break;
      case Op::BatchMatmul:
        ++count["per-token matrix products (batch_matmul, Gemma3n's AltUp)"];
        break;
      default:
        break;
    }
  std::vector<std::string> out;
  for (const auto& [what, k] : count)
    out.push_back(cat(k, " ", what,
                      " run whole on every rank: their weights and state are replicated, not "
                      "split"));
  return out;
}

// The Linear whose output reaches `v` through ops that act on each head or element alone (a
// reshape, rotary, a norm, a clamp, a scale); -1 when another op comes first.
int32_t source_linear(const Graph& g, Value v) {
  while (v.valid()) {
    const Node& n = g.at(v);
    switch (n.op) {
      case Op::Linear:
        return v.id;
      case Op::Slice:  // a part of each head (Qwen3.5's per-head [q | gate])
        if (g.at(n.inputs[0]).shape.size() != 3) return -1;
        v = n.inputs[0];
        break;
      case Op::Reshape:
      case Op::Rope:
      case Op::RmsNorm:
      case Op::LayerNorm:
      case Op::Clamp:
      case Op::Scale:
        v = n.inputs[0];
        break;
      default:
        return -1;
    }
  }
  return -1;
}

// The Linear that makes the graph's logits (through a cap, scale or divide); -1 if none.
int32_t head_linear(const Graph& g) {
  if (g.outputs.empty()) return -1;
  Value v = g.outputs[0];
  while (v.valid()) {
    const Node& n = g.at(v);
    if (n.op == Op::Linear) return v.id;
    if (n.op != Op::Softcap && n.op != Op::Scale && n.op != Op::Divide && n.op != Op::Reshape)
      return -1;
    v = n.inputs[0];
  }
  return -1;
}

// The features of one token's row of a value: its elements over its first dimension.
int64_t row_features(const Node& n) {
  return n.shape.empty() || n.shape[0] == 0 ? 0 : shape_numel(n.shape) / n.shape[0];
}

TpAnalysis analyze_tp(const Graph& g) {
  TpAnalysis a;
  const size_t n = g.nodes.size();
  std::vector<std::vector<int32_t>> consumers(n);
  for (size_t i = 0; i < n; ++i)
    for (Value v : g.nodes[i].inputs)
      if (v.valid()) consumers[static_cast<size_t>(v.id)].push_back(static_cast<int32_t>(i));
  // Column-parallel Linears: those feeding an attention's q, k, v (by heads) or an MLP's
  // activation (by features). Their outputs are split until a Linear reads them (row).
  // MLA's q is the per-head product of a projection joined with its rotary part
  // (concat(head_linear(q_nope), rope(q_pe))): each side's projection is split by heads.
  std::function<void(Value, Role, int64_t)> mark = [&](Value v, Role role, int64_t units) {
    if (const int32_t l = source_linear(g, v); l >= 0) {
      a.column.emplace(l, Column{role, units});
    } else if (v.valid() && g.at(v).op == Op::Concat) {
      for (Value in : g.at(v).inputs) mark(in, role, units);
    } else if (v.valid() && g.at(v).op == Op::HeadLinear) {
      mark(g.at(v).inputs[0], role, units);
    }
  };
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    if (node.op == Op::Attention) {
      // A KV-shared layer (no k and v: Gemma4's) reads another layer's split cache, so its q
      // is split by heads as well.
      const int64_t heads = g.at(node.inputs[0]).shape.at(1);
      mark(node.inputs[0], Role::ColumnHeads, heads);
      for (int k = 1; k < 3; ++k)
        if (node.inputs[k].valid())
          mark(node.inputs[k], Role::ColumnKv, g.at(node.inputs[k]).shape.at(1));
    } else if (node.op == Op::ActMul && g.at(node.inputs[0]).shape == g.at(node.inputs[1]).shape &&
               source_linear(g, node.inputs[0]) >= 0 && source_linear(g, node.inputs[1]) >= 0) {
      // Both sides projections (gate and up); a gate times another value (Gemma4's per-layer
      // input) stays whole.
      const int64_t features = row_features(g.at(node.inputs[0]));
      mark(node.inputs[0], Role::ColumnFeatures, features);
      mark(node.inputs[1], Role::ColumnFeatures, features);
    } else if (node.op == Op::Activation) {
      for (int32_t c : consumers[i])
        if (g.nodes[static_cast<size_t>(c)].op == Op::Linear &&
            g.nodes[static_cast<size_t>(c)].inputs[0].id == static_cast<int32_t>(i))
          mark(node.inputs[0], Role::ColumnFeatures, row_features(g.at(node.inputs[0])));
    }
  }
  const int32_t head = head_linear(g);
  std::vector<Split> st(n);
  auto s = [&](Value v) { return v.valid() ? st[static_cast<size_t>(v.id)] : Split{}; };
  auto role = [&](Value w, Role r, int64_t units, Role unit = Role::ColumnFeatures) {
    if (w.valid() && g.at(w).op == Op::Weight) a.weight[w.id] = {r, units, unit};
  };
  for (size_t i = 0; i < n && a.problem.empty(); ++i) {
    const Node& node = g.nodes[i];
    bool any = false;
    for (Value v : node.inputs) any = any || s(v).split();
    Split out;
    switch (node.op) {
      case Op::Linear: {
        const Value x = node.inputs[0], w = node.inputs[1];
        const Value b = node.inputs.size() > 2 ? node.inputs[2] : Value{};
        if (s(x).split()) {
          role(w, Role::Row, s(x).units, s(x).unit);  // its sum over ranks: the all-reduce
        } else if (auto c = a.column.find(static_cast<int32_t>(i)); c != a.column.end()) {
          role(w, c->second.role, c->second.units, c->second.role);
          role(b, c->second.role, c->second.units, c->second.role);
          out = {c->second.units, c->second.role};
        } else if (static_cast<int32_t>(i) == head) {
          role(w, Role::Vocab, 0);
        }
        break;
      }
      case Op::Embedding:
        role(node.inputs[0], Role::Vocab, 0);
        break;
      case Op::Reshape: {
        out = s(node.inputs[0]);
        // Heads regrouped [n, heads, d] -> [n, groups, heads * d / groups] (DeepseekV4's
        // grouped output projection): split by groups, each a whole number of heads.
        const Shape& in = g.at(node.inputs[0]).shape;
        if (out.split() && in.size() == 3 && in[1] == out.units && node.shape.size() == 3 &&
            node.shape[0] == in[0] && node.shape[1] != out.units && node.shape[1] > 0 &&
            out.units % node.shape[1] == 0)
          out.units = node.shape[1];
        break;
      }
      case Op::Rope:
      case Op::Clamp:
      case Op::Scale:
      case Op::Activation:
      case Op::Softcap:
      case Op::Divide:
      case Op::Xielu:
        out = s(node.inputs[0]);
        break;
      case Op::RmsNorm:
      case Op::LayerNorm: {
        out = s(node.inputs[0]);
        if (!out.split()) break;
        // A norm within one unit (Qwen3's per-head q_norm over head_dim) runs on each rank
        // as it is; one over several units (OLMo2's q_norm over all heads) needs the whole
        // row: its weight stays whole and the rank gathers the projection first.
        const Node& x = g.at(node.inputs[0]);
        const int64_t per_unit = row_features(x) / out.units;
        if (x.shape.back() > per_unit) {
          for (size_t k = 1; k < node.inputs.size(); ++k)
            role(node.inputs[k], Role::CrossHeadNorm, out.units);
          ++a.cross_head_norms[out.unit == Role::ColumnHeads ? "the q projection"
                               : out.unit == Role::ColumnKv  ? "the k or v projection"
                                                             : "an MLP's features"];
        }
        break;
      }
      case Op::ActMul:
      case Op::Add:
      case Op::Binary:
      case Op::Concat: {
        out = s(node.inputs[0]);
        for (Value v : node.inputs)
          if (v.valid() && s(v).units != out.units)
            a.problem = cat(label(g, i), " (", op_name(node.op),
                            ") joins a value split across ranks with one that is not");
        // Joined along the last dimension, split along the heads before it (MLA's q and k).
        if (node.op == Op::Concat && out.split() &&
            (node.shape.size() != 3 || node.shape[1] != out.units))
          a.problem = cat(label(g, i), " (concat) joins split values along their split dimension");
        break;
      }
      case Op::Slice:  // a part of each head's features: split as they are
        out = s(node.inputs[0]);
        if (out.split() && (node.shape.size() != 3 || node.shape[1] != out.units))
          a.problem = cat(label(g, i), " (slice) cuts a value split across ranks across its split");
        break;
      case Op::HeadLinear:  // MLA's per-head products: the rank's heads of the weight
        out = s(node.inputs[0]);
        if (out.split() && g.at(node.inputs[1]).shape.at(0) != out.units)
          a.problem = cat(label(g, i), " (head_linear) reads heads its weight does not hold");
        role(node.inputs[1], Role::HeadsVector, out.units);
        break;
      case Op::Attention: {
        if (!any) break;
        for (int k = 0; k < 3; ++k)
          if (node.inputs[k].valid() && !s(node.inputs[k]).split())
            a.problem = cat(label(g, i), ": its q, k and v are not all split by heads");
        out = {node.shape.at(1), Role::ColumnHeads};
        role(node.inputs[3], Role::HeadsVector, out.units);  // ALiBi slopes (computed)
        role(node.inputs[4], Role::HeadsVector, out.units);  // attention sinks
        break;
      }
      default:
        if (any)
          a.problem = cat(label(g, i), " (", op_name(node.op),
                          ") reads a value split across ranks, which the plan cannot split");
        break;
    }
    st[i] = out;
  }
  for (Value v : g.outputs)
    if (a.problem.empty() && s(v).split())
      a.problem = cat(label(g, static_cast<size_t>(v.id)), " is left split across ranks");
  a.split = std::move(st);
  a.head = head;
  return a;
}

// The fetch-log record holding a tensor's bytes, by address.
struct Span {
  const uint8_t* begin;
  const uint8_t* end;
  size_t record;
};

}  // namespace detail

using namespace detail;

Layout analyze(const Model& model, const FetchLog& log) {
  const auto* gm = dynamic_cast<const GraphModel*>(&model);
  if (!gm) fail(model.info().architecture, " builds no step graph, so it has no shard plan");
  if (gm->quantizer())
    fail("internal: a shard plan is made from a model loaded without --quantize");
  Layout L;
  L.architecture = model.info().architecture;
  L.kv_heads = model.info().kv_heads;
  L.head_dim = model.info().head_dim;
  L.states = gm->layer_states();
  ThreadPool pool(1);
  Context ctx{&pool, false, false};
  const Graph g = Engine(*gm, ctx).build_graph(2, 1);

  for (const Node& node : g.nodes)
    if (node.op == Op::Attention && L.heads == 0) {
      L.heads = node.shape.at(1);
      if (node.inputs[1].valid()) L.kv_heads = g.at(node.inputs[1]).shape.at(1);
    }
  const TpAnalysis tp = analyze_tp(g);
  L.tp_unsupported = tp.problem;
  if (L.tp_unsupported.empty()) L.notes = replicated_parts(g);
  for (const auto& [what, norms] : tp.cross_head_norms)
    L.notes.push_back(cat(norms, " norm", norms == 1 ? "" : "s", " of ", what,
                          " act across all its heads (OLMo2's q_norm and k_norm): each weight is "
                          "kept whole on every rank, and each rank all-gathers the projection "
                          "before the norm, keeping its own heads after it"));

  // Expert parallelism: every Experts node's matrices, expert by expert.
  std::map<int32_t, int64_t> expert_of;  // Weight node -> expert
  std::set<int32_t> expert_matrices, routers;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    if (node.op == Op::Route && node.inputs[0].valid() && g.at(node.inputs[0]).op == Op::Linear)
      routers.insert(g.at(node.inputs[0]).inputs[1].id);
    if (node.op != Op::Experts) continue;
    const int64_t experts = (static_cast<int64_t>(node.inputs.size()) - 2) / graph::kExpertInputs;
    if (L.experts == 0) L.experts = experts;
    if (experts != L.experts)
      L.ep_unsupported = cat(label(g, i), " has ", experts, " experts where an earlier layer has ",
                             L.experts, ": experts split across ranks need equal counts");
    for (size_t k = 2; k < node.inputs.size(); ++k) {
      if (!node.inputs[k].valid()) continue;
      expert_of[node.inputs[k].id] = static_cast<int64_t>(k - 2) / graph::kExpertInputs;
      if ((k - 2) % graph::kExpertInputs < 3) expert_matrices.insert(node.inputs[k].id);
    }
  }
  if (L.experts == 0) L.ep_unsupported = "it has no experts";
  // Tensor parallelism splits the experts the same way (attention and dense MLPs by heads
  // and features around them).
  if (L.experts > 0 && L.tp_unsupported.empty()) {
    L.tp_unsupported = L.ep_unsupported;
    if (L.tp_unsupported.empty())
      L.notes.push_back(cat("the ", L.experts,
                            " experts of each layer are split by experts, a block per rank as "
                            "expert parallelism splits them; an all-reduce adds the ranks' "
                            "shares"));
  }

  // Which Weight nodes --quantize would quantize: Linear and expert matrices, not routers.
  std::set<int32_t> quantized;
  for (const Node& node : g.nodes)
    if (node.op == Op::Linear && !routers.count(node.inputs[1].id))
      quantized.insert(node.inputs[1].id);
  quantized.insert(expert_matrices.begin(), expert_matrices.end());

  // The node that reads each Weight (the Linear, norm, embedding), named in messages.
  std::vector<size_t> consumer(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) consumer[i] = i;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    for (Value v : g.nodes[i].inputs)
      if (v.valid()) consumer[static_cast<size_t>(v.id)] = i;
  }
  // Each Weight node found among the fetched tensors by address.
  std::vector<Span> spans;
  for (size_t r = 0; r < log.records.size(); ++r) {
    const Tensor& t = log.records[r].tensor;
    const auto* p = t.data<uint8_t>();
    if (p) spans.push_back({p, p + t.nbytes(), r});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  L.quantizable.assign(log.records.size(), false);
  const graph::WeightQuantizer rule(DType::Q8_0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    if (node.op != Op::Weight || !node.constant.defined() || node.constant.numel() == 0) continue;
    const auto* p = node.constant.data<uint8_t>();
    auto it = std::upper_bound(spans.begin(), spans.end(), p,
                               [](const uint8_t* q, const Span& s) { return q < s.begin; });
    if (it == spans.begin()) continue;  // a constant the model made (ALiBi slopes)
    --it;
    if (p + node.constant.nbytes() > it->end) continue;
    const Tensor& whole = log.records[it->record].tensor;
    const int64_t rows = whole.rank() == 0 ? 1 : std::max<int64_t>(whole.dim(0), 1);
    const size_t row = whole.nbytes() / static_cast<size_t>(rows);
    const size_t offset = static_cast<size_t>(p - it->begin);
    Layout::Use u;
    u.record = it->record;
    u.first = static_cast<int64_t>(offset / row);
    u.count = offset % row == 0 && node.constant.nbytes() % row == 0
                  ? static_cast<int64_t>(node.constant.nbytes() / row)
                  : 0;  // part of a row: an expert's matrix inside a stacked tensor
    const int32_t id = static_cast<int32_t>(i);
    if (auto t = tp.weight.find(id); t != tp.weight.end()) {
      u.tp = t->second.role;
      u.units = t->second.units;
      u.unit = t->second.unit;
    }
    if (auto e = expert_of.find(id); e != expert_of.end()) {
      u.ep = u.tp = Role::Expert;  // under tensor parallelism too, split by experts
      u.expert = e->second;
    }
    u.node = label(g, consumer[i]);
    if (quantized.count(id) && rule.applies(whole)) L.quantizable[it->record] = true;
    L.uses.push_back(std::move(u));
  }
  return L;
}

Range expert_block(int64_t experts, int n, int r) {
  return {r * experts / n, (r + 1) * experts / n};
}

namespace {

std::string divisors(int64_t n) {
  std::string out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out += cat(out.empty() ? "" : ", ", d);
  return out;
}

int expert_owner(int64_t e, int64_t experts, int n) {
  int r = 0;
  while (e >= expert_block(experts, n, r).end) ++r;
  return r;
}

// N equal blocks of [first, first + count): rank r's.
Range block(int64_t first, int64_t count, int n, int r) {
  const int64_t b = count / n;
  return {first + r * b, first + (r + 1) * b};
}

const char* units_word(Role r) {
  switch (r) {
    case Role::ColumnHeads:
    case Role::HeadsVector:
      return "heads";
    case Role::ColumnKv:
      return "kv heads";
    default:
      return "features";
  }
}

// Appends r to v, merging it with the last range when they touch.
void append(std::vector<Range>& v, Range r) {
  if (!v.empty() && v.back().end == r.begin)
    v.back().end = r.end;
  else
    v.push_back(r);
}

void replicate(TensorShard& t, int n, int64_t size) {
  t.kind = ShardKind::Replicated;
  t.ranks.assign(static_cast<size_t>(n), {Range{0, size}});
}

}  // namespace

ShardPlan make_plan(const Layout& L, const Checkpoint& ckpt, const FetchLog& log,
                    Parallelism parallelism, int degree) {
  const int n = degree;
  if (n < 1) fail("a shard plan needs at least 1 rank, got ", n);
  const bool tp = parallelism == Parallelism::Tensor;
  const std::string& blocked = tp ? L.tp_unsupported : L.ep_unsupported;
  if (n > 1 && !blocked.empty())
    fail(L.architecture, ": no ", tp ? "tensor" : "expert", "-parallel plan: ", blocked);
  ShardPlan plan;
  plan.architecture = L.architecture;
  plan.parallelism = parallelism;
  plan.degree = n;
  if (n > 1 && tp) plan.notes = L.notes;
  if (n > 1 && (!tp || L.experts > 0)) {
    if (L.experts < n)
      fail(L.architecture, ": ", L.experts, " experts across ", n,
           " ranks: each rank must hold at least one expert (degrees up to ", L.experts, ")");
    for (int64_t e = 0; e < L.experts; ++e)
      plan.expert_rank.push_back(expert_owner(e, L.experts, n));
  }

  std::map<std::string, size_t> record_of;          // tensor -> its first fetch record
  std::map<std::string, std::string> companion_of;  // a scale grid -> its matrix
  for (size_t r = 0; r < log.records.size(); ++r) {
    const auto& names = log.records[r].names;
    record_of.emplace(names.at(0), r);
    for (size_t k = 1; k < names.size(); ++k) companion_of.emplace(names[k], names[0]);
  }
  std::map<std::string, std::vector<const Layout::Use*>> uses;
  for (const Layout::Use& u : L.uses) uses[log.records[u.record].names.at(0)].push_back(&u);
  // What was fetched gives the bytes; a copy the graph reads instead (a Conv1D transposed, the
  // q, k, v gathered from an interleaved tensor) gives the geometry.
  const std::map<std::string, size_t> fetch_of = record_of;
  for (const auto& [name, us] : uses) record_of[name] = us.front()->record;
  std::map<std::string, int64_t> split_size;  // the split dimension's size as loaded

  // Counts that do not divide, gathered so that the most basic one is reported: heads before
  // kv heads before features.
  std::vector<std::pair<int, std::string>> refusals;
  auto refuse = [&](Role role, std::string message, bool row = false) {
    const int rank = role == Role::ColumnHeads || role == Role::HeadsVector ? 0
                     : role == Role::ColumnKv                               ? 1
                                                                            : 2;
    refusals.emplace_back(2 * rank + row, std::move(message));  // a projection before its output
  };

  std::map<std::string, size_t> index;
  for (const std::string& name : ckpt.tensor_names()) {
    const SafetensorsEntry& e = ckpt.entry(name);
    TensorShard t;
    t.name = name;
    t.dtype = e.dtype_name;
    t.shape = e.shape;
    t.bytes = e.end - e.begin;
    t.kind = ShardKind::Unused;
    t.ranks.assign(static_cast<size_t>(n), {});
    index[name] = plan.tensors.size();
    plan.tensors.push_back(std::move(t));
  }

  for (TensorShard& t : plan.tensors) {
    auto rec = record_of.find(t.name);
    if (rec == record_of.end()) continue;  // Unused, or a companion (below)
    const FetchRecord& record = log.records[rec->second];
    const FetchRecord& fetched = log.records[fetch_of.at(t.name)];
    const Tensor& lt = record.tensor;
    const DType loaded_dtype = fetched.tensor.dtype();
    t.loaded = loaded_dtype == DType::MXFP4 ? Loaded::Mxfp4
               : loaded_dtype == DType::FP8 ? Loaded::Fp8
               : fetched.matrix             ? Loaded::Matrix
                                            : Loaded::Vector;
    t.loaded_numel = fetched.tensor.numel();
    t.quantizable = L.quantizable[rec->second];
    // Rows of the matrix as the graph reads it ([out, in]; a Conv1D stores [in, out]).
    const bool transposed = record.transposed && t.shape.size() == 2;
    const int64_t rows = t.shape.empty() ? 1 : transposed ? t.shape[1] : t.shape[0];
    split_size[t.name] = rows;
    std::vector<const Layout::Use*> us = uses[t.name];
    std::vector<Role> roles;
    for (const auto* u : us) roles.push_back(tp ? u->tp : u->ep);
    auto all = [&](std::initializer_list<Role> set) {
      return std::all_of(roles.begin(), roles.end(),
                         [&](Role r) { return std::find(set.begin(), set.end(), r) != set.end(); });
    };
    auto any = [&](Role r) { return std::find(roles.begin(), roles.end(), r) != roles.end(); };
    std::string what;
    for (const auto* u : us)
      if (what.find(u->node) == std::string::npos) what += (what.empty() ? "" : ", ") + u->node;
    t.use = what;
    replicate(t, n, t.shape.empty() ? 1 : t.shape[0]);
    if (n == 1) continue;
    if (us.empty()) {
      // Rearranged or copied at load (a transposed Conv1D, per-head interleaved QKV, gpt-oss's
      // interleaved experts): the graph reads a copy. A stack of the experts is still split
      // by experts; anything else is kept whole.
      if (L.experts > 0 && lt.rank() >= 2 && rows == L.experts) {
        t.kind = ShardKind::Expert;
        for (int r = 0; r < n; ++r) t.ranks[r] = {expert_block(L.experts, n, r)};
        t.note = "rearranged at load; split by experts along dimension 0";
      } else {
        t.note = "the step graph reads a copy the loader made of it: kept whole";
      }
    } else if (any(Role::Expert)) {
      if (!all({Role::Expert})) {
        t.note = "read by experts and by other nodes: kept whole";
        continue;
      }
      t.kind = ShardKind::Expert;
      t.ranks.assign(static_cast<size_t>(n), {});
      // One expert's tensor (all its rows go to the expert's rank), or a stack of experts
      // [experts, ..] whose row e is expert e's (an expert's gate inside it is part of a row).
      std::vector<int> owner(static_cast<size_t>(rows), -1);
      for (const auto* u : us) {
        const int r = plan.expert_rank.at(static_cast<size_t>(u->expert));
        for (int64_t row = u->first; row < u->first + std::max<int64_t>(u->count, 1); ++row) {
          int& o = owner.at(static_cast<size_t>(row));
          if (o >= 0 && o != r)
            fail(L.architecture, ": ", t.name, ": row ", row, " is read by experts of ranks ", o,
                 " and ", r, "; the plan cannot split it by experts");
          o = r;
        }
      }
      for (int64_t row = 0; row < rows; ++row) {
        const int o = owner[static_cast<size_t>(row)];
        if (o < 0)
          fail(L.architecture, ": ", t.name, ": row ", row,
               " is read by no expert; the plan cannot split it by experts");
        append(t.ranks[static_cast<size_t>(o)], {row, row + 1});
      }
    } else if (all({Role::Replicated, Role::CrossHeadNorm})) {
      if (any(Role::CrossHeadNorm))
        t.note = "a norm across all heads: kept whole, the projection gathered before it";
    } else if (all({Role::Vocab, Role::Replicated})) {
      if (any(Role::Replicated)) {
        t.note = "a vocabulary table also read whole by another node: kept whole";
      } else if (rows % n != 0) {
        t.note = cat("vocabulary of ", rows, " does not divide by ", n, ": kept whole");
      } else {
        t.kind = ShardKind::Vocab;
        for (int r = 0; r < n; ++r) t.ranks[r] = {block(0, rows, n, r)};
      }
    } else if (any(Role::Row)) {
      const auto* u = us.front();
      if (!all({Role::Row}) || us.size() != 1 || u->first != 0 || u->count != lt.dim(0) ||
          !record.rows_from.empty())
        fail(L.architecture, ": ", t.name, " is read as ", what,
             ": the plan splits a row-parallel tensor only when one Linear reads all of it");
      if (u->units % n != 0) {
        refuse(
            u->unit,
            cat(L.architecture, ": ", t.name, ": ", u->units, " ", units_word(u->unit), " across ",
                n, " ranks: the input of ", u->node, " must divide evenly (degrees that divide ",
                u->units, ": ", divisors(u->units), ")"),
            true);
        continue;
      }
      t.kind = ShardKind::Row;
      t.dim = lt.rank() - 1;
      const int64_t cols = lt.dim(-1);
      split_size[t.name] = cols;
      for (int r = 0; r < n; ++r) t.ranks[r] = {block(0, cols, n, r)};
    } else if (all({Role::ColumnHeads, Role::ColumnKv, Role::ColumnFeatures, Role::HeadsVector})) {
      // Each part (q, k, v of a fused tensor) split on its own; a rank takes its block of
      // every part. A part gathered from an interleaved tensor (GPT-NeoX's per head [q k v])
      // maps its rows back to the tensor's: there whole head groups are contiguous rows.
      std::vector<const Layout::Use*> parts = us;
      auto key = [](const Layout::Use* u) { return std::tuple(u->record, u->first, u->count); };
      std::sort(parts.begin(), parts.end(),
                [&](const auto* a, const auto* b) { return key(a) < key(b); });
      parts.erase(std::unique(parts.begin(), parts.end(),
                              [&](const auto* a, const auto* b) { return key(a) == key(b); }),
                  parts.end());
      // The tensor's ranges that loaded rows [r.begin, r.end) of a part's record come from.
      auto source = [&](const Layout::Use* p, Range r) {
        const std::vector<int64_t>& from = log.records[p->record].rows_from;
        std::vector<Range> out;
        for (int64_t i = r.begin; i < r.end; ++i) {
          const int64_t row = from.empty() ? i : from.at(static_cast<size_t>(i));
          if (!out.empty() && out.back().end == row)
            ++out.back().end;
          else
            out.push_back({row, row + 1});
        }
        return out;
      };
      std::vector<int> cover(static_cast<size_t>(rows), 0);
      for (const auto* p : parts) {
        if (p->count == 0)
          fail(L.architecture, ": ", t.name, ": ", p->node,
               " reads part of a row of it; the plan cannot split it");
        for (const Range& r : source(p, {p->first, p->first + p->count}))
          for (int64_t i = r.begin; i < r.end; ++i) ++cover.at(static_cast<size_t>(i));
      }
      for (int64_t i = 0; i < rows; ++i)
        if (cover[static_cast<size_t>(i)] != 1)
          fail(L.architecture, ": ", t.name, ": its parts (", what, ") read row ", i, " ",
               cover[static_cast<size_t>(i)], " times; the plan cannot split it");
      t.kind = ShardKind::Column;
      t.ranks.assign(static_cast<size_t>(n), {});
      for (const auto* p : parts) {
        const int64_t units = p->units;
        const Role role = tp ? p->tp : p->ep;
        std::vector<Range> mine(static_cast<size_t>(n));  // each rank's rows of this part
        if (role == Role::ColumnKv && units < n && n % units == 0) {
          // Fewer kv heads than ranks: each rank takes the kv head its q heads use (rank r
          // holds q heads r*H/N ..; with H/N dividing the group H/kv, all of them use kv head
          // r*kv/N), so each kv head is held by N/kv ranks.
          const int64_t per_head = p->count / units;
          for (int r = 0; r < n; ++r) {
            const int64_t h = static_cast<int64_t>(r) * units / n;
            mine[r] = {p->first + h * per_head, p->first + (h + 1) * per_head};
          }
          t.note = cat(units, " kv heads across ", n, " ranks: each kv head replicated on ",
                       n / units, " ranks, each rank holding the one its q heads use");
        } else if (units % n != 0) {
          refuse(
              role,
              cat(L.architecture, ": ", t.name, ": ", units, " ", units_word(role), " across ", n,
                  " ranks: the ", units_word(role), " of ", p->node,
                  " must divide evenly (degrees that divide ", units, ": ", divisors(units), ")",
                  role == Role::ColumnKv ? "; or the degree a multiple of them, each kv head then "
                                           "replicated"
                                         : ""));
          continue;
        } else {
          for (int r = 0; r < n; ++r) mine[r] = block(p->first, p->count, n, r);
        }
        for (int r = 0; r < n; ++r)
          for (const Range& s : source(p, mine[r])) t.ranks[r].push_back(s);
      }
      // In the tensor's order, touching ranges joined: [q | k | v] gives a rank its block of
      // q, of k and of v; per-head [q k v] gives it one block of whole heads.
      for (auto& rs : t.ranks) {
        std::sort(rs.begin(), rs.end(),
                  [](const Range& a, const Range& b) { return a.begin < b.begin; });
        std::vector<Range> joined;
        for (const Range& r : rs) append(joined, r);
        rs = std::move(joined);
      }
    } else {
      fail(L.architecture, ": ", t.name, " is read as ", what,
           " in ways that split it differently; the plan cannot split it");
    }
    // Decided on the loaded [out, in] matrix; a Conv1D stores it [in, out].
    if (transposed && t.kind != ShardKind::Replicated) t.dim = 1 - t.dim;
  }

  if (!refusals.empty()) {
    std::stable_sort(refusals.begin(), refusals.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    fail(refusals.front().second,
         refusals.size() > 1 ? cat(" (", refusals.size() - 1, " more tensors do not divide)") : "");
  }

  // Stored sizes differ from loaded ones for MXFP4 (16 bytes per 32 values) and FP8 (32
  // codes and an f32 scale per 32 values, of a stored grid's blocks): express the
  // ranges in the stored tensor's units. Scale grids follow their matrix the same way.
  auto rescale = [&](TensorShard& t, const TensorShard& main, int64_t loaded) {
    const int64_t stored = t.shape.at(static_cast<size_t>(main.dim));
    t.kind = main.kind;
    t.dim = main.dim;
    t.ranks = main.ranks;
    if (stored == loaded) return;
    const int64_t ratio = stored == 0 ? 0 : loaded / stored;
    for (auto& rs : t.ranks)
      for (Range& r : rs) {
        if (ratio == 0 || loaded % stored != 0 || r.begin % ratio != 0 || r.end % ratio != 0)
          fail(L.architecture, ": ", t.name, ": its ", stored, " blocks along dimension ", main.dim,
               " do not divide at the ranks' boundaries of ", main.name, " (", r.begin, " .. ",
               r.end, " of ", loaded, ")");
        r = {r.begin / ratio, r.end / ratio};
      }
  };
  for (TensorShard& t : plan.tensors) {
    auto rec = record_of.find(t.name);
    if (rec != record_of.end() && t.kind != ShardKind::Replicated && n > 1) {
      TensorShard main = t;
      rescale(t, main, split_size.at(t.name));
    }
    if (t.shape.empty() && t.kind == ShardKind::Replicated)
      for (auto& rs : t.ranks) rs = {Range{0, 1}};
  }
  for (TensorShard& t : plan.tensors) {
    auto c = companion_of.find(t.name);
    if (c == companion_of.end() || record_of.count(t.name)) continue;
    const TensorShard& main = plan.tensors[index.at(c->second)];
    const int64_t size = t.shape.empty() ? 1 : t.shape[0];
    if (main.kind == ShardKind::Replicated || main.kind == ShardKind::Unused ||
        t.shape.size() <= static_cast<size_t>(main.dim)) {
      replicate(t, n, size);
      if (main.kind == ShardKind::Unused) t.kind = ShardKind::Unused;
    } else {
      rescale(t, main, main.shape.at(static_cast<size_t>(main.dim)));
    }
    t.use = cat("the scales of ", main.name);
  }

  plan.rank_bytes.assign(static_cast<size_t>(n), 0);
  for (const TensorShard& t : plan.tensors)
    for (int r = 0; r < n; ++r)
      plan.rank_bytes[r] += static_cast<uint64_t>(static_cast<double>(t.bytes) * t.fraction(r));
  return plan;
}

Tensor slice(const Tensor& t, const TensorShard& shard, int rank) {
  if (t.shape() != shard.shape)
    fail("internal: slice of ", shard.name, ": tensor ", shape_str(t.shape()), ", plan ",
         shape_str(shard.shape));
  Shape shape = t.shape();
  const auto& ranges = shard.ranks.at(static_cast<size_t>(rank));
  if (shape.empty()) return ranges.empty() ? Tensor() : t.clone();
  const size_t d = static_cast<size_t>(shard.dim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i) outer *= shape[i];
  for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  const size_t unit = static_cast<size_t>(inner) * dtype_size(t.dtype());
  shape[d] = shard.extent(rank);
  Tensor out = Tensor::zeros(t.dtype(), shape);
  const auto* src = t.data<uint8_t>();
  auto* dst = static_cast<uint8_t*>(out.mut<void>());
  const int64_t whole = t.shape()[d];
  for (int64_t o = 0; o < outer; ++o)
    for (const Range& r : ranges) {
      const size_t bytes = static_cast<size_t>(r.size()) * unit;
      std::memcpy(dst, src + (static_cast<size_t>(o * whole + r.begin)) * unit, bytes);
      dst += bytes;
    }
  return out;
}

}  // namespace lathe::shard
