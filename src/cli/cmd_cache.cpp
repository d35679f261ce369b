// lathe cache status|cleanup|sync|fetch: the persistent compile cache (docs/compile-cache.md).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "backends/cpu/backend.h"
#include "cli/commands.h"
#include "compile/cache.h"
#include "compile/compiler.h"
#include "compile/store.h"
#include "core/error.h"
#include "io/json.h"
#include "models/engine.h"
#include "shard/planner.h"

namespace lathe {
namespace fs = std::filesystem;
namespace {

using compile::CompileCache;
using compile::FetchOutcome;
using compile::ModuleKey;

const char* kCacheUsage = R"(usage: lathe cache SUBCOMMAND [ARGS] [--help]

The persistent compile cache (docs/compile-cache.md): modules compiled for a model's step
graphs, kept by compiler version and key, so that later runs and other machines skip compiling.

subcommands:
  status                 the cache's folder, compiler version, entries and size
  lookup MODEL           the modules MODEL needs (with generate's options) and which are here
  cleanup                remove old entries, or the oldest until the cache fits a size, and
                         the temporary folders of processes that died
  sync --to DIR          copy this version's modules into another cache folder
  fetch --from URL|DIR --key KEY [--key KEY ...]
                         fetch modules from another cache, over HTTP(S) or from a folder
  fetch MODEL --from URL|DIR
                         fetch the modules MODEL needs (options as lookup's) that it has

layout: ROOT/lathe-<compiler version>/MODULE_<graph hash>+<flags hash>/ holds a module's files,
manifest.json (each file's size and sha256) and `done`, written last; a failed compile holds
failed.log, graph.txt, flags.json and `failed` instead. A module is used only by the compiler
version (lathe version and commit) that wrote it. ROOT is --cache-dir, else $LATHE_CACHE_DIR,
else $XDG_CACHE_HOME/lathe/compile-cache, else ~/.cache/lathe/compile-cache.

lathe cache SUBCOMMAND --help describes each.
)";

OptionSpec cache_dir_option() {
  return {"cache-dir", "DIR",
          "the cache root (default: $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe/compile-cache, "
          "else ~/.cache/lathe/compile-cache)"};
}

CompileCache open_cache(const Args& args) {
  const auto dir = args.get("cache-dir");
  return CompileCache(dir ? fs::path(*dir) : compile::default_cache_root());
}

// Parses argv[3..] into `args` and says whether --help was asked (printed here).
bool parse_or_help(Args& args, int argc, char** argv) {
  args.parse(argc, argv, 3);
  if (args.help()) std::cout << args.usage();
  return args.help();
}

using shard::format_bytes;

// --max-size: "2G", "500M", "64K", "1.5GiB", "1000": bytes, in powers of 1024.
uint64_t parse_size(const std::string& text, const std::string& option) {
  if (const auto bytes = shard::parse_size(text)) return *bytes;
  throw UsageError(cat("lathe cache cleanup: ", option,
                       " needs a size such as 2G, 500M, 64K or a number of bytes, got \"", text,
                       "\""));
}

// How long ago `t` was, in words ("3.2 days ago").
std::string age_text(fs::file_time_type t) {
  const double s = std::chrono::duration<double>(fs::file_time_type::clock::now() - t).count();
  char buf[48];
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%.0f min ago", std::max(0.0, s / 60));
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%.1f h ago", s / 3600);
  else
    std::snprintf(buf, sizeof buf, "%.1f days ago", s / 86400);
  return buf;
}

int64_t unix_seconds(fs::file_time_type t) {
  const auto age = fs::file_time_type::clock::now() - t;
  const auto sys = std::chrono::system_clock::now() -
                   std::chrono::duration_cast<std::chrono::system_clock::duration>(age);
  return std::chrono::duration_cast<std::chrono::seconds>(sys.time_since_epoch()).count();
}

std::string entry_state(const CompileCache::Entry& e) {
  return e.state == CompileCache::State::Missing ? "damaged" : compile::state_name(e.state);
}

// The first line of a failed entry's log, or why it cannot be read.
std::string log_first_line(const CompileCache& cache, const CompileCache::Entry& e) {
  try {
    const std::string log = cache.failure_log(e.key);
    std::string line = log.substr(0, log.find('\n'));
    if (line.size() > 160) line = line.substr(0, 160) + "...";
    return line;
  } catch (const Error& err) {
    return err.what();
  }
}

int cache_status(int argc, char** argv) {
  Args args("cache status",
            "Prints the compile cache's folder, this lathe's compiler version, each of its "
            "entries (ready modules; failed compiles with the first line of their log; damaged "
            "folders, which cleanup removes) with its size and age, the temporary folders "
            "left by processes that died, and the other compiler versions present.",
            {}, {cache_dir_option(), {"json", "", "print one JSON object instead"}});
  if (parse_or_help(args, argc, argv)) return 0;
  const CompileCache cache = open_cache(args);
  const auto entries = cache.entries();
  int temps = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache.version_dir(), ec))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) ++temps;
  struct Other {
    std::string version;
    size_t entries = 0;
    uint64_t bytes = 0;
  };
  std::vector<Other> others;
  for (const auto& v : cache.versions())
    if (v != cache.version()) others.push_back({v});
  uint64_t bytes = 0, total = 0;
  for (const auto& e : cache.entries(true)) {
    total += e.bytes;
    if (e.compiler_version == cache.version()) bytes += e.bytes;
    for (auto& o : others)
      if (o.version == e.compiler_version) ++o.entries, o.bytes += e.bytes;
  }

  if (args.flag("json")) {
    Json j = {{"root", cache.root().string()},
              {"compiler_version", cache.version()},
              {"bytes", bytes},
              {"total_bytes", total},
              {"temporary_folders", temps}};
    j["entries"] = Json::array();
    for (const auto& e : entries) {
      Json je = {{"key", e.key.dir_name()},
                 {"state", entry_state(e)},
                 {"bytes", e.bytes},
                 {"written_unix", unix_seconds(e.written)}};
      if (e.state == CompileCache::State::Failed) je["log_first_line"] = log_first_line(cache, e);
      j["entries"].push_back(je);
    }
    j["other_versions"] = Json::array();
    for (const auto& o : others)
      j["other_versions"].push_back(
          {{"compiler_version", o.version}, {"entries", o.entries}, {"bytes", o.bytes}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  int ready = 0, failed = 0;
  for (const auto& e : entries) {
    ready += e.state == CompileCache::State::Ready;
    failed += e.state == CompileCache::State::Failed;
  }
  std::cout << "cache: " << cache.root().string()
            << (fs::exists(cache.root(), ec) ? "" : " (does not exist yet)") << "\n"
            << "compiler version: " << cache.version() << "\n"
            << "entries: " << ready << " ready, " << failed << " failed, "
            << entries.size() - ready - failed << " damaged; " << format_bytes(bytes) << "\n";
  for (const auto& e : entries) {
    std::cout << "  " << e.key.dir_name() << "  " << entry_state(e) << "  " << format_bytes(e.bytes)
              << "  written " << age_text(e.written);
    if (e.state == CompileCache::State::Failed) std::cout << ": " << log_first_line(cache, e);
    std::cout << "\n";
  }
  if (temps > 0)
    std::cout << "temporary folders: " << temps
              << " (being written, or left by a process that died: lathe cache cleanup)\n";
  if (!others.empty()) {
    std::cout << "other compiler versions (lathe cache cleanup --all-versions):\n";
    for (const auto& o : others)
      std::cout << "  lathe-" << o.version << "  " << o.entries << " entries, "
                << format_bytes(o.bytes) << "\n";
  }
  std::cout << "total: " << format_bytes(total) << "\n";
  return 0;
}

int cache_cleanup(int argc, char** argv) {
  Args args("cache cleanup",
            "Removes this compiler version's entries written more than --older-than days ago, "
            "then the oldest until the rest take at most --max-size; and always the temporary "
            "folders of processes that died (or older than an hour). Each entry is moved aside "
            "before it is removed, so a process reading it sees it whole or not at all.",
            {},
            {cache_dir_option(),
             {"older-than", "DAYS", "remove entries written more than DAYS days ago"},
             {"max-size", "SIZE", "then remove the oldest until the rest fit SIZE (2G, 500M)"},
             {"all-versions", "", "apply the rules to every compiler version's entries"},
             {"dry-run", "", "print what would be removed, remove nothing"}});
  if (parse_or_help(args, argc, argv)) return 0;
  CompileCache cache = open_cache(args);
  compile::CleanupOptions o;
  if (args.has("older-than"))
    o.older_than = std::chrono::seconds(
        static_cast<int64_t>(std::llround(args.get_double("older-than", 0, 0, 1e6) * 86400)));
  if (const auto size = args.get("max-size")) o.max_bytes = parse_size(*size, "--max-size");
  o.all_versions = args.flag("all-versions");
  o.dry_run = args.flag("dry-run");
  const auto removed = cache.cleanup(o);
  uint64_t bytes = 0;
  for (const auto& r : removed) {
    bytes += r.bytes;
    std::cout << (o.dry_run ? "would remove " : "removed ") << r.path.string() << " (" << r.what
              << ", " << format_bytes(r.bytes) << ")\n";
  }
  std::cout << (o.dry_run ? "would remove " : "removed ") << removed.size() << " folders, "
            << format_bytes(bytes) << "\n";
  return 0;
}

int cache_sync(int argc, char** argv) {
  Args args("cache sync",
            "Copies every ready module of this compiler version into the cache folder DIR "
            "(same layout; e.g. a shared folder other machines fetch from), each checked "
            "against its manifest and published there atomically. Modules already there and "
            "valid are skipped; a corrupt module here is reported, not copied.",
            {}, {cache_dir_option(), {"to", "DIR", "the cache folder to copy into (required)"}});
  if (parse_or_help(args, argc, argv)) return 0;
  const auto to = args.get("to");
  if (!to) throw UsageError("lathe cache sync: give the folder to copy into with --to DIR");
  const CompileCache cache = open_cache(args);
  const auto r = cache.sync_to(*to);
  for (const auto& e : r.errors) std::cerr << "lathe cache sync: " << e << "\n";
  std::cout << "copied " << r.copied << " modules to " << *to << " (" << r.already_there
            << " already there)\n";
  if (!r.errors.empty())
    fail(r.errors.size(),
         " modules could not be copied (see above); lathe cache cleanup "
         "removes damaged ones, the next compile makes them again");
  return 0;
}

// While a fetch runs: SIGINT, SIGTERM or SIGHUP removes the temporary folders this process
// was writing modules into (a later `cache cleanup` would, but only when someone runs it),
// says so in one line and exits 128 + the signal.
class RemoveTempFoldersOnStop {
 public:
  explicit RemoveTempFoldersOnStop(fs::path version_dir) {
    sigemptyset(&signals_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals_, sig);
    pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
    thread_ = std::thread([this, dir = std::move(version_dir)] {
      while (!done_) {
        const timespec tick{0, 100 * 1000 * 1000};
        const int sig = sigtimedwait(&signals_, nullptr, &tick);
        if (sig <= 0) continue;
        std::vector<fs::path> ours;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir, ec))
          if (compile::detail::temp_name_pid(e.path().filename().string()) == getpid())
            ours.push_back(e.path());
        size_t removed = 0;
        for (const auto& p : ours) {
          for (int tries = 0; tries < 3 && fs::exists(p, ec); ++tries)
            fs::remove_all(p, ec);  // a file may appear while its folder goes
          removed += !fs::exists(p, ec);
        }
        std::cerr << "lathe cache fetch: stopped by SIG" << sigabbrev_np(sig) << "; removed "
                  << removed << " partly fetched modules\n";
        std::_Exit(128 + sig);
      }
    });
  }
  ~RemoveTempFoldersOnStop() {
    done_ = true;
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  RemoveTempFoldersOnStop(const RemoveTempFoldersOnStop&) = delete;
  RemoveTempFoldersOnStop& operator=(const RemoveTempFoldersOnStop&) = delete;

 private:
  sigset_t signals_, old_mask_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Fetches `keys` from `from` into `cache`, printing each module's outcome: what arrived on
// stdout, what did not on stderr. Returns the exit code: 0 when every module is now in the
// cache, else 1. (`fetch MODEL_DIR` and `lookup` reuse it with the keys of a model's graphs.)
int fetch_keys(const std::vector<ModuleKey>& keys, const std::string& from, CompileCache& cache) {
  int missing = 0;
  const RemoveTempFoldersOnStop cleanup(cache.version_dir());
  for (const auto& r : cache.fetch(keys, from)) {
    const bool ok = r.outcome == FetchOutcome::Fetched || r.outcome == FetchOutcome::AlreadyPresent;
    missing += !ok;
    (ok ? std::cout : std::cerr) << (ok ? "" : "lathe cache fetch: ") << r.key.dir_name() << ": "
                                 << compile::fetch_outcome_name(r.outcome) << ": " << r.message
                                 << "\n";
  }
  if (missing > 0 && keys.size() > 1)
    std::cerr << "lathe cache fetch: " << missing << " of " << keys.size()
              << " modules were not fetched\n";
  return missing > 0 ? 1 : 0;
}

// The options that say which modules a model needs: how it runs (as generate's), which prompt
// lengths, which logit rows; the compile cache; where MODEL is.
std::vector<OptionSpec> model_module_options() {
  std::vector<OptionSpec> o;
  for (auto& r : runtime_options())
    if (r.name != "eager" && r.name != "compiled" && r.name != "recompile") o.push_back(r);
  for (auto& m : model_options()) o.push_back(m);
  o.push_back({"prompt-tokens", "N",
               "the longest prompt to cover (default 256, the longest step: longer prompts run "
               "in steps of 256)"});
  o.push_back({"all-logits", "",
               "the modules of steps that want every row's logits (lathe logits), not only the "
               "last row's (generate)"});
  return o;
}

// `s` and spaces up to `width` columns (one at least).
std::string pad(const std::string& s, size_t width) {
  return s + std::string(s.size() < width ? width - s.size() : 1, ' ');
}

// A module a model needs: its step bucket and key.
struct NeededModule {
  int64_t tokens, rows;
  ModuleKey key;
};

// The modules `lathe generate --compiled` (or `lathe logits --compiled` with --all-logits)
// needs for MODEL with these options: the decode step's, and one per prompt bucket (powers of
// two) up to --prompt-tokens. They are keyed as the engine keys them (models/engine.h's
// buckets, compile/compiler.h's flags), on this machine's kernels and --threads.
std::vector<NeededModule> needed_modules(const Args& args) {
  const std::string dir = resolve_model_arg(args.positionals()[0], args);
  auto rt = load_runtime(dir, args, /*compiled_options=*/false);
  const auto* model = dynamic_cast<const GraphModel*>(rt->model.get());
  if (!model) fail(dir, ": ", rt->model->info().architecture, " does not run on the engine");
  const int64_t prompt = args.get_int("prompt-tokens", 256, 1, int64_t{1} << 22);
  const bool all_logits = args.flag("all-logits");
  const Engine engine(*model, rt->ctx);
  const Backend& backend = cpu_backend(rt->ctx.reference_kernels);
  const int64_t max_context = context_bucket(rt->max_seq);
  const int64_t longest = std::min(prompt, GraphModel::kDefaultMaxStepTokens);
  std::vector<StepBucket> buckets = {{1, 1}};
  for (int64_t t = 2; t / 2 < longest; t *= 2) buckets.push_back({t, all_logits ? t : 1});
  std::vector<NeededModule> out;
  for (const StepBucket& b : buckets) {
    const compile::Flags flags =
        compile::step_flags(backend, rt->pool->size(), max_context, b.tokens, b.rows);
    out.push_back(
        {b.tokens, b.rows, compile::module_key(engine.build_graph(b.tokens, b.rows), flags)});
  }
  return out;
}

int cache_lookup(int argc, char** argv) {
  std::vector<OptionSpec> options = model_module_options();
  options.push_back({"json", "", "print one JSON object instead"});
  Args args("cache lookup",
            "The compiled modules MODEL needs with these options (as lathe generate --compiled "
            "runs it: --dtype, --quantize, --threads, --max-seq, this machine's kernels) and "
            "whether this cache has each: the decode step's, and one per prompt bucket (2, 4, "
            "8, ... tokens) up to --prompt-tokens. A missing module is compiled on first use; "
            "lathe cache fetch MODEL --from fetches those another cache has.",
            {"MODEL"}, options);
  if (parse_or_help(args, argc, argv)) return 0;
  const std::vector<NeededModule> needed = needed_modules(args);
  CompileCache cache = open_cache(args);
  Json rows = Json::array();
  int ready = 0;
  for (const NeededModule& m : needed) {
    const CompileCache::State state = cache.state(m.key);
    ready += state == CompileCache::State::Ready;
    rows.push_back({{"tokens", m.tokens},
                    {"rows", m.rows},
                    {"module", m.key.dir_name()},
                    {"state", compile::state_name(state)}});
  }
  if (args.flag("json")) {
    std::cout << Json{{"cache", cache.version_dir().string()}, {"modules", rows}}.dump(2) << "\n";
    return 0;
  }
  std::cout << "compile cache " << cache.version_dir().string() << ": " << ready << " of "
            << needed.size() << " modules ready\n";
  for (const NeededModule& m : needed) {
    std::cout << "  " << pad(m.tokens == 1 ? "decode" : cat("prompt <= ", m.tokens), 16)
              << pad(compile::state_name(cache.state(m.key)), 9) << m.key.dir_name() << "\n";
  }
  return 0;
}

// Args keeps the last value of a repeated option, so the values of a repeatable one are
// taken out of argv first.
std::vector<std::string> take_repeated(std::vector<char*>& argv, const std::string& name,
                                       const std::string& command) {
  std::vector<std::string> values;
  std::vector<char*> rest;
  const std::string flag = "--" + name;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string a = argv[i];
    if (a == flag) {
      if (i + 1 >= argv.size() || std::string(argv[i + 1]).rfind("--", 0) == 0)
        throw UsageError(cat("lathe ", command, ": ", flag, " needs a value"));
      values.push_back(argv[++i]);
    } else if (a.rfind(flag + "=", 0) == 0) {
      values.push_back(a.substr(flag.size() + 1));
    } else {
      rest.push_back(argv[i]);
    }
  }
  argv = rest;
  return values;
}

// lathe cache fetch MODEL --from URL|DIR: the modules MODEL needs that FROM has.
int fetch_model(int argc, char** argv) {
  std::vector<OptionSpec> options = model_module_options();
  options.push_back({"from", "URL|DIR", "the cache to fetch from (required)"});
  Args args("cache fetch", "", {"MODEL"}, options);
  if (parse_or_help(args, argc, argv)) return 0;
  const auto from = args.get("from");
  if (!from) throw UsageError("lathe cache fetch: give the cache to fetch from with --from");
  std::vector<ModuleKey> keys;
  for (const NeededModule& m : needed_modules(args)) keys.push_back(m.key);
  CompileCache cache = open_cache(args);
  int here = 0, bad = 0;
  const RemoveTempFoldersOnStop cleanup(cache.version_dir());
  for (const auto& r : cache.fetch(keys, *from)) {
    const bool ok = r.outcome == FetchOutcome::Fetched || r.outcome == FetchOutcome::AlreadyPresent;
    here += ok;
    // Not every bucket need have been compiled there: a missing one is compiled on first use.
    bad += r.outcome == FetchOutcome::Error || r.outcome == FetchOutcome::RemoteFailed;
    (r.outcome == FetchOutcome::Error ? std::cerr : std::cout)
        << r.key.dir_name() << ": " << compile::fetch_outcome_name(r.outcome) << ": " << r.message
        << "\n";
  }
  std::cout << here << " of " << keys.size() << " modules are in the cache\n";
  if (bad > 0) fail(bad, " modules could not be fetched (above)");
  return 0;
}

int cache_fetch(int argc, char** argv) {
  Args args("cache fetch",
            "Fetches modules of this compiler version from another cache: FROM is an http:// "
            "or https:// URL or a folder holding the same layout (e.g. a folder served by any "
            "static file server, or filled by lathe cache sync). Each module's manifest.json "
            "must name this compiler version and its `done` marker must be there; each file "
            "is checked against its size and sha256 before the module is published here, so a "
            "partial or corrupt download never enters the cache. A module that failed to "
            "compile there is reported, not fetched. Exit code 1 unless every module is here "
            "afterwards.",
            {},
            {cache_dir_option(),
             {"from", "URL|DIR", "the cache to fetch from (required)"},
             {"key", "KEY", "a module, MODULE_<graph hash>+<flags hash> (repeatable)"}});
  std::vector<char*> rest(argv, argv + argc);
  const auto key_texts = take_repeated(rest, "key", "cache fetch");
  if (key_texts.empty() && rest.size() > 3 && std::string(rest[3]).rfind("-", 0) != 0)
    return fetch_model(static_cast<int>(rest.size()), rest.data());
  if (parse_or_help(args, static_cast<int>(rest.size()), rest.data())) return 0;
  const auto from = args.get("from");
  if (!from) throw UsageError("lathe cache fetch: give the cache to fetch from with --from");
  if (key_texts.empty())
    throw UsageError("lathe cache fetch: give the modules to fetch with --key MODULE_<g>+<f>");
  std::vector<ModuleKey> keys;
  for (const auto& k : key_texts) {
    try {
      keys.push_back(ModuleKey::parse(k));
    } catch (const Error& e) {
      throw UsageError(cat("lathe cache fetch: --key: ", e.what()));
    }
  }
  CompileCache cache = open_cache(args);
  return fetch_keys(keys, *from, cache);
}

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);
};

// Adding a subcommand: a function above, a row here, a line in kCacheUsage.
constexpr Subcommand kSubcommands[] = {
    {"status", cache_status}, {"lookup", cache_lookup}, {"cleanup", cache_cleanup},
    {"sync", cache_sync},     {"fetch", cache_fetch},
};

}  // namespace

int cmd_cache(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  for (const auto& s : kSubcommands)
    if (sub == s.name) return s.run(argc, argv);
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << kCacheUsage;
    return 0;
  }
  std::cerr << (sub.empty() ? "" : "lathe cache: unknown subcommand \"" + sub + "\"\n")
            << kCacheUsage;
  return 2;
}

}  // namespace lathe
