#include "shard/planner.h"
#include "backends/cpu/backend.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "graph/backend.h"
#include "models/engine.h"
#include "models/registry.h"

namespace lathe::shard {

namespace {

// Bytes per element of a tensor once loaded.
double element_bytes(const TensorShard& t, DType matrix, std::optional<DType> quantize) {
  auto per = [](DType d) {
    const DTypeTraits tr = dtype_traits(d);
    return static_cast<double>(tr.block_bytes) / static_cast<double>(tr.block_size);
  };
  switch (t.loaded) {
    case Loaded::None:
      return 0;
    case Loaded::Vector:
      return 4;
    case Loaded::Mxfp4:
      return per(DType::MXFP4);
    case Loaded::Fp8:
      return per(DType::FP8);
    case Loaded::Matrix:
      return quantize && t.quantizable ? per(*quantize) : per(matrix);
  }
  return 0;
}

}  // namespace

uint64_t weight_bytes(const ShardPlan& plan, int rank, DType matrix_dtype,
                      std::optional<DType> quantize) {
  double bytes = 0;
  for (const TensorShard& t : plan.tensors)
    bytes += static_cast<double>(t.loaded_numel) * t.fraction(rank) *
             element_bytes(t, matrix_dtype, quantize);
  return static_cast<uint64_t>(std::ceil(bytes));
}

uint64_t kv_bytes(const Layout& layout, Parallelism parallelism, int degree, int64_t max_seq,
                  DType kv_dtype) {
  uint64_t total = 0;
  const uint64_t kv_size = dtype_size(kv_dtype);
  for (const LayerStateSpec& s : layout.states) {
    if (s.kind == StateKind::Recurrent) {
      for (const Shape& shape : s.recurrent) total += shape_numel(shape) * sizeof(float);
      continue;
    }
    const int64_t slots = s.kind == StateKind::SlidingKV
                              ? std::min(max_seq, s.window - 1 + GraphModel::kDefaultMaxStepTokens)
                              : max_seq;
    int64_t heads = s.kv_heads;
    if (parallelism == Parallelism::Tensor && degree > 1)
      heads = heads % degree == 0 ? heads / degree : 1;  // fewer: one replicated kv head each
    const int64_t v_dim = s.v_head_dim < 0 ? s.head_dim : s.v_head_dim;
    total += static_cast<uint64_t>(slots * heads * (s.head_dim + v_dim)) * kv_size;
    total += static_cast<uint64_t>(slots * s.index_dim) * sizeof(float);
  }
  return total;
}

uint64_t activation_bytes(const Model& model, int64_t max_seq) {
  const auto* gm = dynamic_cast<const GraphModel*>(&model);
  if (!gm) fail(model.info().architecture, " builds no step graph");
  ThreadPool pool(1);
  Context ctx{&pool, false, false};
  const int64_t tokens = std::min(max_seq, GraphModel::kDefaultMaxStepTokens);
  const graph::Graph g = Engine(*gm, ctx).build_graph(tokens, 1);
  return graph::plan_schedule(g, cpu_backend(false), 1, max_seq).arena_bytes;
}

PlannerChoice choose_degree(const Model& model, const Layout& layout, const Checkpoint& ckpt,
                            const FetchLog& log, const PlannerOptions& opts) {
  PlannerChoice c;
  // Tensor parallelism first: it splits attention and its KV cache as well as the experts.
  std::vector<Parallelism> ways = {opts.parallelism.value_or(Parallelism::Tensor)};
  if (!opts.parallelism && layout.experts > 0) ways.push_back(Parallelism::Expert);
  c.parallelism = ways.front();
  const DType matrix = opts.dtype.value_or(model.info().weight_dtype);
  const uint64_t activations = activation_bytes(model, opts.max_seq);
  for (int d = 1; d <= std::max(1, opts.max_cores); d *= 2) {
    Attempt a;
    a.degree = d;
    std::optional<ShardPlan> plan;
    for (Parallelism p : ways) {
      a.parallelism = p;
      try {
        plan = make_plan(layout, ckpt, log, p, d);
        break;
      } catch (const Error& e) {
        if (a.why.empty()) a.why = e.what();  // the first way's reason
      }
    }
    if (!plan) {
      c.attempts.push_back(a);
      // A layout that cannot be split at all fails the same way at every degree.
      if (std::all_of(ways.begin(), ways.end(), [&](Parallelism p) {
            return !(p == Parallelism::Tensor ? layout.tp_unsupported : layout.ep_unsupported)
                        .empty();
          }))
        break;
      continue;
    }
    a.planned = true;
    a.why.clear();
    for (int r = 0; r < d; ++r)
      a.memory.weights = std::max(a.memory.weights, weight_bytes(*plan, r, matrix, opts.quantize));
    a.memory.kv = kv_bytes(layout, a.parallelism, d, opts.max_seq, opts.kv_dtype);
    a.memory.activations = activations;
    c.parallelism = a.parallelism;
    c.degree = d;
    c.memory = a.memory;
    c.attempts.push_back(a);
    if (a.memory.total() <= opts.core_memory) {
      c.fits = true;
      c.plan = std::move(plan);
      return c;
    }
  }
  std::string tried;
  for (const Attempt& a : c.attempts) tried += cat(tried.empty() ? "" : ", ", a.degree);
  const RankMemory& m = c.memory;
  c.refusal = cat(
      layout.architecture, " does not fit ", format_bytes(opts.core_memory), " per core on up to ",
      opts.max_cores, " core", opts.max_cores == 1 ? "" : "s", ": at degree ", c.degree, " (",
      parallelism_name(c.parallelism), ") a rank needs ", format_bytes(m.total()), " (weights ",
      format_bytes(m.weights), ", KV and state ", format_bytes(m.kv), " for ", opts.max_seq,
      " positions, activations ", format_bytes(m.activations), "); degrees tried: ", tried);
  if (!c.attempts.empty() && !c.attempts.back().planned)
    c.refusal += cat("; degree ", c.attempts.back().degree, ": ", c.attempts.back().why);
  return c;
}

PlannerChoice plan_checkpoint(const std::filesystem::path& dir, const ModelOptions& model,
                              PlannerOptions opts) {
  Checkpoint ckpt = Checkpoint::open(dir);
  FetchLog log;
  ckpt.set_fetch_log(&log);
  ModelOptions plain = model;
  plain.quantize.reset();
  plain.copy_weights = false;  // measured, not run: no copies
  const std::unique_ptr<Model> m = load_model(ckpt, plain);
  if (opts.max_seq <= 0) opts.max_seq = std::min<int64_t>(m->info().max_position_embeddings, 4096);
  return choose_degree(*m, analyze(*m, log), ckpt, log, opts);
}

int machine_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

uint64_t default_core_memory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("MemTotal:")) {
      std::istringstream fields(line.substr(9));
      uint64_t kib = 0;
      fields >> kib;
      return kib * 1024 / static_cast<uint64_t>(machine_cores());
    }
  fail("/proc/meminfo: no MemTotal line; give --core-memory");
}

std::optional<uint64_t> parse_size(std::string_view text) {
  const std::string s(text);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = s.substr(used);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit == "B")
    unit.clear();
  else if ((unit.size() == 3 && unit.ends_with("IB")) || (unit.size() == 2 && unit[1] == 'B'))
    unit.resize(1);  // GiB, GB: G
  const std::string units = "KMGT";
  double scale = 1;
  if (unit.size() == 1 && units.find(unit[0]) != std::string::npos)
    scale = std::pow(1024.0, static_cast<double>(units.find(unit[0]) + 1));
  else if (!unit.empty())
    return std::nullopt;
  if (!std::isfinite(v) || v < 0 || v * scale > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(v * scale);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace lathe::shard
