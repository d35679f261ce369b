// The compiled mode (src/compile/): a step run on a compiled schedule gives the bits of an
// eager run whatever kernel variants it picked; a module is compiled once and then read from
// the compile cache, which the warm path shows by doing none of the costly work (counted, not
// timed); a module made for another graph, other kernels or a lying module.json is never used.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>

#include "backends/cpu/backend.h"
#include "backends/cpu/isa.h"
#include "compile/cache.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "engine/fixtures.h"
#include "io/json.h"

namespace lathe {
namespace {

// Gives every node that has variants a non-default one, in turn (variant (i + salt) mod n), so
// that every way of running a Linear is checked against eager execution; with an odd salt,
// every group of Linear nodes the backend can run as one is run so.
class RoundRobinSource : public graph::ScheduleSource {
 public:
  explicit RoundRobinSource(int salt) : salt_(salt) {}
  const graph::Schedule* schedule_for(const graph::Graph& bucket, const Backend& backend,
                                      ThreadPool& pool, int64_t max_context, int64_t,
                                      int64_t) override {
    const auto groups =
        salt_ % 2 ? graph::linear_groups(bucket, backend) : std::vector<std::vector<int32_t>>{};
    grouped += static_cast<int64_t>(groups.size());
    auto s = std::make_unique<graph::Schedule>(
        graph::plan_schedule(bucket, backend, pool.size(), max_context, groups));
    for (size_t i = 0; i < bucket.nodes.size(); ++i) {
      const int n = variant_count(backend, bucket, bucket.nodes[i]);
      s->variants[i] = static_cast<int32_t>((static_cast<int>(i) + salt_) % n);
      varied += n > 1;
    }
    kept_.push_back(std::move(s));
    return kept_.back().get();
  }
  int64_t varied = 0, grouped = 0;

 private:
  int salt_;
  std::vector<std::unique_ptr<graph::Schedule>> kept_;
};

// A prompt's logits for every row, then two decode steps, with every named node traced.
struct Outputs {
  Tensor prompt, decode[2];
  std::map<std::string, Tensor> traced;
};

Outputs run(const Model& model, Context ctx, const std::vector<int32_t>& prompt) {
  Outputs o;
  Trace trace = [&](const std::string& name, const Tensor& t) { o.traced[name] = t.clone(); };
  KVCache cache = model.new_cache(32);
  o.prompt = model.forward(ctx, prompt, cache, true, &trace);
  for (int32_t i = 0; i < 2; ++i) {
    const int32_t next = 3 + i;
    o.decode[i] = model.forward(ctx, {&next, 1}, cache, false);
  }
  return o;
}

void expect_same(const Outputs& a, const Outputs& b) {
  EXPECT_TRUE(same_bits(a.prompt, b.prompt));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(a.decode[i], b.decode[i])) << "decode " << i;
  ASSERT_EQ(a.traced.size(), b.traced.size());
  for (const auto& [name, t] : a.traced) EXPECT_TRUE(same_bits(t, b.traced.at(name))) << name;
}

class CompiledFixture : public ::testing::TestWithParam<std::string> {
 protected:
  ThreadPool pool{2};
};

TEST_P(CompiledFixture, EveryKernelVariantGivesTheEagerBits) {
  auto l = load(GetParam());
  const auto prompt = ids(11, l->model->info().vocab_size, 5);  // bucket 16: a larger plan
  const Outputs eager = run(*l->model, {&pool, false, true}, prompt);
  for (int salt = 0; salt < 3; ++salt) {
    RoundRobinSource source(salt);
    Context ctx{&pool, false, false};
    ctx.compiled = &source;
    expect_same(eager, run(*l->model, ctx, prompt));
    EXPECT_GT(source.varied, 0) << "no node had variants to choose from";
    if (salt == 1 && GetParam() == "llama_tied_gqa@q8_0") {
      EXPECT_GT(source.grouped, 0) << "no Linear group was run as one";
    }
  }
}

// Q, k and v (and gate and up) read the same x: the groups a step may run as one (quantized
// weights only).
TEST(Compiled, LinearsThatReadTheSameXAreGroups) {
  for (const char* name : {"llama_tied_gqa@q8_0", "llama_tied_gqa@q4_0"}) {
    auto l = load(name);
    ThreadPool pool(2);
    Context ctx{&pool, false, false};
    const graph::Graph g = Engine(l->graph(), ctx).build_graph(8, 1);
    const auto groups = graph::linear_groups(g, cpu_backend(false));
    ASSERT_FALSE(groups.empty()) << name;
    std::map<size_t, int> sizes;
    for (const auto& group : groups) {
      ++sizes[group.size()];
      for (int32_t i : group) {
        EXPECT_EQ(g.nodes[static_cast<size_t>(i)].op, graph::Op::Linear);
        EXPECT_EQ(g.nodes[static_cast<size_t>(i)].inputs[0].id,
                  g.nodes[static_cast<size_t>(group.front())].inputs[0].id);
      }
    }
    const int layers = static_cast<int>(l->model->info().num_layers);
    EXPECT_EQ(sizes[3], layers) << name << ": q, k and v of each layer";
    EXPECT_EQ(sizes[2], layers) << name << ": gate and up of each layer";
    EXPECT_TRUE(graph::linear_groups(g, cpu_backend(true)).empty()) << "the reference fuses none";
  }
  // f32 and bf16 weights are not fused (measured slower or no faster end to end).
  auto l = load("llama_tied_gqa");
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  EXPECT_TRUE(
      graph::linear_groups(Engine(l->graph(), ctx).build_graph(8, 1), cpu_backend(false)).empty());
}

// The step check times a prefix of the step's Linear nodes: the first ones up to a weight
// budget, never ending inside a group (q, k and v; gate and up), all of them under a large one.
TEST(Compiled, TheStepCheckTimesLeadingNodesAndWholeGroups) {
  auto l = load("llama_tied_gqa@q8_0");
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  const graph::Graph g = Engine(l->graph(), ctx).build_graph(8, 1);
  const auto groups = graph::linear_groups(g, cpu_backend(false));
  ASSERT_FALSE(groups.empty());
  std::vector<bool> linears(g.nodes.size(), false);
  std::vector<size_t> order;  // the Linear nodes in node order
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == graph::Op::Linear) linears[i] = true, order.push_back(i);
  auto bytes_of = [&](size_t i) { return g.at(g.nodes[i].inputs[1]).constant.nbytes(); };
  const auto& first = groups.front();  // the first layer's q, k and v
  ASSERT_EQ(static_cast<size_t>(first.front()), order.front());

  // A budget the first node's weights meet alone: its whole group, then nothing.
  std::vector<bool> which = linears;
  compile::keep_leading_nodes(g, groups, which, bytes_of(order.front()));
  for (size_t i = 0; i < g.nodes.size(); ++i)
    EXPECT_EQ(which[i],
              std::find(first.begin(), first.end(), static_cast<int32_t>(i)) != first.end())
        << i;

  // A budget reached at o, a node alone: q, k, v and o; reached at gate: gate and up too.
  size_t bytes = 0;
  for (size_t n = 0; n < 4; ++n) bytes += bytes_of(order[n]);
  which = linears;
  compile::keep_leading_nodes(g, groups, which, bytes);
  for (size_t n = 0; n < order.size(); ++n) EXPECT_EQ(which[order[n]], n < 4) << n;
  which = linears;
  compile::keep_leading_nodes(g, groups, which, bytes + bytes_of(order[4]));
  for (size_t n = 0; n < order.size(); ++n) EXPECT_EQ(which[order[n]], n < 6) << n;

  // A budget above the step's weights, or none at all: every node, or the first one's group.
  which = linears;
  compile::keep_leading_nodes(g, groups, which, compile::kCheckBytes);
  EXPECT_EQ(which, linears);
  which = linears;
  compile::keep_leading_nodes(g, groups, which, 0);
  EXPECT_EQ(std::count(which.begin(), which.end(), true), static_cast<long>(first.size()));
}

TEST_P(CompiledFixture, TunedCompiledRunGivesTheEagerBits) {
  auto l = load(GetParam());
  const auto prompt = ids(6, l->model->info().vocab_size, 2);
  compile::Compiler compiler({});
  Context ctx{&pool, false, false};
  ctx.compiled = &compiler;
  expect_same(run(*l->model, {&pool, false, true}, prompt), run(*l->model, ctx, prompt));
  EXPECT_GT(compiler.stats().work.nodes_timed, 0);
  EXPECT_EQ(compiler.stats().compiled, 2);  // the prompt's bucket and the decode step's
}

INSTANTIATE_TEST_SUITE_P(Engine, CompiledFixture, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(EngineQuantized, CompiledFixture,
                         ::testing::Values("llama_tied_gqa@q8_0",
                                           "qwen3_moe_headdim_mlp_only@q4_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           n[n.find('@')] = '_';
                           return n;
                         });

// A compiler over the cache folder `dir`, and its run of the fixture.
struct CachedRun {
  Outputs out;
  compile::CompileStats stats;
};
CachedRun cached_run(const Model& model, ThreadPool& pool, const fs::path& dir,
                     const std::vector<int32_t>& prompt) {
  compile::CompileCache cache(dir);
  compile::Compiler compiler({.cache = &cache});
  Context ctx{&pool, false, false};
  ctx.compiled = &compiler;
  CachedRun r{run(model, ctx, prompt), {}};
  r.stats = compiler.stats();
  return r;
}

TEST(Compiled, AWarmRunReadsItsModulesAndDoesNoneOfTheCostlyWork) {
  auto l = load("llama_tied_gqa@q8_0");  // quantized: its Linear groups are timed too
  ThreadPool pool(2);
  testing::ScratchDir dir("compiled");
  const auto prompt = ids(7, l->model->info().vocab_size, 4);
  const CachedRun cold = cached_run(*l->model, pool, dir.path(), prompt);
  EXPECT_EQ(cold.stats.compiled, 2);
  EXPECT_EQ(cold.stats.loaded, 0);
  EXPECT_GT(cold.stats.work.nodes_timed, 0);
  EXPECT_GE(cold.stats.work.plans, 2);
  EXPECT_GT(cold.stats.work.groups_timed, 0);
  const CachedRun warm = cached_run(*l->model, pool, dir.path(), prompt);
  EXPECT_EQ(warm.stats.compiled, 0);
  EXPECT_EQ(warm.stats.loaded, 2);
  EXPECT_EQ(warm.stats.work.nodes_timed, 0);
  EXPECT_EQ(warm.stats.work.plans, 0);
  EXPECT_EQ(warm.stats.work.groups_timed, 0);
  EXPECT_EQ(warm.stats.work.steps_timed, 0);
  EXPECT_EQ(warm.stats.keys, cold.stats.keys);
  expect_same(cold.out, warm.out);
  // A prompt of another length in the same bucket (5..8 tokens) uses the same module.
  const CachedRun same_bucket =
      cached_run(*l->model, pool, dir.path(), ids(5, l->model->info().vocab_size, 4));
  EXPECT_EQ(same_bucket.stats.compiled, 0);
  EXPECT_EQ(same_bucket.stats.keys, cold.stats.keys);
}

TEST(Compiled, ModulesOfAnotherGraphOrOtherKernelsAreNeverUsed) {
  ThreadPool pool(2);
  testing::ScratchDir dir("compiled");
  auto l = load("llama_tied_gqa");
  const auto prompt = ids(7, l->model->info().vocab_size, 4);
  const CachedRun first = cached_run(*l->model, pool, dir.path(), prompt);
  // Another architecture's graph: its own modules.
  auto other = load("llama_untied_mha_llama3");
  const CachedRun changed = cached_run(*other->model, pool, dir.path(), prompt);
  EXPECT_EQ(changed.stats.loaded, 0);
  EXPECT_EQ(changed.stats.compiled, 2);
  // The same graph on another instruction set's kernels: compiled again, not read.
  const cpu::Isa isa = cpu::active_isa();
  if (isa == cpu::Isa::Portable) GTEST_SKIP() << "this CPU has one kernel level";
  cpu::set_active_isa(cpu::Isa::Portable);
  const CachedRun portable = cached_run(*l->model, pool, dir.path(), prompt);
  cpu::set_active_isa(isa);
  EXPECT_EQ(portable.stats.loaded, 0);
  EXPECT_EQ(portable.stats.compiled, 2);
  for (const std::string& key : portable.stats.keys)
    EXPECT_EQ(std::count(first.stats.keys.begin(), first.stats.keys.end(), key), 0) << key;
}

// Every module.json in the cache, rewritten by `edit`.
void edit_modules(const fs::path& dir, const std::function<void(Json&)>& edit) {
  int edited = 0;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (f.path().filename() == "module.json") {
      Json j = read_json_file(f.path());
      edit(j);
      std::ofstream(f.path()) << j.dump();
      ++edited;
    }
  ASSERT_GT(edited, 0);
}

TEST(Compiled, ACorruptModuleIsCompiledAgain) {
  ThreadPool pool(2);
  auto l = load("llama_tied_gqa");
  const auto prompt = ids(7, l->model->info().vocab_size, 4);
  testing::ScratchDir dir("compiled");
  cached_run(*l->model, pool, dir.path(), prompt);
  edit_modules(dir.path(), [](Json& j) { j["arena_bytes"] = uint64_t{1} << 50; });
  const CachedRun again = cached_run(*l->model, pool, dir.path(), prompt);
  EXPECT_EQ(again.stats.loaded, 0);
  EXPECT_EQ(again.stats.compiled, 2);
  expect_same(run(*l->model, {&pool, false, true}, prompt), again.out);
  // and the module compiled again is whole: the next run reads it
  EXPECT_EQ(cached_run(*l->model, pool, dir.path(), prompt).stats.loaded, 2);
}

// A bucket whose compile failed before is run uncompiled (same numbers), not compiled again,
// until --recompile asks.
TEST(Compiled, AFailedModuleIsNotRetriedUnlessAsked) {
  ThreadPool pool(2);
  auto l = load("llama_tied_gqa");
  const auto prompt = ids(7, l->model->info().vocab_size, 4);
  testing::ScratchDir dir("compiled");
  compile::CompileCache cache(dir.path());
  Context plain{&pool, false, false};
  // The key the prompt's bucket (8 tokens, all rows) gets, as the engine makes it.
  const graph::Graph bucket = Engine(l->graph(), plain).build_graph(8, 8);
  const compile::Flags flags =
      compile::step_flags(cpu_backend(false), pool.size(), context_bucket(32), 8, 8);
  cache.record_failure(compile::module_key(bucket, flags), "an injected failure", {});
  const CachedRun failed = cached_run(*l->model, pool, dir.path(), prompt);
  EXPECT_EQ(failed.stats.failed, 1);
  EXPECT_EQ(failed.stats.compiled, 1);  // the decode step's module only
  expect_same(run(*l->model, {&pool, false, true}, prompt), failed.out);
  EXPECT_EQ(cache.state(compile::module_key(bucket, flags)), compile::CompileCache::State::Failed);
  compile::Compiler again({.cache = &cache, .recompile = true});
  Context ctx{&pool, false, false};
  ctx.compiled = &again;
  run(*l->model, ctx, prompt);
  EXPECT_EQ(again.stats().failed, 0);
  EXPECT_EQ(again.stats().compiled, 2);
  EXPECT_EQ(cache.state(compile::module_key(bucket, flags)), compile::CompileCache::State::Ready);
}

// A module from elsewhere is checked against the graph it would serve before any memory is
// placed by it (graph::check_schedule): each way of lying is refused.
// The compiler's choices (variants, groups) replace the planner's schedule only when the
// step's Linear nodes run 3% faster with them, in step order.
TEST(Compiled, ChoicesAreKeptOnlyWhenTheStepsLinearsRunFaster) {
  auto l = load("llama_tied_gqa@q8_0");
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  const Backend& backend = cpu_backend(false);
  for (int64_t tokens : {1, 8}) {
    const graph::Graph g = Engine(l->graph(), ctx).build_graph(tokens, 1);
    const compile::Flags flags = compile::step_flags(backend, 2, context_bucket(32), tokens, 1);
    compile::Work work;
    const compile::Module m = compile::compile_module(g, backend, pool, flags, work);
    const graph::Schedule planned =
        graph::plan_schedule(g, backend, 2, flags.max_context, graph::linear_groups(g, backend));
    const bool planners = m.schedule.groups == planned.groups &&
                          std::ranges::all_of(m.schedule.variants, [](int v) { return v == 0; });
    if (work.steps_timed == 0) {  // nothing chosen: nothing to check
      EXPECT_TRUE(planners) << tokens;
      EXPECT_TRUE(m.checked.kept) << tokens;
    } else {
      EXPECT_GT(m.checked.planned_seconds, 0) << tokens;
      EXPECT_GT(m.checked.chosen_seconds, 0) << tokens;
      EXPECT_EQ(m.checked.kept, m.checked.chosen_seconds < 0.97 * m.checked.planned_seconds);
      if (!m.checked.kept) {
        EXPECT_TRUE(planners) << tokens;
        EXPECT_EQ(m.schedule.arena_bytes, planned.arena_bytes) << tokens;
      }
    }
    EXPECT_NO_THROW(graph::check_schedule(g, backend, 2, flags.max_context, m.schedule, true));
  }
}

TEST(Compiled, ALyingScheduleIsRefused) {
  auto l = load("llama_tied_gqa@q8_0");  // quantized: it has Linear groups
  ThreadPool pool(2);
  Context ctx{&pool, false, false};
  const graph::Graph g = Engine(l->graph(), ctx).build_graph(8, 1);
  const Backend& backend = cpu_backend(false);
  const graph::Schedule good = graph::plan_schedule(g, backend, 2, 32);
  EXPECT_NO_THROW(graph::check_schedule(g, backend, 2, 32, good, true));
  // Two buffers live at once: the embedding's output and the first norm's.
  ASSERT_GE(good.slots.size(), 2u);
  ASSERT_FALSE(graph::linear_groups(g, backend).empty());
  const std::vector<std::pair<const char*, std::function<void(graph::Schedule&)>>> lies = {
      {"past the arena", [](graph::Schedule& s) { s.slots[0].offset = s.arena_bytes; }},
      {"onto a live buffer", [](graph::Schedule& s) { s.slots[1].offset = s.slots[0].offset; }},
      {"a petabyte arena", [](graph::Schedule& s) { s.arena_bytes = uint64_t{1} << 50; }},
      {"a buffer too small", [](graph::Schedule& s) { s.slots[0].bytes -= 64; }},
      {"unaligned", [](graph::Schedule& s) { s.slots[0].offset += 4; }},
      {"a missing buffer", [](graph::Schedule& s) { s.slots.pop_back(); }},
      {"another node's buffer", [](graph::Schedule& s) { ++s.slots[0].node; }},
      {"a variant that does not exist", [](graph::Schedule& s) { s.variants[0] = 99; }},
      {"a group of nodes that are no Linear group",
       [](graph::Schedule& s) {
         s.groups = {{1, 2}};
       }},
      {"a group cut short",
       [&](graph::Schedule& s) {
         s.groups = {graph::linear_groups(g, backend).front()};
         s.groups[0].pop_back();
       }},
      {"a group twice",
       [&](graph::Schedule& s) {
         s.groups = {graph::linear_groups(g, backend).front(),
                     graph::linear_groups(g, backend).front()};
       }},
  };
  for (const auto& [what, lie] : lies) {
    graph::Schedule s = good;
    lie(s);
    EXPECT_THROW(graph::check_schedule(g, backend, 2, 32, s, true), Error) << what;
  }
  // A bucket's schedule serves a smaller step (7 tokens in the bucket of 8), not a larger one.
  EXPECT_NO_THROW(graph::check_schedule(Engine(l->graph(), ctx).build_graph(7, 1), backend, 2, 32,
                                        good, false));
  EXPECT_THROW(
      graph::check_schedule(Engine(l->graph(), ctx).build_graph(9, 1), backend, 2, 32, good, false),
      Error);
}

}  // namespace
}  // namespace lathe
