// The `lathe` subcommands. Each returns the process exit code; lathe::Error and UsageError
// thrown inside become exit codes 1 and 2 in main.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/thread_pool.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "models/model.h"
#include "shard/planner.h"

namespace lathe {

int cmd_generate(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_tiny(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_chat_template(int argc, char** argv);
int cmd_architectures(int argc, char** argv);
int cmd_lab(int argc, char** argv);
int cmd_pull(int argc, char** argv);
int cmd_cache(int argc, char** argv);
int lab_judge(int argc, char** argv);  // lathe lab judge (cmd_lab_judge.cpp)

// Options shared by the commands that run a model.
std::vector<OptionSpec> runtime_options();
// --tp, --ep, --cores and --core-memory (docs/sharding.md), part of runtime_options().
std::vector<OptionSpec> sharding_options();
// --cores and --core-memory: the planner's bounds, or nullopt without --cores. UsageError for
// --core-memory alone, --cores with --tp or --ep, or a malformed size.
std::optional<shard::PlannerOptions> cores_option(const Args& args);
// Threads when --threads is not given: all cores, or a sharded run's worker's share of them.
int default_threads();
// In a sharded run's worker: each loaded model becomes this rank's (src/shard/worker.h).
void shard_options(ModelOptions& opts);
// --kv-dtype (F32 unless given); a usage error for anything but f32 or bf16.
DType kv_dtype_option(const Args& args);

// --pull, --offline and --token: how a MODEL argument that names a Hub id is found.
std::vector<OptionSpec> model_options();
// The folder a command's MODEL argument names: an existing path as given, a Hub id
// (ORG/NAME[@REVISION]) as its snapshot in the Hugging Face cache (pulled first with --pull);
// throws lathe::Error naming the `lathe pull` command when the cache lacks it.
std::string resolve_model_arg(const std::string& arg, const Args& args);

namespace compile {
class CompileCache;
class Compiler;
}  // namespace compile

// A model loaded for running, with the threads it runs on (and with --compiled, the compiler
// and cache its steps' schedules come from).
struct Runtime {
  Runtime();
  ~Runtime();
  Checkpoint checkpoint;
  std::unique_ptr<Model> model;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<compile::CompileCache> cache;
  std::unique_ptr<compile::Compiler> compiler;
  Context ctx;
  int64_t max_seq = 0;
};
// --cache-dir's compile cache, else the default root's.
std::unique_ptr<compile::CompileCache> compile_cache_option(const Args& args);
// A usage error for --compiled with --eager, or --recompile or --cache-dir without --compiled.
void check_compiled_options(const Args& args);
// With --compiled: the compile cache and a compiler over it, which ctx's steps then use.
void compiled_mode_option(const Args& args, std::unique_ptr<compile::CompileCache>& cache,
                          std::unique_ptr<compile::Compiler>& compiler, Context& ctx);
// --quantize's type (Q8_0, Q4_0), if given; a UsageError for another value.
std::optional<DType> quantize_option(const Args& args);
// --mxfp4 (--fp8) dequantize (true) or native (false, the default); a UsageError for another
// value.
bool dequantize_mxfp4_option(const Args& args);
bool dequantize_fp8_option(const Args& args);
// Loads MODEL_DIR with --dtype, --threads, --max-seq and --reference-kernels from `args`
// (and --kv-dtype into ctx.kv_dtype, which the caches the caller makes take).
// With compiled_options (generate, logits, bench): --compiled, --recompile and --cache-dir
// set up the compiled mode; without (lathe cache), they are not looked at.
std::unique_ptr<Runtime> load_runtime(const std::string& dir, const Args& args,
                                      bool compiled_options = true);

// The whole content of a text file; throws lathe::Error naming it when it cannot be read.
std::string read_text_file(const std::string& path);

// Parses a JSON list of token ids (text, or @FILE to read it from a file); `what` names the
// option in errors. Anything else than a list is refused with a hint to use @FILE.
std::vector<int32_t> parse_ids(const std::string& text_or_file, const std::string& what);

// The token ids of a JSON list; errors read "ORIGIN: WHAT must be ...".
std::vector<int32_t> ids_from_json(const Json& j, const std::string& origin,
                                   const std::string& what);

}  // namespace lathe
