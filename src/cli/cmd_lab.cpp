// lathe lab run|report|diff|merge|catalog|serve: the compatibility lab (docs/lab.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "compile/cache.h"
#include "core/error.h"
#include "core/version.h"
#include "io/durable.h"
#include "io/hub_cache.h"
#include "lab/catalog.h"
#include "lab/dataset.h"
#include "lab/fluency.h"
#include "lab/report.h"
#include "lab/runner.h"
#include "lab/subprocess.h"
#include "models/registry.h"
#include "serve/server.h"
#include "shard/planner.h"
#include "shard/worker.h"

namespace lathe {
namespace fs = std::filesystem;
namespace {

const char* kLabUsage = R"(usage: lathe lab SUBCOMMAND [ARGS] [--help]

The compatibility lab: runs each catalog model through the protocol in its own process,
compares it with transformers, and writes a Parquet dataset.

subcommands:
  run                  run a sweep (default: the bundled catalog of tiny models)
  report [PATH ...]    coverage by architecture and status (Markdown, or --json)
  diff A B             what passed in A and fails in B, and the reverse
  merge OUT IN [IN ...]
                       merge sweeps (e.g. the shards of a job array) into one dataset
  catalog refresh      read the Hub's model listing into catalog files
  serve                the explorer: a web page and JSON API over the dataset (localhost)
  judge [TEXT]         the fluency judge of sharded runs: a small model scores a text

lathe lab SUBCOMMAND --help describes each.
)";

const char* kCatalogUsage = R"(usage: lathe lab catalog SUBCOMMAND [ARGS] [--help]

Catalog files: which models a sweep runs (docs/lab.md).

subcommands:
  refresh              read the Hub's model listing into catalog files (see --help)
)";

// A file of the source tree the lab reads (the tiny fixtures, the reference bridge): in the
// working directory when it is there, else in the copy installed beside the binary
// (PREFIX/share/lathe for PREFIX/bin/lathe, `cmake --install`), else in the source tree this
// binary was built from.
fs::path source_path(const std::string& relative) {
  if (fs::exists(relative)) return fs::absolute(relative);
  std::error_code ec;
  const fs::path installed =
      self_executable().parent_path().parent_path() / "share" / "lathe" / relative;
  if (fs::exists(installed, ec)) return installed;
  return fs::path(kLatheSourceDir) / relative;
}

// Options shared by `run` and the per-model `run-one`.
std::vector<OptionSpec> protocol_options() {
  std::vector<OptionSpec> options = {
      {"dtype", "f32|bf16", "weight dtype the models run in (default f32)"},
      {"threads", "N", "threads per model (default 1: one core)"},
      {"max-new-tokens", "N", "greedy tokens to generate and compare (default 32)"},
      {"prompt", "TEXT", "prompt for models whose entry gives no prompt ids"},
      {"reference-cache", "DIR", "reference cache (default ~/.cache/lathe/reference)"},
      {"reference-python", "PY",
       "Python with torch and transformers for the reference bridge (default: "
       "$LATHE_REFERENCE_PYTHON, else python3 when it has both and some model is not a tiny "
       "fixture; \"none\": only cached references)"},
      {"reference-bridge", "FILE", "the bridge script (default tools/reference/bridge.py)"},
      {"reference-timeout", "S", "seconds the bridge may take per model (default 3600)"},
      {"eager", "", "run the models unplanned, node by node, instead of compiled"},
      {"cache-dir", "DIR",
       "the compile cache of the compiled mode, the default (default: $LATHE_CACHE_DIR, else "
       "~/.cache/lathe/compile-cache; docs/compile-cache.md)"},
      {"cache-remote", "URL|DIR",
       "where this cache's modules are published (lathe cache sync --to): the rows' fetch "
       "commands name it (default: the cache folder itself)"},
      {"judge-model", "DIR",
       "the fluency judge of sharded runs (docs/lab.md; default $LATHE_JUDGE_MODEL, else "
       "~/.cache/lathe/smollm2-135m-instruct when it is there)"},
  };
  for (auto& o : sharding_options()) options.push_back(o);
  return options;
}

// python3 on PATH when it imports torch and transformers (checked once, within 120 s), else "".
std::string find_reference_python() {
  ProcessOptions p;
  p.argv = {"python3", "-c", "import torch, transformers"};
  p.log_file = "/dev/null";
  p.timeout_seconds = 120;
  const ProcessResult r = run_process(p);
  return r.exit_code == 0 ? "python3" : "";
}

ProtocolOptions read_protocol_options(const Args& args, bool detect_python) {
  ProtocolOptions p;
  p.dtype = args.get_or("dtype", "f32");
  if (p.dtype != "f32" && p.dtype != "bf16")
    throw UsageError(cat("--dtype must be f32 or bf16, got \"", p.dtype, "\""));
  p.threads = static_cast<int>(args.get_int("threads", 1, 1, 1024));
  p.max_new_tokens = args.get_int("max-new-tokens", 32, 1, 4096);
  p.prompt_text = args.get_or("prompt", p.prompt_text);
  p.compiled = !args.flag("eager");
  p.compile_cache = fs::absolute(args.get_or("cache-dir", compile::default_cache_root().string()));
  p.cache_remote = args.get_or("cache-remote", "");
  p.tp = static_cast<int>(args.get_int("tp", 1, 1, 256));
  p.ep = static_cast<int>(args.get_int("ep", 1, 1, 256));
  if (p.tp > 1 && p.ep > 1) throw UsageError("--tp and --ep exclude each other");
  if (!shard::Worker::current())  // a worker's launcher planned already
    if (auto cores = cores_option(args)) {
      p.max_cores = cores->max_cores;
      p.core_memory = cores->core_memory;
    }
  if (auto j = args.get("judge-model")) {
    p.judge_model = fs::absolute(*j);
  } else if (p.tp > 1 || p.ep > 1) {
    const fs::path d = default_judge_model();
    if (fs::exists(d / "config.json")) p.judge_model = d;
  }
  const char* home = std::getenv("HOME");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const fs::path cache_home = xdg && *xdg ? fs::path(xdg) : fs::path(home ? home : ".") / ".cache";
  p.reference_cache = args.get_or("reference-cache", (cache_home / "lathe" / "reference").string());
  std::string python = args.get_or("reference-python", "");
  if (python.empty())
    if (const char* env = std::getenv("LATHE_REFERENCE_PYTHON")) python = env;
  if (python.empty() && detect_python) python = find_reference_python();
  if (!python.empty() && python != "none") {
    BridgeOptions b;
    b.python = python;
    b.script = args.get_or("reference-bridge", source_path("tools/reference/bridge.py").string());
    b.timeout_seconds = args.get_double("reference-timeout", 3600);
    p.bridge = b;
  }
  return p;
}

std::pair<int, int> parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  try {
    if (slash != std::string::npos) {
      size_t a = 0, b = 0;
      const int i = std::stoi(s.substr(0, slash), &a);
      const int n = std::stoi(s.substr(slash + 1), &b);
      if (a == slash && b == s.size() - slash - 1 && n >= 1 && i >= 0 && i < n) return {i, n};
    }
  } catch (const std::exception&) {
  }
  throw UsageError(cat("--shard must be I/N with 0 <= I < N (e.g. 0/4), got \"", s, "\""));
}

// --download and its options (lab/download.h); nullopt without --download, where the others
// are usage errors. Every ranked entry of the catalog must be a Hub id.
std::optional<DownloadOptions> read_download_options(const Args& args, const Catalog& catalog) {
  if (!args.flag("download")) {
    for (const char* o : {"max-download-gb", "keep-downloads", "endpoint", "download-timeout"})
      if (args.has(o)) throw UsageError(cat("lab run: --", o, " needs --download"));
    return std::nullopt;
  }
  if (!args.has("catalog"))
    throw UsageError(
        "lab run: --download pulls the ranked models of a catalog: give --catalog FILE");
  if (hub::offline_from_env())
    fail(
        "--download needs the network, and HF_HUB_OFFLINE is set; unset it, or drop "
        "--download to run what the Hugging Face cache holds");
  DownloadOptions d;
  const double gb = args.get_double("max-download-gb", kDefaultMaxDownloadGb);
  if (!(gb >= 0 && gb <= 1e6))
    throw UsageError("--max-download-gb must be a number of GB from 0 to 1000000");
  d.max_bytes = static_cast<int64_t>(gb * 1e9);
  d.keep = args.flag("keep-downloads");
  d.timeout_seconds = args.get_double("download-timeout", 3600);
  if (!(d.timeout_seconds > 0))
    throw UsageError("--download-timeout must be a positive number of seconds");
  d.endpoint = args.get_or("endpoint", hub::endpoint_from_env());
  while (!d.endpoint.empty() && d.endpoint.back() == '/') d.endpoint.pop_back();
  if (d.endpoint.rfind("http://", 0) != 0 && d.endpoint.rfind("https://", 0) != 0)
    throw UsageError(
        cat("--endpoint must be an http:// or https:// URL, got \"", d.endpoint, "\""));
  const std::string file = *args.get("catalog");
  for (size_t i = 0; i < catalog.models.size(); ++i) {
    const CatalogEntry& e = catalog.models[i];
    if (!e.path.empty() || !e.fixture.empty()) continue;
    const std::string where = cat(file, " models[", i, "]");
    if (!hub::parse_model_ref(e.id))
      fail(where, ": field \"id\" \"", e.id,
           "\" is not a Hub model id ORG/NAME, which --download needs");
    if (!hub::parse_model_ref(e.id + "@" + e.revision))
      fail(where, ": field \"revision\" \"", e.revision, "\" is not a Hub revision");
  }
  return d;
}

int lab_run(int argc, char** argv) {
  std::vector<OptionSpec> options = {
      {"catalog", "FILE",
       "catalog file to run (default: the bundled catalog); ranked models run when their "
       "snapshot is in the Hugging Face cache"},
      {"fixtures", "DIR",
       "tiny fixtures for the bundled catalog (default tests/fixtures/tiny; not with --catalog)"},
      {"model", "DIR[,DIR]", "also run these local checkpoint folders (not with --catalog)"},
      {"hf-cache", "DIR",
       "also run the models of this Hugging Face hub cache (default: $HF_HUB_CACHE, "
       "$HF_HOME/hub or ~/.cache/huggingface/hub when it exists)"},
      {"no-hf-cache", "", "do not look for models in the Hugging Face cache"},
      {"out", "DIR", "the sweep's folder: journal, logs, dataset (default lab-results)"},
      {"resume", "", "continue the sweep in --out where it stopped"},
      {"shard", "I/N", "run only entries i with i % N == I (for job arrays)"},
      {"timeout", "S", "wall-clock seconds per model (default 600)"},
      {"memory-limit", "MB",
       "memory per model in MiB (default 8192); its process may map 512 MiB more for code"},
      {"download", "",
       "pull the ranked models of --catalog that the Hugging Face cache lacks (lathe pull, "
       "from --endpoint) when they fit the budget below, and run them"},
      {"max-download-gb", "GB",
       "with --download: the most one model may download, in GB of 10^9 bytes (default 16), "
       "known from the Hub's file listing before anything is downloaded; a model over it, "
       "whose weights exceed --memory-limit, or that does not fit the cache's free space is "
       "not downloaded: its row is untested with the reason"},
      {"keep-downloads", "",
       "with --download: keep the models it pulled in the cache (default: what a pull added "
       "is removed once the model's row is written; models already in the cache before are "
       "never removed)"},
      {"endpoint", "URL",
       "with --download: the Hub or a mirror (default $HF_ENDPOINT, else "
       "https://huggingface.co); a token comes from $HF_TOKEN as for lathe pull"},
      {"download-timeout", "S",
       "with --download: seconds one model's pull may take (default 3600)"},
      {"json", "", "print the report as JSON instead of Markdown"},
      {"quiet", "", "no progress lines on stderr"},
  };
  for (auto& o : protocol_options()) options.push_back(o);
  Args args("lab run",
            "Runs each catalog model in its own process: fetch, inspect, plan, load, compile, "
            "generate 32 greedy tokens, compare with transformers. Rows are journaled as they "
            "finish (OUT/rows.jsonl) and published as Parquet (OUT/dataset/).",
            {}, options);
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  std::optional<fs::path> hf_hub;
  if (auto h = args.get("hf-cache"))
    hf_hub = *h;
  else if (!args.flag("no-hf-cache"))
    hf_hub = default_hf_hub_cache();
  // A folder named on the command line that is not there is an error, not an empty sweep.
  std::error_code ec;
  if (auto h = args.get("hf-cache"); h && !fs::is_directory(*h, ec))
    fail(*h, ": no such folder (--hf-cache)");
  Catalog catalog;
  if (auto file = args.get("catalog")) {
    // A catalog names every model the sweep runs; --model and --fixtures add to the bundled
    // one only, and were once dropped here without a word.
    for (const char* other : {"model", "fixtures"})
      if (args.has(other))
        throw UsageError(cat("lab run: --", other,
                             " adds to the bundled catalog and cannot be used with --catalog; "
                             "list those models in the catalog file instead"));
    catalog = read_catalog(*file);
  } else {
    std::vector<fs::path> local;
    if (auto m = args.get("model")) {
      std::string rest = *m;
      for (size_t p; !rest.empty(); rest = p == std::string::npos ? "" : rest.substr(p + 1)) {
        p = rest.find(',');
        if (!rest.substr(0, p).empty()) local.emplace_back(rest.substr(0, p));
      }
    }
    for (const auto& dir : local)
      if (!fs::is_directory(dir, ec)) fail(dir.string(), ": no such model folder (--model)");
    const auto fixtures = args.get("fixtures");
    const fs::path fixture_dir =
        fixtures ? fs::path(*fixtures) : source_path("tests/fixtures/tiny");
    if (fixtures && !fs::is_directory(fixture_dir, ec))
      fail(*fixtures, ": no such fixture folder (--fixtures)");
    catalog = default_catalog(fixture_dir, local, hf_hub);
    if (fixtures && std::none_of(catalog.models.begin(), catalog.models.end(),
                                 [](const CatalogEntry& e) { return !e.fixture.empty(); }))
      fail(*fixtures, ": no tiny fixtures in this folder (--fixtures: folders with goldens.json)");
    if (catalog.models.empty())
      fail(fixture_dir.string(),
           ": no tiny fixtures here, and no --model or Hugging Face cache models to run");
  }
  SweepOptions o;
  o.download = read_download_options(args, catalog);
  o.out = fs::absolute(args.get_or("out", "lab-results"));
  o.resume = args.flag("resume");
  if (auto s = args.get("shard")) std::tie(o.shard_index, o.shard_count) = parse_shard(*s);
  o.timeout_seconds = args.get_double("timeout", 600);
  if (!(o.timeout_seconds > 0)) throw UsageError("--timeout must be a positive number of seconds");
  o.memory_limit_bytes = args.get_int("memory-limit", 8192, 1, int64_t{1} << 24) << 20;
  bool all_fixtures = true;
  for (const auto& e : catalog.models) all_fixtures = all_fixtures && !e.fixture.empty();
  o.protocol = read_protocol_options(args, !all_fixtures);
  o.lathe_executable = self_executable();
  o.hf_hub = hf_hub;
  if (!args.flag("quiet")) o.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  const SweepResult r = run_sweep(catalog, o);
  if (args.flag("json")) {
    std::cout << report_json(r.rows).dump(1) << "\n";
  } else {
    std::cout << report_markdown(r.rows);
    std::cout << "\nran " << r.ran << " models";
    if (r.resumed) std::cout << " (" << r.resumed << " rows resumed from the journal)";
    if (!r.not_available.empty())
      std::cout << "; " << r.not_available.size()
                << " catalog models are not on this machine (not in the Hugging Face cache) "
                   "and stay untested";
    if (o.download)
      std::cout << "; downloaded " << r.downloaded << " models ("
                << static_cast<double>(r.downloaded_bytes) / 1e6 << " MB), " << r.removed
                << " removed after their run";
    std::cout << "; dataset:";
    for (const auto& f : r.dataset_files) std::cout << " " << f.string();
    std::cout << "\n";
  }
  return 0;
}

int lab_run_one(int argc, char** argv) {
  std::vector<OptionSpec> options = {
      {"entry", "FILE", "a catalog file holding the one entry to run"},
      {"result", "FILE", "where the row is written (JSON)"},
      {"progress", "FILE", "each stage's name is appended as it starts"},
      {"work", "DIR", "where tiny checkpoints are built"},
  };
  for (auto& o : protocol_options()) options.push_back(o);
  Args args("lab run-one",
            "Runs the protocol for one model in this process (the sweep starts one per model).", {},
            options);
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  for (const char* required : {"entry", "result", "work"})
    if (!args.has(required)) throw UsageError(cat("lab run-one: --", required, " is required"));
  const Catalog one = read_catalog(*args.get("entry"));
  if (one.models.size() != 1) fail(*args.get("entry"), ": must hold exactly one model");
  ProtocolOptions p = read_protocol_options(args, false);
  p.work_dir = *args.get("work");
  p.progress_file = args.get_or("progress", "");
  p.memory_limit_bytes = one.models[0].memory_limit_bytes;
  const LabRow row = run_protocol(one.models[0], p);
  // A sharded run: every rank ran the protocol; rank 0's row is the run's.
  if (shard::Worker* w = shard::Worker::current(); !w || w->spec().rank == 0)
    write_file_atomic(*args.get("result"), row_to_json(row).dump() + "\n");
  return 0;
}

std::vector<LabRow> rows_of(const std::vector<std::string>& paths) {
  std::vector<LabRow> rows;
  for (const auto& p : paths)
    for (auto& r : read_rows(p)) rows.push_back(std::move(r));
  return rows;
}

// The ranking files of `dir` (<task>-<view>.json, as `lab catalog refresh` writes them), each
// with its coverage by the rows; none when `dir` is "none" or, left at its default, absent.
std::vector<Json> rankings_coverage(const std::string& dir, bool given,
                                    const std::vector<LabRow>& rows) {
  std::vector<Json> out;
  if (dir == "none") return out;
  if (!fs::is_directory(dir)) {
    if (given) fail(dir, ": not a folder of ranking files (--catalog)");
    return out;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const auto implemented = [](const std::string& arch) {
    return find_architecture(arch) != nullptr;
  };
  for (const auto& f : files) {
    const Catalog c = read_catalog(f);
    if (c.view != "local") out.push_back(ranking_coverage_json(c, rows, implemented));
  }
  return out;
}

int lab_report(int argc, char** argv) {
  Args args("lab report",
            "Coverage of the Hub's rankings (the share of their models and architectures lathe "
            "implements, and verified to pass by the rows) and by architecture and status of "
            "one or more sweeps or datasets (a sweep folder, a dataset folder or .parquet files; "
            "default lab-results).",
            {"PATH..."},
            {{"catalog", "DIR",
              "ranking files <task>-<view>.json (default data/catalog when it exists; none: "
              "no rankings)"},
             {"json", "", "print JSON instead of Markdown"}});
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  std::vector<std::string> paths = args.positionals();
  if (paths.empty()) paths.push_back("lab-results");
  const auto rows = rows_of(paths);
  const std::vector<Json> rankings =
      rankings_coverage(args.get_or("catalog", "data/catalog"), args.has("catalog"), rows);
  if (args.flag("json")) {
    Json j = report_json(rows);
    j["rankings"] = rankings;
    std::cout << j.dump(1) << "\n";
  } else {
    std::cout << report_markdown(rows, rankings);
  }
  return 0;
}

int lab_diff(int argc, char** argv) {
  Args args("lab diff", "What passed in A and does not in B (regressions), and the reverse.",
            {"A", "B"}, {{"json", "", "print JSON instead of Markdown"}});
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  const Json d = diff_json(read_rows(args.positionals()[0]), read_rows(args.positionals()[1]));
  if (args.flag("json"))
    std::cout << d.dump(1) << "\n";
  else
    std::cout << diff_markdown(d);
  return 0;
}

int lab_merge(int argc, char** argv) {
  Args args("lab merge",
            "Merges sweep folders (e.g. the shards of a job array) into OUT: one journal and "
            "one dataset. A model present twice keeps the row that finished last.",
            {"OUT", "IN", "IN..."}, {});
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  const auto& pos = args.positionals();
  const std::vector<fs::path> inputs(pos.begin() + 1, pos.end());
  const auto rows = merge_sweeps(inputs, pos[0]);
  std::cerr << "merged " << rows.size() << " rows from " << inputs.size() << " sweeps into "
            << pos[0] << "\n";
  return 0;
}

int lab_catalog(int argc, char** argv) {
  const std::string sub = argc > 3 ? argv[3] : "";
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << kCatalogUsage;
    return 0;
  }
  if (sub != "refresh") {
    std::cerr << (sub.empty() ? "" : "lathe lab catalog: unknown subcommand \"" + sub + "\"\n")
              << kCatalogUsage;
    return 2;
  }
  Args args("lab catalog refresh",
            "Reads the Hub's public model listing (trending and downloads rankings per task) "
            "into catalog files OUT/<task>-<view>.json.",
            {},
            {{"endpoint", "URL", "the Hub (default $HF_ENDPOINT, else https://huggingface.co)"},
             {"task", "T[,T]", "pipeline tags (default text-generation,image-text-to-text)"},
             {"view", "V[,V]", "rankings (default trending,downloads)"},
             {"limit", "N", "models per ranking (default 100)"},
             {"out", "DIR", "where the catalog files go (default data/catalog)"}});
  args.parse(argc, argv, 4);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  const char* env = std::getenv("HF_ENDPOINT");
  const std::string endpoint =
      args.get_or("endpoint", env && *env ? env : "https://huggingface.co");
  const fs::path out = args.get_or("out", "data/catalog");
  const int limit = static_cast<int>(args.get_int("limit", 100, 1, 1000));
  auto split = [](std::string s) {
    std::vector<std::string> parts;
    for (size_t p; !s.empty(); s = p == std::string::npos ? "" : s.substr(p + 1)) {
      p = s.find(',');
      if (!s.substr(0, p).empty()) parts.push_back(s.substr(0, p));
    }
    return parts;
  };
  fs::create_directories(out);
  for (const auto& task : split(args.get_or("task", "text-generation,image-text-to-text")))
    for (const auto& view : split(args.get_or("view", "trending,downloads"))) {
      const Catalog c = fetch_hub_listing(endpoint, task, view, limit);
      const fs::path file = out / cat(task, "-", view, ".json");
      write_catalog(c, file);
      std::cerr << "wrote " << c.models.size() << " models to " << file.string() << "\n";
    }
  return 0;
}

int lab_serve(int argc, char** argv) {
  Args args(
      "lab serve",
      "Serves the explorer (docs/explorer.md): a read-only web page and JSON API over every "
      "Parquet file below --data, rescanned when the files change.",
      {},
      {{"port", "N", "TCP port (default 8080; 0 picks a free one)"},
       {"host", "ADDR", "address to listen on (default 127.0.0.1: this machine only)"},
       {"data", "DIR", "a sweep folder, dataset folder or .parquet file (default lab-results)"},
       {"catalog", "DIR", "ranking files <task>-<view>.json (default data/catalog)"},
       {"web", "DIR", "serve the page from this folder (default: the page built into lathe)"}});
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  ServeOptions o;
  o.port = static_cast<int>(args.get_int("port", 8080, 0, 65535));
  o.host = args.get_or("host", "127.0.0.1");
  o.data = args.get_or("data", "lab-results");
  o.catalog = args.get_or("catalog", "data/catalog");
  o.web = args.get_or("web", "");
  o.on_listening = [&o](const std::string& url) {
    std::cout << "serving " << url << std::endl;
    if (!fs::exists(o.data))
      std::cerr << o.data.string() << " does not exist yet; its files are served once it does\n";
  };
  return serve(o);
}

}  // namespace

int cmd_lab(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  if (sub == "run") return lab_run(argc, argv);
  if (sub == "run-one") return lab_run_one(argc, argv);
  if (sub == "report") return lab_report(argc, argv);
  if (sub == "diff") return lab_diff(argc, argv);
  if (sub == "merge") return lab_merge(argc, argv);
  if (sub == "catalog") return lab_catalog(argc, argv);
  if (sub == "serve") return lab_serve(argc, argv);
  if (sub == "judge") return lab_judge(argc, argv);
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << kLabUsage;
    return 0;
  }
  std::cerr << (sub.empty() ? "" : "lathe lab: unknown subcommand \"" + sub + "\"\n") << kLabUsage;
  return 2;
}

}  // namespace lathe
