// lathe bench MODEL: load time, time to first token, prefill and decode speed and peak
// resident memory of one checkpoint, measured through the same generate() that
// `lathe generate` runs.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "cli/commands.h"
#include "compile/compiler.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/version.h"
#include "generate/generate.h"
#include "io/json.h"

namespace lathe {
namespace {

using Clock = std::chrono::steady_clock;
using OrderedJson = nlohmann::ordered_json;  // fields in the order they are explained

const char* kFields = R"(
fields (the timed ones are medians over --repeat runs; the table also shows min and max):
  load_seconds                 opening the folder and loading the weights, once; weights kept
                               in the checkpoint's dtype are mapped, read from disk or the page
                               cache on first use, so that is in the first run's timings
  time_to_first_token_seconds  from calling generate to the first new token: prefill of the
                               whole prompt plus picking the first token
  prefill_tokens_per_second    prompt tokens over the time of the prompt's forward steps
  decode_tokens_per_second     new tokens after the first over the time from the first new
                               token to the last (each a one-token step plus picking)
  decode_ms_per_token          the same interval per token, in milliseconds
  peak_resident_mib            the process's peak resident memory (VmHWM in /proc/self/status)
                               after every run, in MiB: weights, KV cache, scratch
  kv_cache_mib                 the KV cache that generate allocates: --max-seq positions (its
                               default, as generate's; pass --max-seq to size it to the run)
                               stored as --kv-dtype (bf16: half of f32's)
--warmup runs (default 1) go first and are not timed, so that the timed runs do not pay for
reading the weights from disk (as llama-bench's warm-up); --warmup 0 times a cold start too.
The prompt is --prompt-tokens token ids (1 + 7919 i) mod vocab_size, so no tokenizer is needed;
decoding is greedy and ignores end-of-sequence tokens, so every run makes --new-tokens tokens.
--json prints one object with these fields, the per-run figures ("runs") and the setting:
model_dir, architecture, dtype, quantize (q8_0, q4_0 or null) and quantized_matrices, kv_dtype,
threads, max_seq, reference_kernels, eager, compiled (with --compiled: modules_compiled,
modules_loaded, modules_failed, seconds, variants_timed, modules; else null), cpu,
cpu_kernels (the kernel level: portable, avx2, avx512 or avx512bf16, or reference),
quant_kernels (with --quantize: portable, avx2 or avx512vnni), lathe_version, lathe_commit.
)";

// The timings of one generate() call.
struct Run {
  double ttft = 0, prefill_seconds = 0, decode_seconds = 0;
  double prefill_tps = 0, decode_tps = 0, decode_ms = 0;
  int64_t generated = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The "model name" line of /proc/cpuinfo, or "unknown".
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

// VmHWM (peak resident set) from /proc/self/status, in MiB; none where it is not reported.
std::optional<double> peak_resident_mib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    long long kib = 0;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kib) == 1)
      return static_cast<double>(kib) / 1024.0;
  }
  return std::nullopt;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// One row of the table: the name, median, min and max of a per-run figure, and its unit.
void print_row(const std::string& name, const std::vector<double>& values, const char* unit,
               int precision) {
  auto cell = [&](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%12.*f", precision, v);
    return std::string(buf);
  };
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  std::string line = name + std::string(name.size() < 22 ? 22 - name.size() : 1, ' ');
  line += cell(median(values));
  line += values.size() > 1 ? cell(*lo) + cell(*hi) : std::string(24, ' ');
  std::cout << line << "  " << unit << "\n";
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  std::vector<OptionSpec> options = {
      {"prompt-tokens", "N", "prompt length in tokens (default 512)"},
      {"new-tokens", "N", "tokens to generate per run, at least 2 (default 32)"},
      {"repeat", "R", "timed runs; medians are reported (default 3)"},
      {"warmup", "W", "untimed runs before them (default 1)"},
      {"json", "", "print one JSON object instead of the table"},
  };
  for (auto& o : runtime_options()) options.push_back(o);
  for (auto& o : model_options()) options.push_back(o);
  Args args("bench",
            "Measures load time, time to first token, prefill and decode speed and peak "
            "memory of a\ncheckpoint folder or Hub id.",
            {"MODEL"}, options);
  args.parse(argc, argv, 2);
  if (args.help()) {
    std::cout << args.usage() << kFields;
    return 0;
  }
  const int64_t prompt_tokens = args.get_int("prompt-tokens", 512, 1, int64_t{1} << 22);
  const int64_t new_tokens = args.get_int("new-tokens", 32, 2, 1 << 20);
  const int64_t repeat = args.get_int("repeat", 3, 1, 1000);
  const int64_t warmup = args.get_int("warmup", 1, 0, 1000);
  const bool json = args.flag("json");
  const std::string dir = resolve_model_arg(args.positionals()[0], args);
  // Progress goes to a terminal only, so that redirected output stays clean.
  const bool progress = isatty(STDERR_FILENO);
  auto say = [&](const std::string& what) {
    if (progress) std::cerr << "lathe bench: " << what << "\n";
  };

  say("loading " + dir);
  const auto load_start = Clock::now();
  auto rt = load_runtime(dir, args);
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();
  const ModelInfo& info = rt->model->info();
  if (prompt_tokens + new_tokens > rt->max_seq)
    fail("lathe bench: --prompt-tokens ", prompt_tokens, " plus --new-tokens ", new_tokens,
         " need ", prompt_tokens + new_tokens, " positions; the KV cache holds ", rt->max_seq,
         " (raise --max-seq)");

  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int64_t i = 0; i < prompt_tokens; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((1 + 7919 * i) % info.vocab_size);
  GenerateOptions go;
  go.max_new_tokens = new_tokens;  // greedy, no eos: every run makes exactly this many
  KVCache cache = rt->model->new_cache(rt->max_seq, rt->ctx.kv_dtype);

  for (int64_t i = 0; i < warmup; ++i) {
    say(cat("warm-up run ", i + 1, " of ", warmup));
    generate(*rt->model, rt->ctx, cache, prompt, go);
  }
  std::vector<Run> runs;
  for (int64_t i = 0; i < repeat; ++i) {
    say(cat("run ", i + 1, " of ", repeat));
    std::vector<Clock::time_point> token_times;
    token_times.reserve(static_cast<size_t>(new_tokens));
    const auto start = Clock::now();
    const GenerateResult r = generate(*rt->model, rt->ctx, cache, prompt, go,
                                      [&](int32_t) { token_times.push_back(Clock::now()); });
    if (static_cast<int64_t>(r.tokens.size()) != new_tokens ||
        token_times.size() != r.tokens.size())
      fail("internal: lathe bench: asked for ", new_tokens, " tokens, got ", r.tokens.size());
    Run run;
    run.generated = static_cast<int64_t>(r.tokens.size());
    run.ttft = std::chrono::duration<double>(token_times.front() - start).count();
    run.prefill_seconds = r.prefill_seconds;
    run.decode_seconds =
        std::chrono::duration<double>(token_times.back() - token_times.front()).count();
    const double decoded = static_cast<double>(new_tokens - 1);
    run.prefill_tps = static_cast<double>(prompt_tokens) / run.prefill_seconds;
    run.decode_tps = decoded / run.decode_seconds;
    run.decode_ms = 1000 * run.decode_seconds / decoded;
    runs.push_back(run);
  }
  const std::optional<double> peak_mib = peak_resident_mib();
  const double kv_mib = static_cast<double>(cache.bytes()) / (1024.0 * 1024.0);

  auto each = [&](double Run::*field) {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.*field);
    return v;
  };
  const std::string dtype = lower(dtype_name(info.weight_dtype));
  // --quantize: the matrices' type and how many, and the quantized kernel serving them.
  const OrderedJson quantize =
      info.quantized ? OrderedJson(lower(dtype_name(*info.quantized))) : OrderedJson(nullptr);
  const std::string quant_kernels =
      rt->ctx.reference_kernels ? "reference" : cpu::quant_kernel_name(cpu::quant_kernel());
  const std::string kv_dtype = lower(dtype_name(cache.kv_dtype()));
  const std::string cpu = cpu_model_name();
  const std::string kernels =
      rt->ctx.reference_kernels ? "reference" : cpu::isa_name(cpu::active_isa());
  // --compiled: what the compiled mode did over all runs (warm-up included).
  OrderedJson compiled = nullptr;
  if (rt->compiler) {
    const compile::CompileStats& s = rt->compiler->stats();
    compiled = {
        {"modules_compiled", s.compiled},       {"modules_loaded", s.loaded},
        {"modules_failed", s.failed},           {"seconds", s.seconds},
        {"variants_timed", s.work.nodes_timed}, {"groups_timed", s.work.groups_timed},
        {"steps_timed", s.work.steps_timed},    {"modules", s.keys},
    };
  }
  if (json) {
    OrderedJson per_run = OrderedJson::array();
    for (const Run& r : runs)
      per_run.push_back({{"generated_tokens", r.generated},
                         {"time_to_first_token_seconds", r.ttft},
                         {"prefill_seconds", r.prefill_seconds},
                         {"prefill_tokens_per_second", r.prefill_tps},
                         {"decode_seconds", r.decode_seconds},
                         {"decode_tokens_per_second", r.decode_tps},
                         {"decode_ms_per_token", r.decode_ms}});
    OrderedJson out = {
        {"model_dir", dir},
        {"architecture", info.architecture},
        {"dtype", dtype},
        {"quantize", quantize},
        {"quantized_matrices", info.quantized_matrices},
        {"kv_dtype", kv_dtype},
        {"threads", rt->pool->size()},
        {"max_seq", rt->max_seq},
        {"reference_kernels", rt->ctx.reference_kernels},
        {"eager", rt->ctx.eager},
        {"compiled", compiled},
        {"cpu", cpu},
        {"cpu_kernels", kernels},
        {"quant_kernels", info.quantized ? OrderedJson(quant_kernels) : OrderedJson(nullptr)},
        {"lathe_version", kLatheVersion},
        {"lathe_commit", kLatheCommit},
        {"prompt_tokens", prompt_tokens},
        {"new_tokens", new_tokens},
        {"repeat", repeat},
        {"warmup", warmup},
        {"load_seconds", load_seconds},
        {"time_to_first_token_seconds", median(each(&Run::ttft))},
        {"prefill_tokens_per_second", median(each(&Run::prefill_tps))},
        {"decode_tokens_per_second", median(each(&Run::decode_tps))},
        {"decode_ms_per_token", median(each(&Run::decode_ms))},
        {"peak_resident_mib", peak_mib ? OrderedJson(*peak_mib) : OrderedJson(nullptr)},
        {"kv_cache_mib", kv_mib},
        {"runs", per_run},
    };
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "lathe bench " << dir << "\n"
            << "  " << info.architecture << ", " << dtype << " weights"
            << (info.quantized
                    ? cat(" (", info.quantized_matrices, " matrices quantized to ",
                          lower(dtype_name(*info.quantized)), ", ", quant_kernels, " kernels)")
                    : std::string())
            << ", " << rt->pool->size() << (rt->pool->size() == 1 ? " thread" : " threads")
            << ", KV cache of " << rt->max_seq << " positions in " << kv_dtype
            << (rt->ctx.reference_kernels ? ", reference kernels" : "")
            << (rt->ctx.eager ? ", eager" : "") << "\n"
            << "  " << cpu << ", " << kernels << " kernels; lathe " << kLatheVersion << " ("
            << kLatheCommit << ")\n"
            << "  prompt " << prompt_tokens << " tokens, " << new_tokens << " new tokens, "
            << repeat << (repeat == 1 ? " run" : " runs") << "\n\n";
  std::cout << "                            median         min         max\n";
  print_row("load", {load_seconds}, "s", 4);
  print_row("time to first token", each(&Run::ttft), "s", 4);
  print_row("prefill", each(&Run::prefill_tps), "tokens/s", 1);
  print_row("decode", each(&Run::decode_tps), "tokens/s", 1);
  print_row("decode per token", each(&Run::decode_ms), "ms", 2);
  if (peak_mib) print_row("peak resident memory", {*peak_mib}, "MiB", 1);
  print_row("KV cache", {kv_mib}, "MiB", 2);
  if (rt->compiler) {
    const compile::CompileStats& s = rt->compiler->stats();
    std::cout << "\ncompiled mode: " << s.compiled << " modules compiled, " << s.loaded
              << " read from the compile cache, " << s.failed << " failed; " << s.seconds
              << " s in all (in the first run's time to first token unless warmed up)\n";
  }
  return 0;
}

}  // namespace lathe
