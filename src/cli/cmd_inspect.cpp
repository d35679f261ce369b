// lathe inspect MODEL [--json] [--graph N]: what a checkpoint holds and whether lathe runs it.
#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "core/error.h"
#include "models/engine.h"
#include "models/features.h"
#include "models/registry.h"

namespace lathe {

namespace {

std::vector<OptionSpec> inspect_options() {
  std::vector<OptionSpec> o = {{"json", "", "print one JSON object"},
                               {"graph", "N",
                                "also show the step graph for a prompt of N tokens: its nodes, "
                                "its hash (stable across runs and machines) and its planned "
                                "arena"}};
  for (auto& m : model_options()) o.push_back(m);
  return o;
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
  const Checkpoint ckpt = Checkpoint::open(dir);
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
  try {
    auto model = load_model(ckpt, {});
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
    out["cores"] = 1;  // sharding across cores comes with the dist module
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
  if (out["supported"].get<bool>()) return 0;
  // The report above is the answer; the failure is also the one error line on stderr that
  // every failing command writes (docs/errors.md).
  std::cerr << "error: " << out["reason"].get<std::string>() << "\n";
  return 1;
}

}  // namespace lathe
