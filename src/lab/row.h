// One lab result: what happened when one catalog model went through the protocol
// (docs/dataset.md documents every field). Rows travel as JSON between the per-model process
// and the sweep, are journaled as JSON lines, and are published as Parquet (dataset.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/json.h"

namespace lathe {

// The statuses of docs/dataset.md. "untested" marks ranked models without a result.
inline constexpr const char* kStatuses[] = {"pass", "fail",        "error",   "timeout",
                                            "oom",  "unsupported", "untested"};

// The protocol's stages, in order. A failed row names the stage it stopped in.
inline constexpr const char* kStages[] = {"fetch",    "inspect",   "plan",    "load", "compile",
                                          "generate", "reference", "compare", "done"};

struct LabRow {
  // Identity: one row per (model_id, revision, task, device_kind, dtype).
  std::string model_id, revision, task, device_kind = "cpu", dtype = "f32";
  std::string architecture;
  std::string source;  // "tiny" (built from tests/fixtures/tiny), "local" or "hub"

  // Outcome.
  std::string status;  // one of kStatuses
  std::string stage;   // where it stopped: one of kStages ("done" when it ran through)
  std::string error_type, error_message, log_tail;
  std::optional<int32_t> signal;  // the signal that ended the model's process, if one did
  std::optional<int32_t> exit_code;

  // Resources.
  int32_t cores = 1, tp_degree = 1, ep_degree = 1;
  int64_t peak_memory_bytes = 0;
  int64_t memory_limit_bytes = 0;
  double timeout_seconds = 0;
  int64_t parameters = 0, weight_bytes = 0;

  // Times, in seconds from the start of the model's run.
  std::vector<std::pair<std::string, double>> stage_seconds;  // when each stage ended
  double compile_seconds = 0, total_seconds = 0, tokens_per_second = 0;

  // Numerics against the reference (transformers f32 on CPU).
  std::string reference_source;  // "bridge", "cache" or "unavailable"
  std::vector<int32_t> prompt_ids, reference_tokens, generated_tokens;
  std::optional<int32_t> first_mismatch;
  std::optional<double> logits_nmse, logits_max_abs_error, top1_agreement;
  // The decode steps' logits (the prompt's last row, then each reference token through the
  // cache) against generate's in transformers; the first step past the tolerance.
  std::optional<double> decode_logits_nmse;
  std::optional<int32_t> decode_first_diverging_step;
  std::optional<std::string> first_diverging_layer;
  std::string judge_verdict;
  // Sharded runs: the fluency judge's verdict on the generated text (src/lab/fluency.h).
  std::string fluency_verdict;

  // Stack and reproduction.
  std::string lathe_version, lathe_commit, transformers_version, torch_version;
  std::map<std::string, std::string> stack;  // every component and its version
  std::vector<std::string> extra_packages;
  std::string run_script, reference_script;
  std::string compile_cache_key, compile_cache_fetch;  // empty until the compile cache exists
  std::string catalog_snapshot;
  std::string started_at, finished_at;  // UTC, ISO 8601 with microseconds
  std::string host;

  // The identity as one string: rows with equal keys are the same result.
  std::string key() const;
};

Json row_to_json(const LabRow& row);
// Throws lathe::Error naming `origin` and the field when a field is missing or mistyped.
LabRow row_from_json(const Json& j, const std::string& origin);

bool is_status(const std::string& s);
bool is_stage(const std::string& s);

// Now, as UTC ISO 8601 with microseconds ("2026-11-30T06:01:02.123456Z").
std::string utc_now();

// Microseconds since the epoch as "2026-11-30T06:01:02.123456Z". Inline: the Parquet plug-in
// (src/lab/dataset_arrow.cpp) reads timestamps with it and links nothing of lathe's.
inline std::string format_utc(int64_t micros) {
  // Floor division: before 1970 the fraction still counts forward from the second.
  int64_t secs = micros / 1000000, frac = micros % 1000000;
  if (frac < 0) secs -= 1, frac += 1000000;
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(frac));
  return out;
}

}  // namespace lathe
