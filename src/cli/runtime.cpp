#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "backends/cpu/isa.h"
#include "cli/commands.h"
#include "compile/cache.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "core/quant.h"
#include "io/json.h"
#include "models/registry.h"
#include "shard/planner.h"
#include "shard/worker.h"

namespace lathe {

std::vector<OptionSpec> runtime_options() {
  std::vector<OptionSpec> options = {
      {"dtype", "f32|bf16", "weight storage for compute (default: the checkpoint's; f16 -> f32)"},
      {"quantize", "q8_0|q4_0",
       "quantize the matrices at load into 8- or 4-bit blocks (docs/performance.md)"},
      {"kv-dtype", "f32|bf16", "KV cache storage (default f32; bf16 halves it, rounding keys)"},
      {"mxfp4", "native|dequantize",
       "MXFP4 matrices (gpt-oss experts): run by their own kernels (default) or dequantized at "
       "load into --dtype"},
      {"fp8", "native|dequantize",
       "block-scaled FP8 matrices (DeepSeek V3, Qwen3 -FP8): run by their own kernels "
       "(default) or dequantized at load into --dtype"},
      {"copy-weights", "",
       "copy the weights at load from the mapped checkpoint onto 2 MiB pages: steps run "
       "faster, the load takes the copy's time (docs/performance.md)"},
      {"threads", "N",
       "worker threads (default: all cores; with --tp or --ep, each worker's share)"},
      {"max-seq", "N", "KV cache positions (default: min(max_position_embeddings, 4096))"},
      {"reference-kernels", "", "use the portable reference kernels (slow; for checking)"},
      {"eager", "", "run each graph node as it is built, unplanned (debugging; same numbers)"},
      {"compiled", "",
       "compiled mode: each step shape's memory plan and measured kernel choices, compiled "
       "once and kept in the compile cache (docs/compile-cache.md; same numbers)"},
      {"recompile", "", "with --compiled: compile again, even modules that failed before"},
      {"cache-dir", "DIR",
       "the compile cache (default: $LATHE_CACHE_DIR, else ~/.cache/lathe/compile-cache)"},
  };
  for (auto& o : sharding_options()) options.push_back(o);
  return options;
}

std::vector<OptionSpec> sharding_options() {
  return {
      {"tp", "N",
       "tensor parallelism: N worker processes under Open MPI's mpirun, each holding 1/N of "
       "every layer's heads and MLP (docs/sharding.md)"},
      {"ep", "N", "expert parallelism: N workers, each holding 1/N of the experts"},
      {"cores", "auto|N",
       "run on the fewest cores (1, 2, 4, ... up to N; auto: all) whose ranks each fit "
       "--core-memory: tensor parallelism, or expert parallelism for a model with experts "
       "whose heads do not divide"},
      {"core-memory", "SIZE", "with --cores: memory per core, e.g. 2G (default: MemTotal / cores)"},
  };
}

std::optional<shard::PlannerOptions> cores_option(const Args& args) {
  if (!args.has("cores")) {
    if (args.has("core-memory")) throw UsageError("--core-memory goes with --cores");
    return std::nullopt;
  }
  if (args.has("tp") || args.has("ep"))
    throw UsageError("--cores chooses the degree: give it or --tp/--ep, not both");
  shard::PlannerOptions o;
  o.max_cores = args.get_or("cores", "auto") == "auto"
                    ? shard::machine_cores()
                    : static_cast<int>(args.get_int("cores", 1, 1, 256));
  if (auto size = args.get("core-memory")) {
    const auto bytes = shard::parse_size(*size);
    if (!bytes) throw UsageError(cat("--core-memory needs a size such as 2G, got \"", *size, "\""));
    o.core_memory = *bytes;
  } else {
    o.core_memory = shard::default_core_memory();
  }
  return o;
}

namespace {

// --cores: the planner's degree for this model and these options (docs/sharding.md). Throws
// shard::Relaunch for more than one rank, lathe::Error when it fits nowhere.
void plan_cores(const std::string& dir, const Args& args, const ModelOptions& opts,
                shard::PlannerOptions o) {
  o.dtype = opts.dtype;
  o.quantize = opts.quantize;
  o.kv_dtype = kv_dtype_option(args);
  o.max_seq = args.has("max-seq") ? args.get_int("max-seq", 0, 1, int64_t{1} << 22) : 0;
  const shard::PlannerChoice c = shard::plan_checkpoint(dir, opts, o);
  if (!c.fits) fail(c.refusal);
  std::cerr << "cores: " << c.degree << " (" << shard::parallelism_name(c.parallelism) << ", "
            << shard::format_bytes(c.memory.total()) << " per rank of "
            << shard::format_bytes(o.core_memory) << ")\n";
  if (c.degree > 1)
    throw shard::Relaunch{{c.parallelism, c.degree, o.core_memory + shard::kRankBaseMemory}};
}

}  // namespace

int default_threads() {
  if (shard::Worker* w = shard::Worker::current()) return w->default_threads();
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void shard_options(ModelOptions& opts) {
  if (shard::Worker* w = shard::Worker::current()) opts.wrap = w->model_wrap();
}

std::unique_ptr<compile::CompileCache> compile_cache_option(const Args& args) {
  const auto dir = args.get("cache-dir");
  return std::make_unique<compile::CompileCache>(dir ? std::filesystem::path(*dir)
                                                     : compile::default_cache_root());
}

std::optional<DType> quantize_option(const Args& args) {
  const auto q = args.get("quantize");
  if (!q) return std::nullopt;
  const std::optional<DType> type = quant_type_from_name(*q);
  if (!type) throw UsageError(cat("--quantize must be q8_0 or q4_0, got \"", *q, "\""));
  return type;
}

DType kv_dtype_option(const Args& args) {
  const std::string d = args.get_or("kv-dtype", "f32");
  if (d == "f32") return DType::F32;
  if (d == "bf16") return DType::BF16;
  throw UsageError(cat("--kv-dtype must be f32 or bf16, got \"", d, "\""));
}

namespace {

bool dequantize_option(const Args& args, const std::string& name) {
  const std::string m = args.get_or(name, "native");
  if (m != "native" && m != "dequantize")
    throw UsageError(cat("--", name, " must be native or dequantize, got \"", m, "\""));
  return m == "dequantize";
}

}  // namespace

bool dequantize_mxfp4_option(const Args& args) {
  return dequantize_option(args, "mxfp4");
}

bool dequantize_fp8_option(const Args& args) {
  return dequantize_option(args, "fp8");
}

void check_compiled_options(const Args& args) {
  if (args.flag("compiled") && args.flag("eager"))
    throw UsageError("--compiled and --eager exclude each other");
  if ((args.flag("recompile") || args.get("cache-dir")) && !args.flag("compiled"))
    throw UsageError("--recompile and --cache-dir go with --compiled");
}

void compiled_mode_option(const Args& args, std::unique_ptr<compile::CompileCache>& cache,
                          std::unique_ptr<compile::Compiler>& compiler, Context& ctx) {
  check_compiled_options(args);
  if (!args.flag("compiled")) return;
  cache = compile_cache_option(args);
  compiler = std::make_unique<compile::Compiler>(compile::CompilerOptions{
      .cache = cache.get(), .recompile = args.flag("recompile"), .shard = shard::current_layout()});
  ctx.compiled = compiler.get();
}

Runtime::Runtime() = default;
Runtime::~Runtime() = default;

std::unique_ptr<Runtime> load_runtime(const std::string& dir, const Args& args,
                                      bool compiled_options) {
  auto rt = std::make_unique<Runtime>();
  cpu::active_isa();  // a bad LATHE_CPU_ISA fails here, before any loading
  rt->ctx.kv_dtype = kv_dtype_option(args);
  if (compiled_options) check_compiled_options(args);
  ModelOptions opts;
  if (auto d = args.get("dtype")) {
    if (*d == "f32")
      opts.dtype = DType::F32;
    else if (*d == "bf16")
      opts.dtype = DType::BF16;
    else
      throw UsageError(cat("--dtype must be f32 or bf16, got \"", *d, "\""));
  }
  opts.quantize = quantize_option(args);
  opts.dequantize_mxfp4 = dequantize_mxfp4_option(args);
  opts.dequantize_fp8 = dequantize_fp8_option(args);
  opts.copy_weights = args.flag("copy-weights");
  if (!shard::Worker::current())  // a worker's launcher planned already
    if (auto cores = cores_option(args)) plan_cores(dir, args, opts, *cores);
  shard_options(opts);
  const int threads = static_cast<int>(args.get_int("threads", default_threads(), 1, 1024));
  rt->checkpoint = Checkpoint::open(dir);
  rt->model = load_model(rt->checkpoint, opts);
  rt->pool = std::make_unique<ThreadPool>(threads);
  rt->ctx.pool = rt->pool.get();
  rt->ctx.reference_kernels = args.flag("reference-kernels");
  rt->ctx.eager = args.flag("eager");
  const int64_t max_pos = rt->model->info().max_position_embeddings;
  rt->max_seq = args.get_int("max-seq", std::min<int64_t>(max_pos, 4096), 1, int64_t{1} << 22);
  if (compiled_options) compiled_mode_option(args, rt->cache, rt->compiler, rt->ctx);
  return rt;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot read file");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<int32_t> ids_from_json(const Json& j, const std::string& origin,
                                   const std::string& what) {
  if (!j.is_array()) fail(origin, ": ", what, " must be a JSON list of token ids");
  std::vector<int32_t> ids;
  for (const Json& x : j) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      fail(origin, ": ", what, " holds ", x.dump(), ", not a token id");
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return ids;
}

std::vector<int32_t> parse_ids(const std::string& text_or_file, const std::string& what) {
  if (!text_or_file.empty() && text_or_file[0] == '@') {
    const std::string file = text_or_file.substr(1);
    return ids_from_json(parse_json(read_text_file(file), file), file, what);
  }
  // Not a JSON list: most likely a file name without its @.
  const size_t first = text_or_file.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text_or_file[first] != '[') {
    std::error_code ec;
    if (std::filesystem::is_regular_file(text_or_file, ec))
      fail(what, ": \"", text_or_file, "\" is a file, not a JSON list of token ids; use @",
           text_or_file, " to read a file");
    const std::string shown =
        text_or_file.size() > 60 ? text_or_file.substr(0, 60) + "..." : text_or_file;
    fail(what, ": expected a JSON list of token ids such as [1, 2, 3], got \"", shown,
         "\"; use @FILE to read a file");
  }
  return ids_from_json(parse_json(text_or_file, what), what, "the list");
}

}  // namespace lathe
