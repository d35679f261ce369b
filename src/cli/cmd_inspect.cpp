// lathe inspect MODEL [--json] [--graph N] [--plan ...]: what a checkpoint holds, whether lathe
// runs it, and with --plan on how many cores (src/shard, docs/sharding.md).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "backends/cpu/backend.h"
#include "cli/commands.h"
#include "core/error.h"
#include "models/engine.h"
#include "models/features.h"
#include "models/registry.h"
#include "shard/planner.h"

namespace lathe {

namespace {

std::vector<OptionSpec> inspect_options() {
  std::vector<OptionSpec> o = {
      {"json", "", "print one JSON object"},
      {"graph", "N",
       "also show the step graph for a prompt of N tokens: its nodes, its hash (stable across "
       "runs and machines) and its planned arena"},
      {"plan", "",
       "plan the cores: the fewest (1, 2, 4, ...) whose ranks each fit --core-memory, "
       "tensor-parallel (experts split by blocks), or expert-parallel where the heads do not "
       "divide (docs/sharding.md)"},
      {"core-memory", "SIZE",
       "with --plan: memory per core, e.g. 2G, 512M or bytes (default: MemTotal / cores)"},
      {"max-cores", "N", "with --plan: the most cores (default: all)"},
      {"dtype", "f32|bf16", "with --plan: matrix storage (default: the checkpoint's)"},
      {"quantize", "q8_0|q4_0", "with --plan: quantized matrices"},
      {"kv-dtype", "f32|bf16", "with --plan: KV cache storage"},
      {"max-seq", "N", "with --plan: KV positions (default: min(max_position_embeddings, 4096))"}};
  for (auto& m : model_options()) o.push_back(m);
  return o;
}

// --plan: the planner's answer, into out["plan"]; false when the model fits nowhere.
bool plan_cores(const Args& args, const Model& model, const Checkpoint& ckpt, const FetchLog& log,
                Json& out) {
  shard::PlannerOptions o;
  if (auto size = args.get("core-memory")) {
    const auto bytes = shard::parse_size(*size);
    if (!bytes)
      throw UsageError(
          cat("--core-memory needs a size such as 2G, 512M or a number of bytes, "
              "got \"",
              *size, "\""));
    o.core_memory = *bytes;
  } else {
    o.core_memory = shard::default_core_memory();
  }
  o.max_cores = static_cast<int>(args.get_int("max-cores", shard::machine_cores(), 1, 4096));
  if (auto d = args.get("dtype")) {
    if (*d != "f32" && *d != "bf16")
      throw UsageError(cat("--dtype must be f32 or bf16, got \"", *d, "\""));
    o.dtype = *d == "f32" ? DType::F32 : DType::BF16;
  }
  o.quantize = quantize_option(args);
  o.kv_dtype = kv_dtype_option(args);
  o.max_seq = args.get_int("max-seq", std::min<int64_t>(model.info().max_position_embeddings, 4096),
                           1, int64_t{1} << 22);
  const shard::Layout layout = shard::analyze(model, log);
  const shard::PlannerChoice c = shard::choose_degree(model, layout, ckpt, log, o);
  Json p = {{"fits", c.fits},
            {"parallelism", shard::parallelism_name(c.parallelism)},
            {"degree", c.degree},
            {"core_memory", o.core_memory},
            {"max_cores", o.max_cores},
            {"max_seq", o.max_seq},
            {"per_rank",
             {{"weights", c.memory.weights},
              {"kv", c.memory.kv},
              {"activations", c.memory.activations},
              {"total", c.memory.total()}}}};
  if (!layout.tp_unsupported.empty()) p["tp_unsupported"] = layout.tp_unsupported;
  Json tried = Json::array();
  for (const auto& a : c.attempts) {
    Json t = {{"degree", a.degree}, {"planned", a.planned}};
    if (a.planned)
      t["total"] = a.memory.total();
    else
      t["why"] = a.why;
    tried.push_back(t);
  }
  p["tried"] = tried;
  if (c.plan) {
    Json kinds = Json::object();
    for (int k = 0; k < shard::kShardKinds; ++k)
      kinds[shard::kind_name(static_cast<shard::ShardKind>(k))] =
          c.plan->count(static_cast<shard::ShardKind>(k));
    p["tensors"] = kinds;
    p["rank_stored_bytes"] = c.plan->rank_bytes;
    if (!c.plan->expert_rank.empty()) p["expert_rank"] = c.plan->expert_rank;
    p["notes"] = c.plan->notes;
  } else {
    p["reason"] = c.refusal;
  }
  out["plan"] = p;
  out["cores"] = c.fits ? c.degree : 0;
  return c.fits;
}

void print_plan(const Json& p) {
  const auto bytes = [&](const char* k) {
    return shard::format_bytes(p["per_rank"][k].get<uint64_t>());
  };
  if (!p["fits"].get<bool>()) {
    std::cout << "plan:         does not fit: " << p["reason"].get<std::string>() << "\n";
    return;
  }
  std::cout << "plan:         " << p["degree"] << " core" << (p["degree"] == 1 ? "" : "s") << " ("
            << p["parallelism"].get<std::string>() << "), per rank "
            << shard::format_bytes(p["per_rank"]["total"].get<uint64_t>()) << " of "
            << shard::format_bytes(p["core_memory"].get<uint64_t>()) << ": weights "
            << bytes("weights") << ", KV " << bytes("kv") << " for " << p["max_seq"]
            << " positions, activations " << bytes("activations") << "\n";
  std::cout << "  tensors:   ";
  for (const auto& [kind, n] : p["tensors"].items())
    if (n.get<int64_t>() > 0) std::cout << " " << kind << " " << n;
  std::cout << "\n";
  for (const auto& note : p["notes"])
    std::cout << "  note:       " << note.get<std::string>() << "\n";
  if (p.contains("tp_unsupported"))
    std::cout << "  no tp:      " << p["tp_unsupported"].get<std::string>() << "\n";
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args args("inspect",
            "Describes a checkpoint folder: architecture, parameters, dtypes, memory, and whether "
            "lathe supports it (loading it fully to check).",
            {"MODEL"}, inspect_options());
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  const std::string dir = resolve_model_arg(args.positionals()[0], args);
  Checkpoint ckpt = Checkpoint::open(dir);
  // --plan finds the step graph's weights among what the loader fetched (src/shard).
  FetchLog fetched;
  const bool want_plan = args.flag("plan");
  if (want_plan) ckpt.set_fetch_log(&fetched);
  bool plan_fits = true;
  std::map<std::string, uint64_t> params_by_dtype;
  uint64_t params = 0;
  for (const auto& name : ckpt.tensor_names()) {
    const auto& e = ckpt.entry(name);
    uint64_t n = 1;
    for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
    params += n;
    params_by_dtype[e.dtype_name] += n;
  }
  Json out = {{"model_dir", dir},
              {"architecture", ckpt.architecture()},
              {"parameters", params},
              {"parameters_by_dtype", params_by_dtype},
              {"tensor_bytes", ckpt.total_tensor_bytes()}};
  std::unique_ptr<Model> model;
  try {
    model = load_model(ckpt, {});
    const ModelInfo& info = model->info();
    // What a sequence's state costs, from the caches the model lays out: KV bytes added per
    // token, and the recurrent layers' fixed state.
    const KVCache one = model->new_cache(1), two = model->new_cache(2);
    const uint64_t kv_per_token = two.bytes() - one.bytes();
    uint64_t recurrent = 0;
    for (const KVCache::Layer& l : one.layers)
      for (const Tensor& t : l.states) recurrent += t.nbytes();
    out["supported"] = true;
    if (!info.runs.empty()) out["runs"] = info.runs;
    out["recurrent_state_bytes"] = recurrent;
    out["layers"] = info.num_layers;
    out["hidden_size"] = info.hidden_size;
    out["vocab_size"] = info.vocab_size;
    out["max_position_embeddings"] = info.max_position_embeddings;
    out["compute_dtype"] = std::string(dtype_name(info.weight_dtype));
    out["kv_cache_bytes_per_token"] = kv_per_token;
    out["cores"] = 1;  // --plan: the planner's degree (the runtime still runs one process)
    if (args.has("graph")) {
      const int64_t n = args.get_int("graph", 1, 1, int64_t{1} << 20);
      const auto* gm = dynamic_cast<const GraphModel*>(model.get());
      if (!gm) fail(info.architecture, " builds no step graph");
      ThreadPool pool(1);
      Context ctx{&pool, false, false};
      graph::Plan plan(Engine(*gm, ctx).build_graph(n, 1), cpu_backend(false), 1, n);
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx",
                    static_cast<unsigned long long>(plan.graph().hash()));
      out["graph"] = {{"tokens", n},
                      {"hash", hash},
                      {"nodes", plan.graph().nodes.size()},
                      {"arena_bytes", plan.arena_bytes()},
                      {"unplanned_bytes", plan.unplanned_bytes()}};
      if (!args.flag("json")) std::cout << plan.graph().dump();
    }
  } catch (const Error& e) {
    out["supported"] = false;
    out["reason"] = e.what();
    // What the checkpoint needs that lathe lacks: config.json's signals of features no
    // supported architecture has; else the reason names the field or the architecture.
    Json missing = Json::array();
    for (const auto& f : unsupported_features(ckpt.config()))
      missing.push_back({{"feature", f.feature}, {"evidence", f.evidence}});
    out["missing_features"] = missing;
  }
  // Outside the try above: a planner error is not the model's being unsupported.
  if (want_plan && out["supported"].get<bool>())
    plan_fits = plan_cores(args, *model, ckpt, fetched, out);
  if (args.flag("json")) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "model:        " << out["model_dir"].get<std::string>() << "\n"
              << "architecture: " << out["architecture"].get<std::string>() << "\n"
              << "parameters:   " << params << "\n"
              << "tensor bytes: " << ckpt.total_tensor_bytes() << "\n";
    for (const auto& [dt, n] : params_by_dtype) std::cout << "  " << dt << ": " << n << "\n";
    if (out["supported"].get<bool>()) {
      std::cout << "supported:    yes (" << out["layers"] << " layers, compute in "
                << out["compute_dtype"].get<std::string>() << ", KV cache "
                << out["kv_cache_bytes_per_token"] << " bytes per token";
      if (out["recurrent_state_bytes"].get<uint64_t>() > 0)
        std::cout << ", recurrent state " << out["recurrent_state_bytes"] << " bytes per sequence";
      std::cout << ")\n";
      if (out.contains("runs"))
        std::cout << "runs:         " << out["runs"].get<std::string>() << "\n";
      if (out.contains("plan")) print_plan(out["plan"]);
      if (out.contains("graph"))
        std::cout << "graph:        " << out["graph"]["nodes"] << " nodes for "
                  << out["graph"]["tokens"] << " tokens, hash "
                  << out["graph"]["hash"].get<std::string>() << ", arena "
                  << out["graph"]["arena_bytes"] << " bytes (unplanned "
                  << out["graph"]["unplanned_bytes"] << ")\n";
    } else {
      std::cout << "supported:    no: " << out["reason"].get<std::string>() << "\n";
      for (const auto& f : out["missing_features"])
        std::cout << "missing:      " << f["feature"].get<std::string>() << " ("
                  << f["evidence"].get<std::string>() << ")\n";
    }
  }
  if (!plan_fits) {
    // The plan's refusal: one clear line on stderr, exit code 1 (the model itself loads).
    std::cerr << "error: " << out["plan"]["reason"].get<std::string>() << "\n";
    return 1;
  }
  if (out["supported"].get<bool>()) return 0;
  // The report above is the answer; the failure is also the one error line on stderr that
  // every failing command writes (docs/errors.md).
  std::cerr << "error: " << out["reason"].get<std::string>() << "\n";
  return 1;
}

}  // namespace lathe
