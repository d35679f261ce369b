// Writes synthetic lab datasets for the explorer's tests and benchmark, through lathe's own
// Parquet writer (write_dataset): rows spread over architectures, tasks and statuses, for one
// or more lathe versions (a later version regresses some models and fixes others), and
// optionally a row whose every text field holds HTML and script injection strings, and a
// local checkpoint's error row with no run script.
//
//   explorer_make_dataset OUT [--rows N] [--lathe 0.1.0,0.2.0] [--inject] [--local-error]
//
// writes OUT/dataset/lathe-<v>_transformers-<t>.parquet.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "lab/dataset.h"
#include "lab/row.h"

namespace {

using lathe::LabRow;

// Strings a hostile checkpoint or log could carry into the dataset.
const char* kInjection =
    "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=1</script>";

const char* kArchitectures[] = {"LlamaForCausalLM",
                                "MistralForCausalLM",
                                "Qwen2ForCausalLM",
                                "Qwen3ForCausalLM",
                                "GemmaForCausalLM",
                                "Gemma2ForCausalLM",
                                "Gemma3ForCausalLM",
                                "GraniteForCausalLM",
                                "Phi3ForCausalLM",
                                "Starcoder2ForCausalLM",
                                "Olmo2ForCausalLM",
                                "SmolLM3ForCausalLM",
                                "ArceeForCausalLM",
                                "SeedOssForCausalLM",
                                "Ernie4_5ForCausalLM",
                                "MixtralForCausalLM",
                                "DeepseekV3ForCausalLM",
                                "Qwen2VLForConditionalGeneration",
                                "LlavaForConditionalGeneration",
                                "Idefics3ForConditionalGeneration"};

std::string status_for(int i, int version_index) {
  const int h = (i * 7919) % 100;
  std::string s = h < 60   ? "pass"
                  : h < 70 ? "fail"
                  : h < 78 ? "error"
                  : h < 83 ? "timeout"
                  : h < 88 ? "oom"
                  : h < 94 ? "unsupported"
                           : "untested";
  if (version_index > 0) {  // a later lathe: some regressions, some fixes
    if (s == "pass" && i % 17 == 0)
      s = "fail";
    else if (s != "pass" && s != "unsupported" && i % 3 == 0)
      s = "pass";
  }
  return s;
}

LabRow make_row(int i, const std::string& lathe_version, int version_index) {
  LabRow r;
  const size_t n_arch = sizeof kArchitectures / sizeof *kArchitectures;
  r.architecture = kArchitectures[static_cast<size_t>(i) % n_arch];
  const bool vision = r.architecture.find("Conditional") != std::string::npos;
  r.model_id = "org" + std::to_string(i % 37) + "/model-" + std::to_string(i);
  r.revision = "main";
  r.task = vision ? "image-text-to-text" : "text-generation";
  r.source = "hub";
  r.status = status_for(i, version_index);
  r.cores = 1 + i % 4;
  r.peak_memory_bytes = int64_t{200 + (i * 37) % 4000} << 20;
  r.memory_limit_bytes = int64_t{8} << 30;
  r.timeout_seconds = 600;
  r.parameters = int64_t{1} << (20 + (i * 5) % 18);  // 1M to 137G, spread over the rows
  r.weight_bytes = r.parameters * 4;
  r.total_seconds = 1.5 + (i % 100) * 0.37;
  r.tokens_per_second = r.status == "pass" || r.status == "fail" ? 5.0 + (i % 50) : 0;
  r.stage_seconds = {{"fetch", 0.1}, {"inspect", 0.2}, {"load", 0.9}, {"done", r.total_seconds}};
  r.prompt_ids = {1, 415, 2936, 9060, 285};
  for (int t = 0; t < 32; ++t) r.reference_tokens.push_back(100 + (i + t * 13) % 900);
  r.lathe_version = lathe_version;
  r.lathe_commit = "abc" + std::to_string(1000 + version_index);
  r.transformers_version = r.status == "untested" ? "" : (i % 11 == 0 ? "5.23.0" : "5.24.0");
  r.torch_version = r.status == "untested" ? "" : "2.9.1";
  r.reference_source = r.status == "untested" ? "unavailable" : "cache";
  r.stack = {{"lathe", lathe_version},
             {"compiler", "gcc 12.2.0"},
             {"glibc", "2.36"},
             {"os", "Debian 12"},
             {"arrow", "22.0.0"}};
  if (!r.transformers_version.empty()) r.stack["transformers"] = r.transformers_version;
  r.run_script = "git checkout " + r.lathe_commit + "\ntools/setup.sh\nhf download " + r.model_id +
                 " --revision main --local-dir model\nbuild/lathe generate model --prompt-ids "
                 "'[1, 415, 2936, 9060, 285]' --max-new-tokens 32 --threads " +
                 std::to_string(r.cores);
  r.reference_script = "python tools/reference/bridge.py --model model --tokens 32";
  if (i % 4 == 0) {
    r.compile_cache_key = "MODULE_" + std::to_string(i) + "+f00d";
    r.compile_cache_fetch = "build/lathe cache fetch " + r.compile_cache_key;
  }
  r.catalog_snapshot = "2026-11-30";
  char ts[64];
  std::snprintf(ts, sizeof ts, "2026-11-%02dT%02d:%02d:00.000000Z", 20 + version_index, i / 60 % 24,
                i % 60);
  r.started_at = r.finished_at = ts;
  r.host = "lab-node-" + std::to_string(i % 8);
  if (r.status == "pass") {
    r.stage = "done";
    r.generated_tokens = r.reference_tokens;
    r.logits_nmse = 1e-9;
    r.top1_agreement = 1.0;
    r.judge_verdict = "tokens equal, NMSE 1e-09 <= 1e-05";
  } else if (r.status == "fail") {
    r.stage = "done";
    r.error_type = "numerics";
    r.generated_tokens = r.reference_tokens;
    const int at = 3 + i % 20;
    r.first_mismatch = at;
    r.generated_tokens[static_cast<size_t>(at)] += 1;
    r.logits_nmse = 3e-3;
    r.top1_agreement = 0.9;
    r.first_diverging_layer = "layer." + std::to_string(i % 6) + ".out";
    r.judge_verdict = "tokens differ at position " + std::to_string(at);
  } else if (r.status == "untested") {
    r.stage = "reference";
    r.error_type = "reference_unavailable";
    r.error_message = "no reference in the cache and no bridge";
    r.generated_tokens = r.reference_tokens;
    r.reference_tokens.clear();
  } else {
    r.stage = r.status == "unsupported" ? "inspect" : r.status == "oom" ? "plan" : "load";
    r.error_type = r.status == "unsupported" ? "unsupported_architecture"
                   : r.status == "oom"       ? "out_of_memory"
                   : r.status == "timeout"   ? "timeout"
                                             : "load_error";
    r.error_message = r.model_id + "/model.safetensors: " + r.error_type;
    r.log_tail = "loading " + r.model_id + "\n" + r.error_message + "\n";
    r.reference_tokens.clear();
  }
  return r;
}

LabRow injection_row(const std::string& lathe_version) {
  LabRow r = make_row(1, lathe_version, 0);
  const std::string x = kInjection;
  r.model_id = "evil/" + x;
  r.architecture = "LlamaForCausalLM";  // grouped with the others; the text fields carry it
  r.status = "fail";
  r.stage = "done";
  r.error_type = "numerics";
  r.error_message = "message " + x;
  r.log_tail = "log " + x + "\n<b>bold?</b> &amp; &lt;";
  r.judge_verdict = "verdict " + x;
  r.run_script = "echo '" + x + "'";
  r.reference_script = "reference " + x;
  r.compile_cache_fetch = "fetch " + x;
  r.first_diverging_layer = "layer " + x;
  r.stack["evil"] = x;
  r.extra_packages = {x};
  r.host = x;
  r.generated_tokens = r.reference_tokens;
  r.generated_tokens[2] += 1;
  r.first_mismatch = 2;
  return r;
}

// A local checkpoint that failed to load: no Hub page, no run script, no reference, a long
// log.
LabRow local_error_row(const std::string& lathe_version) {
  LabRow r = make_row(2, lathe_version, 0);
  r.model_id = "my-checkpoints/broken-llama";
  r.revision = "local";
  r.source = "local";
  r.architecture = "LlamaForCausalLM";
  r.status = "error";
  r.stage = "load";
  r.error_type = "load_error";
  r.judge_verdict.clear();
  r.logits_nmse.reset();
  r.top1_agreement.reset();
  r.error_message = "model.safetensors: truncated (header says 4096 bytes, the file has 1000)";
  r.log_tail.clear();
  for (int i = 0; i < 12; ++i) r.log_tail += "loading layer " + std::to_string(i) + "\n";
  r.log_tail += r.error_message + "\n";
  r.run_script.clear();
  r.reference_script.clear();
  r.compile_cache_key.clear();
  r.compile_cache_fetch.clear();
  r.reference_tokens.clear();
  r.generated_tokens.clear();
  r.tokens_per_second = 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: explorer_make_dataset OUT [--rows N] [--lathe V,V] [--inject] "
                 "[--local-error]\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  int rows = 100;
  std::vector<std::string> versions = {"0.1.0"};
  bool inject = false, local_error = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) {
      rows = std::atoi(argv[++i]);
    } else if (a == "--lathe" && i + 1 < argc) {
      versions.clear();
      std::string s = argv[++i];
      for (size_t p; !s.empty(); s = p == std::string::npos ? "" : s.substr(p + 1)) {
        p = s.find(',');
        versions.push_back(s.substr(0, p));
      }
    } else if (a == "--inject") {
      inject = true;
    } else if (a == "--local-error") {
      local_error = true;
    } else {
      std::fprintf(stderr, "explorer_make_dataset: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<LabRow> all;
  for (size_t v = 0; v < versions.size(); ++v) {
    for (int i = 0; i < rows; ++i) all.push_back(make_row(i, versions[v], static_cast<int>(v)));
    if (inject) all.push_back(injection_row(versions[v]));
    if (local_error) all.push_back(local_error_row(versions[v]));
  }
  try {
    for (const auto& f : lathe::write_dataset(all, out / "dataset"))
      std::printf("%s\n", f.string().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "explorer_make_dataset: %s\n", e.what());
    return 1;
  }
  return 0;
}
