// lathe tiny build FIXTURE OUT     regenerate a tiny checkpoint from its fixture
// lathe tiny check [--fixtures DIR] run fixtures against their transformers goldens
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "backends/cpu/isa.h"
#include "cli/commands.h"
#include "compile/cache.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "lab/golden_check.h"
#include "shard/worker.h"

namespace lathe {
namespace fs = std::filesystem;
namespace {

const char* kTinyUsage = R"(usage: lathe tiny SUBCOMMAND [ARGS] [--help]

Tiny checkpoints: small random models of each architecture, regenerated from a seed, with
goldens transformers made for them (tests/fixtures/tiny, docs/testing.md).

subcommands:
  build FIXTURE OUT    write the checkpoint of one fixture to the folder OUT
  check [--fixtures DIR] [--storage f32|bf16] [--quantize q8_0|q4_0] [--kv-dtype f32|bf16]
                       build every fixture, run it and compare with its goldens
                       (quantized: logits held to that type's tolerance, tokens shown)
)";

DType parse_storage(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  if (s == "f16") return DType::F16;
  throw UsageError(cat("--dtype must be f32, bf16 or f16, got \"", s, "\""));
}

int tiny_build(int argc, char** argv) {
  Args args("tiny build", "Writes the checkpoint of a tiny fixture (tests/fixtures/tiny/NAME).",
            {"FIXTURE", "OUT"},
            {{"dtype", "f32|bf16|f16", "storage dtype of the weights (default f32)"},
             {"shards", "N", "split into N safetensors files with an index (default 1)"}});
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  TinyBuildOptions o{parse_storage(args.get_or("dtype", "f32")),
                     static_cast<int>(args.get_int("shards", 1, 1, 64))};
  const size_t n = build_tiny_checkpoint(args.positionals()[0], args.positionals()[1], o);
  std::cerr << "wrote " << n << " tensors to " << args.positionals()[1] << "\n";
  return 0;
}

int tiny_check(int argc, char** argv) {
  std::vector<OptionSpec> options = {
      {"fixtures", "DIR", "folder of fixtures (default tests/fixtures/tiny)"},
      {"storage", "f32|bf16", "weight storage of the built checkpoints (default f32)"}};
  for (auto& o : runtime_options()) options.push_back(o);
  Args args("tiny check",
            "Builds every tiny fixture, runs it and compares with the goldens transformers made: "
            "teacher-forced logits (NMSE), layers, and 32 greedy tokens.",
            {}, options);
  args.parse(argc, argv, 3);
  if (args.help()) {
    std::cout << args.usage();
    return 0;
  }
  if (args.has("cores") || args.has("core-memory"))
    throw UsageError("tiny check runs many models: give --tp N or --ep N, not --cores");
  const DType kv_dtype = kv_dtype_option(args);
  const bool kv_rounded = kv_dtype == DType::BF16;
  const fs::path root = args.get_or("fixtures", "tests/fixtures/tiny");
  if (!fs::is_directory(root)) fail(root.string(), ": no such fixture folder");
  std::vector<fs::path> fixtures;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "goldens.json")) fixtures.push_back(e.path());
  std::sort(fixtures.begin(), fixtures.end());
  if (fixtures.empty())
    fail(root.string(), ": no tiny fixtures in this folder (folders with goldens.json)");
  const DType storage = parse_storage(args.get_or("storage", "f32"));
  const std::optional<DType> quantize = quantize_option(args);
  const bool bf16_activations = storage == DType::BF16 && cpu::active_isa() == cpu::Isa::Avx512Bf16;
  const int threads = static_cast<int>(
      args.get_int("threads", shard::Worker::current() ? default_threads() : 2, 1, 1024));
  ThreadPool pool(threads);
  Context ctx{&pool, args.flag("reference-kernels"), args.flag("eager"), kv_dtype};
  std::unique_ptr<compile::CompileCache> cache;
  std::unique_ptr<compile::Compiler> compiler;
  compiled_mode_option(args, cache, compiler, ctx);
  const fs::path work = fs::temp_directory_path() / cat("lathe-tiny-", ::getpid());
  int failures = 0, unquantized = 0;
  std::printf("%-30s %-22s %10s %9s %7s  %s\n", "fixture", "architecture", "logit NMSE", "top-1",
              "tokens", "verdict");
  ModelOptions model_options{.dtype = storage,
                             .quantize = quantize,
                             .dequantize_mxfp4 = dequantize_mxfp4_option(args),
                             .dequantize_fp8 = dequantize_fp8_option(args),
                             .copy_weights = args.flag("copy-weights")};
  shard_options(model_options);
  int unsharded = 0;
  for (const auto& f : fixtures) {
    GoldenCheck r;
    try {
      r = check_golden_fixture(f, work / f.filename(), {storage, 1}, model_options, ctx);
    } catch (const shard::NotShardable& e) {
      // Every rank finds this at load, before any collective: the run goes on together.
      std::printf("%-28s %s\n", f.filename().c_str(), e.what());
      ++unsharded;
      continue;
    }
    // bf16 storage: against transformers on the same rounded weights where the goldens have
    // them (f32 tolerance, the same tokens), else the rounding drift against f32 transformers.
    // On the opt-in avx512bf16 level bf16 activations meet bf16 weights: that is not the
    // rounded goldens' computation, and bf16 runs are held to the drift tolerance there.
    const bool exact = storage == DType::F32 || (r.rounded && !bf16_activations);
    const LogitComparison& logits = r.rounded ? r.rounded->logits : r.logits;
    const LogitComparison& decode = r.rounded ? r.rounded->decode : r.decode;
    const auto& mismatch = r.rounded ? r.rounded->first_token_mismatch : r.first_token_mismatch;
    const auto& reference = r.rounded ? r.rounded->greedy_reference : r.greedy_reference;
    const auto& margins = r.rounded ? r.rounded->greedy_margins : r.greedy_margins;
    // A bf16 KV cache rounds every cached key and value: the logits and decode logits within
    // kBf16KvNmse, the tokens the reference's up to a step whose margin was a near-tie; and
    // mixtures of experts, whose near-tied routes flip, top-1 agreement only.
    const bool tie = mismatch && *mismatch < static_cast<int64_t>(margins.size()) &&
                     margins[static_cast<size_t>(*mismatch)] < kNearTieMargin;
    // (Mixtures of experts under bf16 activations: routes flip at near-ties, so their logits
    // are held to top-1 agreement only.)
    // Quantized matrices: the logits within the type's tolerance of transformers' f32 ones
    // (mixtures of experts, whose quantized router inputs flip routes: finite logits); greedy
    // tokens may part where quantization moves a near-tie (shown, not required).
    const bool pass =
        quantize ? (r.route_choices > 0 ? std::isfinite(logits.nmse)
                                        : logits.nmse <= quantized_nmse(*quantize))
        : kv_rounded && exact
            ? (r.route_choices > 0
                   ? logits.top1_agreement >= 0.9
                   : logits.nmse <= kBf16KvNmse && decode.nmse <= kBf16KvNmse && (!mismatch || tie))
        : exact ? logits.nmse <= kF32Nmse && r.route_mismatches == 0 && !mismatch
                : (r.route_choices > 0 ? logits.top1_agreement >= 0.9 : logits.nmse <= kBf16Nmse);
    failures += !pass;
    unquantized += quantize && r.quantized_matrices == 0;
    std::printf("%-28s %-20s %10.2e %8.1f%% %7s  %s\n", r.name.c_str(), r.architecture.c_str(),
                logits.nmse, 100 * logits.top1_agreement,
                cat(mismatch.value_or(static_cast<int64_t>(reference.size())), "/",
                    reference.size(), kv_rounded && tie ? "~" : "")
                    .c_str(),
                pass ? "PASS" : "FAIL");
  }
  fs::remove_all(work);
  if (unsharded) std::printf("%d fixtures cannot be split this way (above)\n", unsharded);
  std::printf(
      "%zu fixtures, %d failed (tolerance NMSE %.0e, %s weights%s%s)\n", fixtures.size(), failures,
      quantize           ? quantized_nmse(*quantize)
      : bf16_activations ? kBf16Nmse
      : kv_rounded       ? kBf16KvNmse
                         : kF32Nmse,
      std::string(dtype_name(storage)).c_str(),
      quantize ? cat(", matrices quantized to ", dtype_name(*quantize), " at load (", unquantized,
                     " fixtures had none to quantize)")
                     .c_str()
      : storage == DType::F32 ? ""
      : bf16_activations
          ? ", bf16 activations (avx512bf16): the rounding drift against the rounded weights"
          : ", against transformers on the same rounded weights",
      kv_rounded ? ", bf16 KV cache (logits and decode logits; ~: tokens parted at a near-tie)"
                 : "");
  if (!failures) return 0;
  std::fflush(stdout);
  std::cerr << "error: " << failures << " of " << fixtures.size()
            << " tiny fixtures differ from their transformers goldens (the table above)\n";
  return 1;
}

}  // namespace

int cmd_tiny(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  if (sub == "build") return tiny_build(argc, argv);
  if (sub == "check") return tiny_check(argc, argv);
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << kTinyUsage;
    return 0;
  }
  std::cerr << (sub.empty() ? "" : "lathe tiny: unknown subcommand \"" + sub + "\"\n")
            << kTinyUsage;
  return 2;
}

}  // namespace lathe
