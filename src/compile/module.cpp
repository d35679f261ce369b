#include "compile/module.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include "core/error.h"
#include "io/json.h"

namespace lathe::compile {
namespace {

// FNV-1a, as Graph::hash: stable across runs and machines.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Nodes that can share one measurement: the same op over the same shapes and dtypes.
std::string signature(const graph::Graph& g, const graph::Node& node) {
  std::string s = graph::op_name(node.op);
  auto add = [&](const graph::Node& n) {
    s += '|';
    for (int64_t d : n.shape) s += std::to_string(d) + ',';
    s += dtype_name(n.dtype);
  };
  add(node);
  for (graph::Value in : node.inputs)
    if (in.valid()) add(g.at(in));
  return s;
}

// Times runs for the compiler: the best of three (one for runs over 0.25 s) after one to warm
// up, each after reading evict_bytes on each thread of the pool, so that the run finds its
// weights where a step finds them, not in the cores' own caches. A step streams every other
// layer's weights through them between two uses of one matrix; a node timed again and again
// alone would keep a matrix of up to L2's size there, and look faster than it runs in a step
// (fusing two such matrices, which no longer fit together, would then look slower). A step
// streams no more than the graph's weights, so that bounds the bytes read (a tiny model's
// weights stay in the caches through its steps, and reading 8 MiB per timing was 82% of its
// compile).
class Timer {
 public:
  static constexpr size_t kEvictBytes = size_t{8} << 20;
  Timer(ThreadPool& pool, size_t evict_bytes)
      : pool_(pool),
        junk_(std::min(evict_bytes, kEvictBytes) / sizeof(uint64_t) *
                  static_cast<size_t>(pool.size()),
              1) {}

  template <class F>
  double best(const F& once) {
    auto run = [&] {
      evict();
      return once();
    };
    const int reps = run() > 0.25 ? 1 : 3;  // a big prefill matmul: one more run is enough
    double best = run();
    for (int r = 1; r < reps; ++r) best = std::min(best, run());
    return best;
  }

 private:
  void evict() {
    if (junk_.empty()) return;
    const size_t words = junk_.size() / static_cast<size_t>(pool_.size());  // per thread
    std::atomic<uint64_t> sum{0};
    pool_.parallel_for(
        pool_.size(), 1,
        [&](int64_t t0, int64_t t1) {
          uint64_t s = 0;
          for (size_t i = static_cast<size_t>(t0) * words; i < static_cast<size_t>(t1) * words; ++i)
            s += junk_[i];
          sum += s;
        },
        1);
    if (sum.load() != junk_.size()) fail("internal: the compiler's eviction buffer changed");
  }

  ThreadPool& pool_;
  std::vector<uint64_t> junk_;  // each thread reads its share before a timed run
};

// Times every Linear group of `g` (those of the same shapes once) run as one against one by
// one with `variants`; records each measurement in `m` and returns the groups to fuse.
std::vector<std::vector<int32_t>> choose_groups(const graph::Graph& g, const Backend& backend,
                                                ThreadPool& pool, Timer& timer, int64_t max_context,
                                                const std::vector<int32_t>& variants, Module& m,
                                                Work& work) {
  const std::vector<std::vector<int32_t>> candidates = graph::linear_groups(g, backend);
  if (candidates.empty()) return {};
  graph::Schedule all = graph::plan_schedule(g, backend, pool.size(), max_context, candidates);
  ++work.plans;
  all.variants = variants;
  graph::Plan grouped(g, backend, pool.size(), max_context, &all);
  std::map<std::string, bool> decided;  // by the group's signature: fuse?
  std::vector<std::vector<int32_t>> chosen;
  for (size_t gi = 0; gi < candidates.size(); ++gi) {
    std::string sig;
    for (int32_t i : candidates[gi]) sig += signature(g, g.nodes[static_cast<size_t>(i)]) + ';';
    auto it = decided.find(sig);
    if (it == decided.end()) {
      Fused f{candidates[gi], "", 0, 0, false};
      for (int32_t i : candidates[gi]) {
        const graph::Node& node = g.nodes[static_cast<size_t>(i)];
        const graph::Node& w = g.at(node.inputs[1]);
        f.matrices += (f.matrices.empty() ? "" : " + ") + std::to_string(w.shape[0]) + "x" +
                      std::to_string(w.shape[1]) + " " + std::string(dtype_name(w.dtype));
        f.separate_seconds += timer.best([&] {
          return grouped.time_node(pool, static_cast<size_t>(i), variants[static_cast<size_t>(i)]);
        });
      }
      f.fused_seconds = timer.best([&] { return grouped.time_group(pool, gi); });
      ++work.groups_timed;
      f.kept = f.fused_seconds < 0.97 * f.separate_seconds;
      m.fused.push_back(f);
      it = decided.emplace(sig, f.kept).first;
    }
    if (it->second) chosen.push_back(candidates[gi]);
  }
  return chosen;
}

template <class T>
T field(const Json& j, const char* key, const std::string& origin) {
  if (!j.is_object() || !j.contains(key)) fail(origin, ": missing field ", key);
  try {
    return j.at(key).get<T>();
  } catch (const std::exception&) {
    fail(origin, ": field ", key, " has the wrong type");
  }
}

}  // namespace

std::string hex_hash(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string Flags::json() const {
  const Json j = {{"format", kModuleFormat},
                  {"backend", backend},
                  {"kernels", kernels},
                  {"threads", threads},
                  {"max_context", max_context},
                  {"tokens", tokens},
                  {"rows", rows},
                  {"shard", shard}};
  return j.dump(2) + "\n";
}

std::string Flags::hash() const {
  return hex_hash(fnv1a(json()));
}

std::string Module::json() const {
  Json slots = Json::array();
  for (const graph::Schedule::Slot& s : schedule.slots)
    slots.push_back({s.node, s.workspace ? 1 : 0, s.offset, s.bytes});
  Json tuned_nodes = Json::array();
  for (const Tuned& t : tuned)
    tuned_nodes.push_back(
        {{"node", t.node}, {"name", t.name}, {"variant", t.variant}, {"seconds", t.seconds}});
  Json fused_groups = Json::array();
  for (const Fused& f : fused)
    fused_groups.push_back({{"nodes", f.nodes},
                            {"matrices", f.matrices},
                            {"separate_seconds", f.separate_seconds},
                            {"fused_seconds", f.fused_seconds},
                            {"kept", f.kept}});
  const Json j = {{"format", kModuleFormat},
                  {"graph_hash", graph_hash},
                  {"flags_hash", flags.hash()},
                  {"flags", parse_json(flags.json(), "flags")},
                  {"arena_bytes", schedule.arena_bytes},
                  {"slots", slots},
                  {"variants", schedule.variants},
                  {"groups", schedule.groups},
                  {"tuned", tuned_nodes},
                  {"fused", fused_groups},
                  {"checked",
                   {{"planned_seconds", checked.planned_seconds},
                    {"chosen_seconds", checked.chosen_seconds},
                    {"kept", checked.kept}}},
                  {"compile_seconds", compile_seconds}};
  return j.dump(1) + "\n";
}

Module Module::parse(const std::string& text, const std::string& origin) {
  const Json j = parse_json(text, origin);
  if (field<int>(j, "format", origin) != kModuleFormat)
    fail(origin, ": module format ", j.at("format").dump(), ", this lathe reads ", kModuleFormat);
  Module m;
  m.graph_hash = field<std::string>(j, "graph_hash", origin);
  const Json& f = j.at("flags");
  m.flags.backend = field<std::string>(f, "backend", origin);
  m.flags.kernels = field<std::string>(f, "kernels", origin);
  m.flags.threads = field<int>(f, "threads", origin);
  m.flags.max_context = field<int64_t>(f, "max_context", origin);
  m.flags.tokens = field<int64_t>(f, "tokens", origin);
  m.flags.rows = field<int64_t>(f, "rows", origin);
  m.flags.shard = field<std::string>(f, "shard", origin);
  if (m.flags.hash() != field<std::string>(j, "flags_hash", origin))
    fail(origin, ": flags_hash does not match its flags");
  m.schedule.arena_bytes = field<uint64_t>(j, "arena_bytes", origin);
  const Json& slots = j.at("slots");
  if (!slots.is_array()) fail(origin, ": slots is not a list");
  for (const Json& s : slots) {
    if (!s.is_array() || s.size() != 4)
      fail(origin, ": a slot is not [node, workspace, offset, bytes]");
    try {
      m.schedule.slots.push_back(
          {s[0].get<int32_t>(), s[1].get<int>() != 0, s[2].get<uint64_t>(), s[3].get<uint64_t>()});
    } catch (const std::exception&) {
      fail(origin, ": a slot holds something other than non-negative integers");
    }
  }
  m.schedule.variants = field<std::vector<int32_t>>(j, "variants", origin);
  m.schedule.groups = field<std::vector<std::vector<int32_t>>>(j, "groups", origin);
  auto list = [&](const char* key) {
    Json l = field<Json>(j, key, origin);
    if (!l.is_array()) fail(origin, ": ", key, " is not a list");
    return l;
  };
  for (const Json& t : list("tuned"))
    m.tuned.push_back({field<int32_t>(t, "node", origin), field<std::string>(t, "name", origin),
                       field<int32_t>(t, "variant", origin),
                       field<std::vector<double>>(t, "seconds", origin)});
  for (const Json& f : list("fused"))
    m.fused.push_back({field<std::vector<int32_t>>(f, "nodes", origin),
                       field<std::string>(f, "matrices", origin),
                       field<double>(f, "separate_seconds", origin),
                       field<double>(f, "fused_seconds", origin), field<bool>(f, "kept", origin)});
  const Json& c = field<Json>(j, "checked", origin);
  m.checked = {field<double>(c, "planned_seconds", origin),
               field<double>(c, "chosen_seconds", origin), field<bool>(c, "kept", origin)};
  m.compile_seconds = field<double>(j, "compile_seconds", origin);
  return m;
}

namespace {

// Times the step's leading Linear nodes and groups (keep_leading_nodes) in step order with the
// planner's schedule (`plan`, its variants set back to the default) and with m.schedule; keeps
// m.schedule only when 3% faster, else takes the planner's.
void check_choices(const graph::Graph& g, const Backend& backend, ThreadPool& pool, Timer& timer,
                   int64_t max_context, graph::Plan& plan, Module& m, Work& work) {
  std::vector<bool> which(g.nodes.size(), false);
  bool chose = m.schedule.groups != plan.schedule().groups;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    which[i] = variant_count(backend, g, g.nodes[i]) > 1;
    chose = chose || m.schedule.variants[i] != 0;
    plan.set_variant(i, 0);
  }
  const std::vector<std::vector<int32_t>> groups = graph::linear_groups(g, backend);
  for (const std::vector<int32_t>& group : groups)
    for (int32_t node : group) which[static_cast<size_t>(node)] = true;
  keep_leading_nodes(g, groups, which, kCheckBytes);
  if (!chose) {  // the choices are the planner's: nothing to check
    m.checked.kept = true;
    return;
  }
  graph::Plan chosen(g, backend, pool.size(), max_context, &m.schedule);
  ++work.plans;
  ++work.steps_timed;
  m.checked.planned_seconds = timer.best([&] { return plan.time_nodes(pool, which); });
  m.checked.chosen_seconds = timer.best([&] { return chosen.time_nodes(pool, which); });
  m.checked.kept = m.checked.chosen_seconds < 0.97 * m.checked.planned_seconds;
  if (!m.checked.kept) m.schedule = plan.schedule();
}

}  // namespace

void keep_leading_nodes(const graph::Graph& g, const std::vector<std::vector<int32_t>>& groups,
                        std::vector<bool>& which, size_t bytes) {
  std::vector<int32_t> group_last(g.nodes.size(), -1);
  for (const std::vector<int32_t>& group : groups)
    for (int32_t node : group)
      group_last[static_cast<size_t>(node)] = *std::max_element(group.begin(), group.end());
  size_t kept = 0;
  int64_t open_until = -1;  // the last node of a group begun
  bool any = false;
  for (size_t i = 0; i < g.nodes.size() && i < which.size(); ++i) {
    if (!which[i]) continue;
    if (any && kept >= bytes && static_cast<int64_t>(i) > open_until) {
      std::fill(which.begin() + static_cast<std::ptrdiff_t>(i), which.end(), false);
      return;
    }
    any = true;
    const graph::Node& node = g.nodes[i];
    if (node.op == graph::Op::Linear) kept += g.at(node.inputs[1]).constant.nbytes();
    open_until = std::max<int64_t>(open_until, group_last[i]);
  }
}

Module compile_module(const graph::Graph& bucket, const Backend& backend, ThreadPool& pool,
                      const Flags& flags, Work& work) {
  const auto start = std::chrono::steady_clock::now();
  graph::Plan plan(bucket, backend, pool.size(), flags.max_context);
  ++work.plans;
  size_t weight_bytes = 0;
  for (const graph::Node& node : bucket.nodes)
    if (node.op == graph::Op::Weight) weight_bytes += node.constant.nbytes();
  Timer timer(pool, weight_bytes);
  Module m;
  m.graph_hash = hex_hash(bucket.hash());
  m.flags = flags;
  std::map<std::string, Tuned> measured;  // by signature
  for (size_t i = 0; i < bucket.nodes.size(); ++i) {
    const graph::Node& node = bucket.nodes[i];
    const int n = variant_count(backend, bucket, node);
    if (n <= 1) continue;
    const std::string sig = signature(bucket, node);
    auto it = measured.find(sig);
    if (it == measured.end()) {
      Tuned t{
          static_cast<int32_t>(i), node.name.empty() ? graph::op_name(node.op) : node.name, 0, {}};
      for (int v = 0; v < n; ++v) {
        t.seconds.push_back(timer.best([&] { return plan.time_node(pool, i, v); }));
        ++work.nodes_timed;
      }
      for (int v = 1; v < n; ++v)
        if (t.seconds[static_cast<size_t>(v)] < 0.97 * t.seconds[0] &&
            t.seconds[static_cast<size_t>(v)] < t.seconds[static_cast<size_t>(t.variant)])
          t.variant = v;
      it = measured.emplace(sig, std::move(t)).first;
      m.tuned.push_back(it->second);
    }
    plan.set_variant(i, it->second.variant);
  }
  m.schedule = plan.schedule();
  const std::vector<std::vector<int32_t>> groups =
      choose_groups(bucket, backend, pool, timer, flags.max_context, m.schedule.variants, m, work);
  if (groups != m.schedule.groups) {
    m.schedule = graph::plan_schedule(bucket, backend, pool.size(), flags.max_context, groups);
    ++work.plans;
    m.schedule.variants = plan.schedule().variants;
  }
  check_choices(bucket, backend, pool, timer, flags.max_context, plan, m, work);
  m.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

}  // namespace lathe::compile
