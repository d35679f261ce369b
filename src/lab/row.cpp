#include "lab/row.h"

#include <chrono>
#include <cstring>
#include <ctime>
#include <limits>

#include "core/error.h"

namespace lathe {

std::string LabRow::key() const {
  return cat(model_id, "@", revision, "|", task, "|", device_kind, "|", dtype);
}

bool is_status(const std::string& s) {
  for (const char* x : kStatuses)
    if (s == x) return true;
  return false;
}

bool is_stage(const std::string& s) {
  for (const char* x : kStages)
    if (s == x) return true;
  return false;
}

std::string utc_now() {
  using namespace std::chrono;
  return format_utc(duration_cast<microseconds>(system_clock::now().time_since_epoch()).count());
}

namespace {

template <class T>
Json optional_json(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// Typed reads with errors naming the field; absent optional fields read as empty.
struct Reader {
  const Json& j;
  const std::string& origin;

  const Json* find(const char* key) const {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void wrong(const char* key, const char* want) const {
    fail(origin, ": field \"", key, "\" must be ", want);
  }
  void str(const char* key, std::string& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_string()) wrong(key, "a string");
      out = v->get<std::string>();
    }
  }
  // An integer that fits Int: a larger one would wrap silently in get<Int>().
  template <class Int>
  static bool fits(const Json& v) {
    if (v.is_number_unsigned())
      return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max());
    if (!v.is_number_integer()) return false;
    const int64_t x = v.get<int64_t>();
    return x >= std::numeric_limits<Int>::min() && x <= std::numeric_limits<Int>::max();
  }
  template <class Int>
  void integer(const char* key, Int& out) const {
    if (const Json* v = find(key)) {
      if (!fits<Int>(*v)) wrong(key, sizeof(Int) == 4 ? "a 32-bit integer" : "a 64-bit integer");
      out = v->get<Int>();
    }
  }
  template <class Int>
  void integer(const char* key, std::optional<Int>& out) const {
    if (find(key)) {
      Int x{};
      integer(key, x);
      out = x;
    }
  }
  void number(const char* key, double& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_number()) wrong(key, "a number");
      out = v->get<double>();
    }
  }
  void number(const char* key, std::optional<double>& out) const {
    if (find(key)) {
      double x = 0;
      number(key, x);
      out = x;
    }
  }
  void str(const char* key, std::optional<std::string>& out) const {
    if (find(key)) {
      std::string x;
      str(key, x);
      out = x;
    }
  }
  void ids(const char* key, std::vector<int32_t>& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_array()) wrong(key, "a list of token ids");
      for (const Json& x : *v) {
        if (!fits<int32_t>(x)) wrong(key, "a list of token ids");
        out.push_back(x.get<int32_t>());
      }
    }
  }
  void strings(const char* key, std::vector<std::string>& out) const {
    if (const Json* v = find(key)) {
      if (!v->is_array()) wrong(key, "a list of strings");
      for (const Json& x : *v) {
        if (!x.is_string()) wrong(key, "a list of strings");
        out.push_back(x.get<std::string>());
      }
    }
  }
};

}  // namespace

Json row_to_json(const LabRow& r) {
  Json stages = Json::array();
  for (const auto& [name, s] : r.stage_seconds) stages.push_back({{"stage", name}, {"seconds", s}});
  return {
      {"model_id", r.model_id},
      {"revision", r.revision},
      {"task", r.task},
      {"device_kind", r.device_kind},
      {"dtype", r.dtype},
      {"architecture", r.architecture},
      {"source", r.source},
      {"status", r.status},
      {"stage", r.stage},
      {"error_type", r.error_type},
      {"error_message", r.error_message},
      {"log_tail", r.log_tail},
      {"signal", optional_json(r.signal)},
      {"exit_code", optional_json(r.exit_code)},
      {"cores", r.cores},
      {"tp_degree", r.tp_degree},
      {"ep_degree", r.ep_degree},
      {"peak_memory_bytes", r.peak_memory_bytes},
      {"memory_limit_bytes", r.memory_limit_bytes},
      {"timeout_seconds", r.timeout_seconds},
      {"parameters", r.parameters},
      {"weight_bytes", r.weight_bytes},
      {"stage_seconds", stages},
      {"compile_seconds", r.compile_seconds},
      {"total_seconds", r.total_seconds},
      {"tokens_per_second", r.tokens_per_second},
      {"reference_source", r.reference_source},
      {"prompt_ids", r.prompt_ids},
      {"reference_tokens", r.reference_tokens},
      {"generated_tokens", r.generated_tokens},
      {"first_mismatch", optional_json(r.first_mismatch)},
      {"logits_nmse", optional_json(r.logits_nmse)},
      {"logits_max_abs_error", optional_json(r.logits_max_abs_error)},
      {"top1_agreement", optional_json(r.top1_agreement)},
      {"decode_logits_nmse", optional_json(r.decode_logits_nmse)},
      {"decode_first_diverging_step", optional_json(r.decode_first_diverging_step)},
      {"first_diverging_layer", optional_json(r.first_diverging_layer)},
      {"judge_verdict", r.judge_verdict},
      {"fluency_verdict", r.fluency_verdict},
      {"lathe_version", r.lathe_version},
      {"lathe_commit", r.lathe_commit},
      {"transformers_version", r.transformers_version},
      {"torch_version", r.torch_version},
      {"stack", r.stack},
      {"extra_packages", r.extra_packages},
      {"run_script", r.run_script},
      {"reference_script", r.reference_script},
      {"compile_cache_key", r.compile_cache_key},
      {"compile_cache_fetch", r.compile_cache_fetch},
      {"catalog_snapshot", r.catalog_snapshot},
      {"started_at", r.started_at},
      {"finished_at", r.finished_at},
      {"host", r.host},
  };
}

LabRow row_from_json(const Json& j, const std::string& origin) {
  if (!j.is_object()) fail(origin, ": a lab row must be a JSON object");
  const Reader in{j, origin};
  LabRow r;
  in.str("model_id", r.model_id);
  if (r.model_id.empty()) fail(origin, ": field \"model_id\" is missing");
  in.str("revision", r.revision);
  in.str("task", r.task);
  in.str("device_kind", r.device_kind);
  in.str("dtype", r.dtype);
  in.str("architecture", r.architecture);
  in.str("source", r.source);
  in.str("status", r.status);
  if (!is_status(r.status))
    fail(origin, ": field \"status\" holds unknown status \"", r.status, "\"");
  in.str("stage", r.stage);
  in.str("error_type", r.error_type);
  in.str("error_message", r.error_message);
  in.str("log_tail", r.log_tail);
  in.integer("signal", r.signal);
  in.integer("exit_code", r.exit_code);
  in.integer("cores", r.cores);
  in.integer("tp_degree", r.tp_degree);
  in.integer("ep_degree", r.ep_degree);
  in.integer("peak_memory_bytes", r.peak_memory_bytes);
  in.integer("memory_limit_bytes", r.memory_limit_bytes);
  in.number("timeout_seconds", r.timeout_seconds);
  in.integer("parameters", r.parameters);
  in.integer("weight_bytes", r.weight_bytes);
  if (const Json* stages = in.find("stage_seconds")) {
    if (!stages->is_array()) in.wrong("stage_seconds", "a list of {stage, seconds}");
    for (const Json& s : *stages) {
      if (!s.is_object() || !s.contains("stage") || !s["stage"].is_string() ||
          !s.contains("seconds") || !s["seconds"].is_number())
        in.wrong("stage_seconds", "a list of {stage, seconds}");
      r.stage_seconds.emplace_back(s["stage"].get<std::string>(), s["seconds"].get<double>());
    }
  }
  in.number("compile_seconds", r.compile_seconds);
  in.number("total_seconds", r.total_seconds);
  in.number("tokens_per_second", r.tokens_per_second);
  in.str("reference_source", r.reference_source);
  in.ids("prompt_ids", r.prompt_ids);
  in.ids("reference_tokens", r.reference_tokens);
  in.ids("generated_tokens", r.generated_tokens);
  in.integer("first_mismatch", r.first_mismatch);
  in.number("logits_nmse", r.logits_nmse);
  in.number("logits_max_abs_error", r.logits_max_abs_error);
  in.number("top1_agreement", r.top1_agreement);
  in.number("decode_logits_nmse", r.decode_logits_nmse);
  in.integer("decode_first_diverging_step", r.decode_first_diverging_step);
  in.str("first_diverging_layer", r.first_diverging_layer);
  in.str("judge_verdict", r.judge_verdict);
  in.str("fluency_verdict", r.fluency_verdict);
  in.str("lathe_version", r.lathe_version);
  in.str("lathe_commit", r.lathe_commit);
  in.str("transformers_version", r.transformers_version);
  in.str("torch_version", r.torch_version);
  if (const Json* stack = in.find("stack")) {
    if (!stack->is_object()) in.wrong("stack", "an object of component versions");
    for (const auto& [k, v] : stack->items()) {
      if (!v.is_string()) in.wrong("stack", "an object of component versions");
      r.stack[k] = v.get<std::string>();
    }
  }
  in.strings("extra_packages", r.extra_packages);
  in.str("run_script", r.run_script);
  in.str("reference_script", r.reference_script);
  in.str("compile_cache_key", r.compile_cache_key);
  in.str("compile_cache_fetch", r.compile_cache_fetch);
  in.str("catalog_snapshot", r.catalog_snapshot);
  in.str("started_at", r.started_at);
  in.str("finished_at", r.finished_at);
  in.str("host", r.host);
  return r;
}

}  // namespace lathe
