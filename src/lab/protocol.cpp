#include "lab/protocol.h"

#include <gnu/libc-version.h>
#include <openssl/crypto.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>

#include "compile/cache.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/version.h"
#include "generate/generate.h"
#include "io/checkpoint.h"
#include "io/durable.h"
#include "io/json.h"
#include "io/tiny_checkpoint.h"
#include "lab/compare.h"
#include "lab/dataset.h"
#include "lab/fluency.h"
#include "lab/golden_check.h"
#include "models/engine.h"
#include "models/features.h"
#include "models/registry.h"
#include "shard/planner.h"
#include "shard/worker.h"
#include "tokenizer/tokenizer.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0)
      if (const size_t p = line.find(':'); p != std::string::npos) return line.substr(p + 2);
  return "unknown";
}

// Stage bookkeeping: names each stage as it starts (in the progress file, so the sweep
// knows where a killed process was) and records when it ended.
class Stages {
 public:
  Stages(LabRow& row, const fs::path& progress) : row_(row) {
    if (!progress.empty()) {
      progress_.open(progress, std::ios::app);
      if (!progress_) fail(progress.string(), ": cannot write the progress file");
    }
  }
  void enter(const std::string& stage) {
    close_current();
    current_ = stage;
    row_.stage = stage;
    if (progress_.is_open()) progress_ << stage << "\n" << std::flush;
  }
  void close_current() {
    if (!current_.empty()) row_.stage_seconds.emplace_back(current_, elapsed());
    current_.clear();
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  LabRow& row_;
  std::ofstream progress_;
  std::string current_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// A must-fail fixture's fault (catalog field "inject", NumericFault in catalog.h): in the
// checkpoint (a weight, config.json) or in the decode check's cache.
bool edits_checkpoint(const NumericFault& f) {
  switch (f.kind) {
    case NumericFault::Kind::Weight:
    case NumericFault::Kind::Config:
      return true;
    case NumericFault::Kind::None:
    case NumericFault::Kind::Cache:
      return false;
  }
  return false;
}

fs::path checkpoint_dir(const CatalogEntry& e, const ProtocolOptions& o) {
  if (!e.fixture.empty()) {
    if (!edits_checkpoint(numeric_fault(e.inject))) return o.work_dir / e.fixture.filename();
    // A folder of its own, named by a hash of the fault (any characters are safe).
    return o.work_dir /
           cat(e.fixture.filename().string(), ".perturbed-", std::hash<std::string>{}(e.inject));
  }
  return e.path;
}

// Builds a tiny fixture's checkpoint once; later runs reuse it.
void fetch_tiny(const CatalogEntry& e, const fs::path& dir) {
  if (fs::exists(dir / ".lathe-built")) return;
  const fs::path tmp = fs::path(dir).concat(cat(".tmp", ::getpid()));
  fs::remove_all(tmp);
  std::error_code ec;
  try {
    build_tiny_checkpoint(e.fixture, tmp, {});
    const NumericFault f = numeric_fault(e.inject);
    if (f.kind == NumericFault::Kind::Weight) scale_checkpoint_tensor(tmp, f.target, 1.01f);
    if (f.kind == NumericFault::Kind::Config) edit_config_number(tmp, f.target, f.factor, f.offset);
    write_file_atomic(tmp / ".lathe-built", e.fixture.string() + "\n");
    fs::remove_all(dir, ec);
    fs::rename(tmp, dir, ec);
    if (ec) fail(dir.string(), ": cannot place the built checkpoint: ", ec.message());
  } catch (...) {
    fs::remove_all(tmp, ec);  // no half-built folder is left behind
    throw;
  }
}

std::vector<int32_t> golden_prompt(const fs::path& fixture) {
  const Json g = read_json_file(fixture / "goldens.json");
  std::vector<int32_t> ids;
  for (const Json& x : g.at("prompt_ids")) ids.push_back(x.get<int32_t>());
  return ids;
}

std::string run_script(const CatalogEntry& e, const ProtocolOptions& o,
                       const std::vector<int32_t>& prompt, int64_t max_seq) {
  std::string s = cat("# lathe ", kLatheVersion, " at commit ", kLatheCommit,
                      "; in a lathe checkout of that commit:\ntools/setup.sh\n");
  std::string model = "MODEL";
  if (!e.fixture.empty()) {
    model = "/tmp/" + e.fixture.filename().string();
    s += cat("build/lathe tiny build tests/fixtures/tiny/", e.fixture.filename().string(), " ",
             model, "\n");
  } else if (e.revision == "local") {
    model = e.path.string();
    s += "# MODEL is a local folder: " + e.path.string() + "\n";
  } else {
    model = "model";
    s += cat("hf download ", e.id, " --revision ", e.revision, " --local-dir ", model, "\n");
  }
  s += cat("build/lathe generate ", shell_quote(model), " --prompt-ids ",
           shell_quote(Json(prompt).dump()), " --max-new-tokens ", o.max_new_tokens,
           " --greedy --dtype ", o.dtype, " --threads ", o.threads, " --max-seq ", max_seq,
           o.compiled ? " --compiled" : "", o.tp > 1 ? cat(" --tp ", o.tp) : "",
           o.ep > 1 ? cat(" --ep ", o.ep) : "", " --json\n");
  return s;
}

// This process's peak resident memory so far.
int64_t peak_rss_bytes() {
  rusage self{};
  return ::getrusage(RUSAGE_SELF, &self) == 0 ? static_cast<int64_t>(self.ru_maxrss) * 1024 : 0;
}

// The most memory loading takes: the mapped files, plus what conversions add. Matrices (rank
// 2 and up) are computed in `compute`, vectors in f32 (models/weights.h); a tensor converted
// to another dtype is copied and its mapped pages given back (Weights::fetch), so the total
// shrinks when converting down (f32 -> bf16) and grows when converting up; at any moment one
// copy may coexist with its source.
uint64_t load_peak_bytes(const Checkpoint& ckpt, DType compute) {
  uint64_t mapped = 0, growth = 0, largest_copy = 0;
  for (const auto& name : ckpt.tensor_names()) {
    const SafetensorsEntry& e = ckpt.entry(name);
    const uint64_t source = e.end - e.begin;
    mapped += source;
    const DType want = e.shape.size() >= 2 ? compute : DType::F32;
    const std::string want_name = want == DType::F32 ? "F32" : "BF16";
    if (e.dtype_name == want_name || e.dtype_name == "I32") continue;
    const uint64_t copy = static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(want);
    if (copy > source) growth += copy - source;
    largest_copy = std::max(largest_copy, copy);
  }
  return mapped + growth + largest_copy;
}

// The lab's self-test faults (catalog field "inject"), to test that the sweep survives them.
void inject_fault(const std::string& what) {
  if (what == "crash") std::raise(SIGSEGV);
  if (what == "oom") {
    // Touch memory until the address-space limit makes an allocation fail (std::bad_alloc).
    std::vector<std::unique_ptr<char[]>> hog;
    for (;;) {
      hog.emplace_back(new char[64 << 20]);
      for (size_t i = 0; i < (64 << 20); i += 4096) hog.back()[i] = 1;
    }
  }
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // "hang"
}

}  // namespace

std::string judge(LabRow& row, const Reference& ref, bool f32) {
  const double tol = f32 ? kF32Nmse : kBf16Nmse;
  std::string why;
  bool ok = true;
  if (row.first_mismatch) {
    const int64_t k = *row.first_mismatch;
    const bool near_tie = !f32 && k < static_cast<int64_t>(ref.greedy_margins.size()) &&
                          ref.greedy_margins[static_cast<size_t>(k)] < kNearTieMargin;
    if (near_tie) {
      why = cat("tokens part at step ", k, " after a near-tie (reference margin ",
                ref.greedy_margins[static_cast<size_t>(k)], "); ");
    } else {
      ok = false;
      why = cat("tokens differ from step ", k, "; ");
    }
  } else {
    why = cat(row.generated_tokens.size(), " tokens identical; ");
  }
  // NaN is outside every tolerance.
  if (row.logits_nmse && !(*row.logits_nmse <= tol)) {
    ok = false;
    why += cat("logit NMSE ", *row.logits_nmse, " > ", tol);
  } else if (row.logits_nmse) {
    why += cat("logit NMSE ", *row.logits_nmse, " <= ", tol);
  }
  // F32 computes what transformers computes: every teacher-forced argmax agrees and no named
  // intermediate leaves the tolerance (bf16 rounding may move both, within the logit NMSE).
  if (f32 && row.top1_agreement && !(*row.top1_agreement == 1.0)) {
    ok = false;
    why += cat("; top-1 agreement ", *row.top1_agreement, " < 1");
  }
  if (f32 && row.first_diverging_layer) {
    ok = false;
    why += cat("; ", *row.first_diverging_layer, " diverges first");
  }
  // Decode steps, judged with the same tolerance (each step's own NMSE names the first).
  if (row.decode_logits_nmse && !(*row.decode_logits_nmse <= tol)) {
    ok = false;
    why += cat("; decode logit NMSE ", *row.decode_logits_nmse, " > ", tol);
  } else if (row.decode_logits_nmse) {
    why += cat("; decode logit NMSE ", *row.decode_logits_nmse, " <= ", tol);
  }
  if (f32 && row.decode_first_diverging_step) {
    ok = false;
    why += cat("; decode step ", *row.decode_first_diverging_step, " diverges first");
  }
  row.status = ok ? "pass" : "fail";
  return why;
}

std::map<std::string, std::string> stack_versions() {
  std::map<std::string, std::string> s;
  s["lathe"] = cat(kLatheVersion, "+", kLatheCommit);
  s["compiler"] = __VERSION__;
  s["glibc"] = gnu_get_libc_version();
  utsname u{};
  if (::uname(&u) == 0) s["os"] = cat(u.sysname, " ", u.release, " ", u.machine);
  s["cpu"] = cpu_model();
  s["cores_online"] = std::to_string(std::thread::hardware_concurrency());
  s["openssl"] = OpenSSL_version(OPENSSL_VERSION);
  s["arrow"] = arrow_version();
  for (const auto& [k, v] : tokenizer_library_versions()) s[k] = v;
  return s;
}

LabRow base_row(const CatalogEntry& e, const ProtocolOptions& o) {
  LabRow r;
  r.model_id = e.id;
  r.revision = e.revision;
  r.task = e.task;
  r.dtype = o.dtype;
  r.architecture = e.architecture;
  r.source = !e.fixture.empty() ? "tiny" : e.revision == "local" ? "local" : "hub";
  r.cores = o.threads;
  r.lathe_version = kLatheVersion;
  r.lathe_commit = kLatheCommit;
  r.stack = stack_versions();
  r.memory_limit_bytes = e.memory_limit_bytes ? e.memory_limit_bytes : o.memory_limit_bytes;
  r.prompt_ids = e.prompt_ids;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  r.host = host;
  r.reference_source = "unavailable";
  return r;
}

namespace {

// Sharded runs: rank 0 reads the reference (the cache, or the bridge); the other ranks get
// what their model calls need: whether there is one, the teacher-forced ids, the greedy
// tokens and how many decode steps to feed. Their copy holds no logits: rank 0 compares.
std::optional<Reference> share_reference(shard::Worker& w, std::optional<Reference> ref) {
  std::vector<int32_t> m;
  if (w.spec().rank == 0) {
    m.push_back(ref ? 1 : 0);
    if (ref) {
      m.push_back(static_cast<int32_t>(ref->teacher_forced_ids.size()));
      m.insert(m.end(), ref->teacher_forced_ids.begin(), ref->teacher_forced_ids.end());
      m.push_back(static_cast<int32_t>(ref->greedy_tokens.size()));
      m.insert(m.end(), ref->greedy_tokens.begin(), ref->greedy_tokens.end());
      m.push_back(ref->decode_logits.rank() == 2 ? static_cast<int32_t>(ref->decode_logits.dim(0))
                                                 : -1);
    }
  }
  w.broadcast(m);
  if (w.spec().rank == 0) return ref;
  if (m.empty() || m[0] == 0) return std::nullopt;
  Reference r;
  size_t at = 1;
  auto take = [&](std::vector<int32_t>& out) {
    const auto n = static_cast<size_t>(m.at(at++));
    out.assign(m.begin() + static_cast<ptrdiff_t>(at), m.begin() + static_cast<ptrdiff_t>(at + n));
    at += n;
  };
  take(r.teacher_forced_ids);
  take(r.greedy_tokens);
  if (const int32_t steps = m.at(at); steps > 0)
    r.decode_logits = Tensor::zeros(DType::F32, {steps, 1});
  return r;
}

// The planner's degree for the model (ProtocolOptions::max_cores): one rank goes on here;
// more relaunch this process as that many workers (shard::Relaunch, caught in main); none
// that fits is the row's `oom`, with the planner's numbers.
void plan_cores(const fs::path& dir, bool f32, const ProtocolOptions& o, const LabRow& row) {
  shard::PlannerOptions p;
  p.core_memory = o.core_memory;
  p.max_cores = o.max_cores;
  p.max_seq = std::max<int64_t>(static_cast<int64_t>(row.prompt_ids.size()), 64) + o.max_new_tokens;
  const shard::PlannerChoice c =
      shard::plan_checkpoint(dir, {.dtype = f32 ? DType::F32 : DType::BF16}, p);
  if (!c.fits) throw OutOfMemory(c.refusal);
  if (c.degree > 1)
    throw shard::Relaunch{{c.parallelism, c.degree, o.core_memory + shard::kRankBaseMemory}};
}

// The fluency judge's verdict on a sharded run's generated text (docs/lab.md), or why it
// did not run.
std::string fluency(const ProtocolOptions& o, const fs::path& dir,
                    const std::vector<int32_t>& tokens) {
  if (o.judge_model.empty())
    return "not run: no judge model (--judge-model, or build SmolLM2: tools/smollm2)";
  if (!fs::exists(dir / "tokenizer.json")) return "not run: the model has no tokenizer.json";
  try {
    const std::string text = Tokenizer::load(dir).decode(tokens, true);
    return FluencyJudge(o.judge_model, o.threads).score(text).verdict();
  } catch (const Error& err) {
    return cat("not run: ", err.what());
  }
}

}  // namespace

LabRow run_protocol(const CatalogEntry& e, const ProtocolOptions& options) {
  // A sharded run's worker (docs/sharding.md): every rank runs the protocol, building its own
  // copy of a tiny checkpoint; rank 0 alone reports progress, reads the reference, compares
  // and judges, and its row is the run's.
  int64_t judged_peak = 0;  // rank 0's peak before the fluency judge ran
  shard::Worker* worker = shard::Worker::current();
  const int rank = worker ? worker->spec().rank : 0;
  ProtocolOptions o = options;
  if (worker) {
    o.work_dir /= cat("rank-", rank);
    if (rank != 0) o.progress_file.clear();
  }
  LabRow row = base_row(e, o);
  if (worker) {
    const shard::RankSpec& spec = worker->spec();
    (spec.parallelism == shard::Parallelism::Tensor ? row.tp_degree : row.ep_degree) = spec.degree;
    row.cores = spec.degree * o.threads;
  }
  row.started_at = utc_now();
  Stages stages(row, o.progress_file);
  const bool f32 = o.dtype == "f32";
  // The compiled mode's cache and compiler: they outlive the try, for the row's figures.
  std::unique_ptr<compile::CompileCache> compile_cache;
  std::unique_ptr<compile::Compiler> compiler;
  const auto record_error = [&](const std::string& status, const std::string& type,
                                const std::string& message) {
    row.status = status;
    row.error_type = type;
    row.error_message = message;
  };
  try {
    stages.enter("fetch");
    const fs::path dir = checkpoint_dir(e, o);
    if (!e.fixture.empty()) {
      fetch_tiny(e, dir);
      if (row.prompt_ids.empty()) row.prompt_ids = golden_prompt(e.fixture);
    }

    stages.enter("inspect");
    const Json config = read_json_file(dir / "config.json");
    const Json& archs = config.contains("architectures") ? config["architectures"] : Json();
    if (!archs.is_array() || archs.empty() || !archs[0].is_string())
      fail((dir / "config.json").string(), ": field \"architectures\" must name the model class");
    row.architecture = archs[0].get<std::string>();
    if (!find_architecture(row.architecture)) {
      std::string needs;
      if (const PlannedArchitecture* planned = find_planned_architecture(row.architecture))
        needs = cat("; it needs ", planned->needs);
      for (const auto& f : unsupported_features(config))
        needs += cat(needs.empty() ? "; it needs " : ", ", f.feature, " (", f.evidence, ")");
      record_error("unsupported", "unsupported_architecture",
                   cat((dir / "config.json").string(), ": architecture ", row.architecture,
                       " is not supported by lathe ", kLatheVersion, needs));
      stages.close_current();
      row.total_seconds = stages.elapsed();
      row.finished_at = utc_now();
      return row;
    }

    stages.enter("plan");
    // Loading must fit the memory limit (an address-space
    // limit: the mapped files count whole until their converted tensors are given back).
    uint64_t weight_bytes = 0;
    for (const auto& f : fs::directory_iterator(dir))
      if (f.path().extension() == ".safetensors") weight_bytes += fs::file_size(f.path());
    row.weight_bytes = static_cast<int64_t>(weight_bytes);
    if (row.memory_limit_bytes > 0 && weight_bytes > static_cast<uint64_t>(row.memory_limit_bytes))
      throw OutOfMemory(cat("the weights (", weight_bytes >> 20,
                            " MiB) exceed the memory limit of ", row.memory_limit_bytes >> 20,
                            " MiB"));
    std::optional<Checkpoint> planned;
    try {
      planned = Checkpoint::open(dir);
    } catch (const Error&) {
      // A broken checkpoint is the load stage's to report, as before there was a plan.
    }
    const uint64_t peak = planned ? load_peak_bytes(*planned, f32 ? DType::F32 : DType::BF16) : 0;
    if (row.memory_limit_bytes > 0 && peak > static_cast<uint64_t>(row.memory_limit_bytes))
      throw OutOfMemory(cat("loading the weights (", weight_bytes >> 20, " MiB) in ", o.dtype,
                            " peaks at about ", peak >> 20, " MiB, over the memory limit of ",
                            row.memory_limit_bytes >> 20, " MiB"));
    if (o.max_cores > 0 && !worker && planned) plan_cores(dir, f32, o, row);
    const NumericFault fault = numeric_fault(e.inject);
    if (!e.inject.empty() && e.inject != "alloc" && fault.kind == NumericFault::Kind::None)
      inject_fault(e.inject);

    stages.enter("load");
    const Checkpoint ckpt = planned ? std::move(*planned) : Checkpoint::open(dir);
    // "alloc": a tensor allocation that fails, as a model too big for the limit would.
    if (e.inject == "alloc") Tensor::zeros(DType::F32, {int64_t{1} << 50});
    ModelOptions mo;
    mo.dtype = f32 ? DType::F32 : DType::BF16;
    if (worker) mo.wrap = worker->model_wrap();
    auto model = load_model(ckpt, mo);
    for (const auto& name : ckpt.tensor_names())
      row.parameters += shape_numel(ckpt.entry(name).shape);

    stages.enter("compile");
    if (row.prompt_ids.empty())
      row.prompt_ids = Tokenizer::load(dir).encode_prompt(o.prompt_text, true);
    for (int32_t id : row.prompt_ids)
      if (id < 0 || id >= model->info().vocab_size)
        fail("prompt token id ", id, " is outside the vocabulary of ", model->info().vocab_size);
    const int64_t max_seq = static_cast<int64_t>(row.prompt_ids.size()) + o.max_new_tokens;
    row.run_script = run_script(e, o, row.prompt_ids, max_seq);
    ThreadPool pool(o.threads);
    Context ctx{&pool, false};
    if (o.compiled) {
      compile_cache = std::make_unique<compile::CompileCache>(
          o.compile_cache.empty() ? compile::default_cache_root() : o.compile_cache);
      compiler = std::make_unique<compile::Compiler>(
          compile::CompilerOptions{.cache = compile_cache.get(), .shard = shard::current_layout()});
      ctx.compiled = compiler.get();
      // The modules of the prompt's step and of a decode step (the rest, as they come).
      if (const auto* gm = dynamic_cast<const GraphModel*>(model.get())) {
        Engine engine(*gm, ctx);
        engine.prepare(static_cast<int64_t>(row.prompt_ids.size()), 1, max_seq);
        engine.prepare(1, 1, max_seq);
      }
    }
    stages.enter("generate");
    GenerateOptions go;
    go.max_new_tokens = o.max_new_tokens;
    go.eos_token_ids = ckpt.generation().eos_token_ids;
    KVCache cache = model->new_cache(max_seq);
    const GenerateResult gen = generate(*model, ctx, cache, row.prompt_ids, go);
    row.generated_tokens = gen.tokens;
    if (gen.decode_seconds > 0 && gen.tokens.size() > 1)
      row.tokens_per_second = static_cast<double>(gen.tokens.size() - 1) / gen.decode_seconds;

    stages.enter("reference");
    const std::string hash = model_content_hash(dir);
    const fs::path key =
        reference_key_dir(o.reference_cache, hash, row.prompt_ids, o.max_new_tokens);
    std::optional<Reference> ref;
    if (rank == 0) {
      try {
        ref = lookup_reference(key);
        if (!ref && !e.fixture.empty() && golden_prompt(e.fixture) == row.prompt_ids) {
          import_golden(e.fixture, key);
          ref = lookup_reference(key);
        }
        if (!ref && o.bridge)
          ref = run_bridge(*o.bridge, dir, row.prompt_ids, o.max_new_tokens, key);
      } catch (...) {
        // The other ranks wait for the reference: tell them there is none, then report.
        if (worker) share_reference(*worker, std::nullopt);
        throw;
      }
    }
    if (worker) ref = share_reference(*worker, std::move(ref));
    if (!ref) {
      record_error("untested", "reference_unavailable",
                   "no reference: no cached transformers output for this model and prompt, and "
                   "no Python with transformers and torch to make one (--reference-python)");
      row.judge_verdict = "ran; no reference to compare with";
      stages.close_current();
      row.total_seconds = stages.elapsed();
      row.finished_at = utc_now();
      return row;
    }
    row.reference_source = ref->source;
    row.transformers_version = ref->transformers_version;
    row.torch_version = ref->torch_version;
    row.stack["transformers (reference)"] = ref->transformers_version;
    row.stack["torch (reference)"] = ref->torch_version;
    row.reference_tokens = ref->greedy_tokens;
    row.reference_script = ref->script;

    stages.enter("compare");
    if (auto k = first_token_mismatch(row.generated_tokens, row.reference_tokens))
      row.first_mismatch = static_cast<int32_t>(*k);
    std::vector<std::pair<std::string, Tensor>> actual;
    Trace trace = [&](const std::string& name, const Tensor& t) {
      actual.emplace_back(name, t.clone());
    };
    for (int32_t id : ref->teacher_forced_ids)
      if (id < 0 || id >= model->info().vocab_size)
        fail(ref->dir.string(), ": teacher-forced id ", id, " is outside the vocabulary");
    KVCache tf_cache = model->new_cache(static_cast<int64_t>(ref->teacher_forced_ids.size()));
    const Tensor logits = model->forward(ctx, ref->teacher_forced_ids, tf_cache, true, &trace);
    if (rank == 0 && logits.shape() != ref->logits.shape())
      fail(ref->dir.string(), ": reference logits have another shape than lathe's");
    const LogitComparison lc = rank == 0 ? compare_logits(logits, ref->logits) : LogitComparison{};
    row.logits_nmse = lc.nmse;
    row.logits_max_abs_error = lc.max_abs_error;
    row.top1_agreement = lc.top1_agreement;
    if (rank == 0 && !ref->hidden.empty()) {
      const LayerReport layers = compare_layers(actual, ref->hidden, f32 ? kF32Nmse : kBf16Nmse);
      row.first_diverging_layer = layers.first_diverging;
    }
    // Decode steps: the prompt, then the reference's first greedy tokens through the cache.
    if (ref->decode_logits.rank() == 2) {
      std::function<void(KVCache&)> edit_cache;
      if (fault.kind == NumericFault::Kind::Cache)
        edit_cache = [&](KVCache& c) { scale_cached_values(c, fault.layer, 1.01f); };
      const auto fed = std::span<const int32_t>(ref->greedy_tokens)
                           .first(static_cast<size_t>(ref->decode_logits.dim(0) - 1));
      const Tensor decode = decode_logits(*model, ctx, row.prompt_ids, fed, edit_cache);
      if (rank == 0) {
        row.decode_logits_nmse = compare_logits(decode, ref->decode_logits).nmse;
        if (auto k = first_row_past(decode, ref->decode_logits, f32 ? kF32Nmse : kBf16Nmse))
          row.decode_first_diverging_step = static_cast<int32_t>(*k);
      }
    }
    row.judge_verdict = rank == 0 ? judge(row, *ref, f32) : "";
    if (worker && rank == 0) {
      judged_peak = peak_rss_bytes();  // the judge's model is not the run's memory
      row.fluency_verdict = fluency(o, dir, row.generated_tokens);
    }
    if (row.status == "fail") row.error_type = "numerics";
    stages.enter("done");
  } catch (const std::bad_alloc&) {
    record_error("oom", "out_of_memory",
                 cat("out of memory in stage ", row.stage, " (limit ", row.memory_limit_bytes >> 20,
                     " MiB)"));
  } catch (const OutOfMemory& err) {
    const bool foreseen = row.stage == "plan";
    record_error("oom", foreseen ? "exceeds_memory_limit" : "out_of_memory",
                 foreseen ? std::string(err.what())
                          : cat(err.what(), " in stage ", row.stage, " (limit ",
                                row.memory_limit_bytes >> 20, " MiB)"));
  } catch (const shard::NotShardable& err) {
    record_error("unsupported", "not_shardable", err.what());
  } catch (const Error& err) {
    record_error("error", cat(row.stage, "_error"), err.what());
  } catch (const std::exception& err) {
    record_error("error", "internal_error", err.what());
  }
  stages.close_current();
  // This process's own peak (the bridge's Python, a child, is not lathe's memory; nor the
  // fluency judge's model); a sharded run's is the sum of its ranks' peaks.
  row.peak_memory_bytes = judged_peak > 0 ? judged_peak : peak_rss_bytes();
  if (worker) row.peak_memory_bytes = worker->sum(row.peak_memory_bytes);
  if (compiler) {
    const compile::CompileStats& s = compiler->stats();
    row.compile_seconds = s.seconds;
    for (const std::string& k : s.keys)
      row.compile_cache_key += (row.compile_cache_key.empty() ? "" : " ") + k;
    if (!s.keys.empty()) {
      row.compile_cache_fetch = cat(
          "build/lathe cache fetch --from ",
          shell_quote(o.cache_remote.empty() ? compile_cache->root().string() : o.cache_remote));
      for (const std::string& k : s.keys) row.compile_cache_fetch += " --key " + k;
    }
  }
  row.total_seconds = stages.elapsed();
  row.finished_at = utc_now();
  return row;
}

}  // namespace lathe
