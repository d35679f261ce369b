#include "serve/api.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/version.h"
#include "lab/report.h"
#include "models/registry.h"

namespace lathe {

namespace {

// Strings longer than this are cut in answers (a log tail is 4 KB; a hostile file may hold more).
constexpr size_t kMaxFieldChars = 64 * 1024;
constexpr size_t kBriefMessageChars = 300;

std::string param(const ApiParams& p, const std::string& name, const std::string& fallback = "") {
  auto it = p.find(name);
  return it == p.end() ? fallback : it->second;
}

int64_t int_param(const ApiParams& p, const std::string& name, int64_t fallback, int64_t min,
                  int64_t max) {
  auto it = p.find(name);
  if (it == p.end() || it->second.empty()) return fallback;
  const std::string& s = it->second;
  if (s.size() > 12 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw ApiError(400, cat("parameter ", name, " must be a whole number"));
  const int64_t v = std::stoll(s);
  if (v < min || v > max)
    throw ApiError(400, cat("parameter ", name, " must be between ", min, " and ", max));
  return v;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string clip(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n) + " [... " + std::to_string(s.size() - n) + " more]";
}

std::vector<std::string> lathe_versions(const Snapshot& snap) {
  std::set<std::string> v;
  for (const auto& r : snap.rows) v.insert(r.lathe_version);
  std::vector<std::string> out(v.begin(), v.end());
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return version_less(b, a); });
  return out;  // newest first
}

// Which rows a request looks at: one task, one lathe version, one or any transformers version.
struct Selection {
  std::string task, lathe, transformers;  // empty: any
  bool matches(const LabRow& r) const {
    return (task.empty() || r.task == task) && (lathe.empty() || r.lathe_version == lathe) &&
           (transformers.empty() || transformers_label(r) == transformers);
  }
};

std::string any_is_empty(const std::string& v) {
  return v == "any" ? "" : v;
}

Selection read_selection(const Snapshot& snap, const ApiParams& p, const std::string& prefix = "") {
  Selection s;
  s.task = any_is_empty(param(p, "task", "text-generation"));
  auto it = p.find(prefix + "lathe");
  if (it != p.end() && !it->second.empty()) {
    s.lathe = any_is_empty(it->second);
  } else {
    const auto versions = lathe_versions(snap);
    // The newest by default; a diff's "a" side defaults to the one before it.
    const size_t i = prefix == "a_" && versions.size() > 1 ? 1 : 0;
    if (!versions.empty()) s.lathe = versions[i];
  }
  s.transformers = any_is_empty(param(p, prefix + "transformers", "any"));
  return s;
}

// Entries kept per snapshot before the cache starts over (each is at most a few MB).
constexpr size_t kMaxCached = 64;

// The selected rows, one per identity (model, revision, task, device, dtype): with several
// transformers versions, the one that finished last. Cached per snapshot.
std::shared_ptr<const std::vector<const LabRow*>> select_latest(const Snapshot& snap,
                                                                const Selection& sel) {
  const std::string cache_key = sel.task + '\n' + sel.lathe + '\n' + sel.transformers;
  {
    std::lock_guard<std::mutex> lock(snap.cache_mutex);
    if (auto it = snap.selections.find(cache_key); it != snap.selections.end()) return it->second;
  }
  std::unordered_map<std::string_view, size_t> at;
  auto out = std::make_shared<std::vector<const LabRow*>>();
  for (size_t i = 0; i < snap.rows.size(); ++i) {
    const LabRow& r = snap.rows[i];
    if (!sel.matches(r)) continue;
    auto [it, fresh] = at.emplace(snap.keys[i], out->size());
    if (fresh)
      out->push_back(&r);
    else if ((*out)[it->second]->finished_at < r.finished_at)
      (*out)[it->second] = &r;
  }
  std::lock_guard<std::mutex> lock(snap.cache_mutex);
  if (snap.selections.size() >= kMaxCached) snap.selections.clear();
  snap.selections[cache_key] = out;
  return out;
}

// An answer computed once per snapshot and query (`make` runs outside the lock).
template <class Make>
std::shared_ptr<const Json> cached_answer(const Snapshot& snap, const std::string& key, Make make) {
  {
    std::lock_guard<std::mutex> lock(snap.cache_mutex);
    if (auto it = snap.answers.find(key); it != snap.answers.end()) return it->second;
  }
  auto j = std::make_shared<const Json>(make());
  std::lock_guard<std::mutex> lock(snap.cache_mutex);
  if (snap.answers.size() >= kMaxCached) snap.answers.clear();
  snap.answers[key] = j;
  return j;
}

// The fields report_json and diff_json read, without the large ones (scripts, logs, tokens).
LabRow slim(const LabRow& r) {
  LabRow s;
  s.model_id = r.model_id;
  s.revision = r.revision;
  s.task = r.task;
  s.device_kind = r.device_kind;
  s.dtype = r.dtype;
  s.architecture = r.architecture;
  s.status = r.status;
  s.stage = r.stage;
  s.error_type = r.error_type;
  s.error_message = r.error_message.substr(0, kBriefMessageChars);
  s.lathe_version = r.lathe_version;
  s.transformers_version = r.transformers_version;
  s.source = r.source;
  return s;
}

// Whether this lathe implements an architecture (`lathe architectures`), as the report asks.
bool implemented(const std::string& architecture) {
  return find_architecture(architecture) != nullptr;
}

Json brief(const LabRow& r) {
  return {{"model_id", r.model_id},
          {"revision", r.revision},
          {"task", r.task},
          {"device_kind", r.device_kind},
          {"dtype", r.dtype},
          {"architecture", r.architecture},
          {"status", r.status},
          {"stage", r.stage},
          {"error_type", r.error_type},
          {"error_message", clip(r.error_message, kBriefMessageChars)},
          {"cores", r.cores},
          {"total_seconds", r.total_seconds},
          {"compile_seconds", r.compile_seconds},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"tokens_per_second", r.tokens_per_second},
          {"parameters", r.parameters},
          {"lathe_version", r.lathe_version},
          {"transformers_version", transformers_label(r)},
          {"finished_at", r.finished_at},
          {"tested", true}};
}

// One line of the table: a row, or a ranked model without one. A ranked model without a row
// whose architecture (the ranking's) lathe does not implement is `unsupported` without being
// run; any other is `untested`.
struct Item {
  const LabRow* row = nullptr;
  const CatalogEntry* entry = nullptr;
  int64_t rank = 0;
  const std::string& id() const { return row ? row->model_id : entry->id; }
  bool unimplemented() const {
    return !row && !entry->architecture.empty() && !implemented(entry->architecture);
  }
  const std::string& status() const {
    static const std::string untested = "untested", unsupported = "unsupported";
    return row ? row->status : unimplemented() ? unsupported : untested;
  }
  const std::string& architecture() const { return row ? row->architecture : entry->architecture; }
  int64_t parameters() const { return row ? row->parameters : 0; }
};

Json item_json(const Item& it, const std::string& task) {
  Json j;
  if (it.row) {
    j = brief(*it.row);
  } else if (it.unimplemented()) {
    j = {{"model_id", it.entry->id},
         {"revision", it.entry->revision},
         {"task", task},
         {"architecture", it.entry->architecture},
         {"status", "unsupported"},
         {"stage", "inspect"},
         {"error_type", "unsupported_architecture"},
         {"error_message",
          cat("architecture ", it.entry->architecture,
              " (the ranking's) is not implemented by lathe ", kLatheVersion, ": not run")},
         {"tested", false}};
  } else {
    j = {{"model_id", it.entry->id},
         {"revision", it.entry->revision},
         {"task", task},
         {"architecture", it.entry->architecture},
         {"status", "untested"},
         {"stage", ""},
         {"error_type", "not_run"},
         {"error_message", "no row for this model yet"},
         {"tested", false}};
  }
  if (it.entry) {
    j["rank"] = it.rank;
    if (it.entry->downloads) j["downloads"] = *it.entry->downloads;
  }
  return j;
}

double sort_number(const Item& it, const std::string& key) {
  if (!it.row) return -1;
  if (key == "time") return it.row->total_seconds;
  if (key == "memory") return static_cast<double>(it.row->peak_memory_bytes);
  if (key == "speed") return it.row->tokens_per_second;
  if (key == "params") return static_cast<double>(it.row->parameters);
  return static_cast<double>(it.row->cores);  // "cores"
}

int status_order(const std::string& s) {
  int i = 0;
  for (const char* k : kStatuses) {
    if (s == k) return i;
    ++i;
  }
  return i;
}

Json versions_json(const Snapshot& snap);

// Transformers versions, newest first, "none" (rows without a reference) last.
std::vector<std::string> newest_first(const std::set<std::string>& transformers) {
  std::vector<std::string> tf(transformers.begin(), transformers.end());
  std::sort(tf.begin(), tf.end(), [](auto& a, auto& b) {
    if ((a == "none") != (b == "none")) return b == "none";
    return version_less(b, a);
  });
  return tf;
}

// How much of each of the task's rankings the selected rows cover: the ranked models with a
// row that ran (any status but untested), and those with a passing row.
Json ranking_coverage(const Snapshot& snap, const std::string& task,
                      const std::vector<const LabRow*>& rows) {
  std::unordered_map<std::string_view, bool> passes;  // model id: a row passes
  for (const LabRow* r : rows) {
    if (r->status == "untested") continue;
    bool& p = passes[r->model_id];
    p = p || r->status == "pass";
  }
  Json out = Json::array();
  for (const char* view : kRankedViews) {
    const auto it = snap.rankings.find({task, view});
    if (it == snap.rankings.end()) continue;
    int64_t run = 0, passed = 0;
    for (const auto& e : it->second.models) {
      const auto p = passes.find(e.id);
      if (p == passes.end()) continue;
      ++run;
      passed += p->second;
    }
    out.push_back({{"view", view},
                   {"snapshot", it->second.snapshot},
                   {"models", it->second.models.size()},
                   {"run", run},
                   {"passed", passed}});
  }
  return out;
}

}  // namespace

Json api_versions(const Snapshot& snap) {
  return *cached_answer(snap, "versions", [&] { return versions_json(snap); });
}

namespace {
Json versions_json(const Snapshot& snap) {
  std::set<std::string> transformers, tasks;
  std::map<std::pair<std::string, std::string>, int64_t> pairs;
  for (const auto& r : snap.rows) {
    transformers.insert(transformers_label(r));
    tasks.insert(r.task);
    ++pairs[{r.lathe_version, transformers_label(r)}];
  }
  const std::vector<std::string> tf = newest_first(transformers);
  Json pair_list = Json::array();
  for (const auto& [k, n] : pairs)
    pair_list.push_back({{"lathe", k.first}, {"transformers", k.second}, {"rows", n}});
  Json rankings = Json::array();
  for (const auto& [k, c] : snap.rankings)
    rankings.push_back({{"task", k.first},
                        {"view", k.second},
                        {"snapshot", c.snapshot},
                        {"models", c.models.size()}});
  for (const char* t : {"text-generation", "image-text-to-text"}) tasks.insert(t);
  return {{"lathe", lathe_versions(snap)},
          {"transformers", tf},
          {"pairs", pair_list},
          {"tasks", tasks},
          {"rankings", rankings},
          {"rows", snap.rows.size()},
          {"files", snap.files.size()},
          {"errors", snap.errors},
          {"loaded_at", snap.loaded_at},
          {"generation", snap.generation}};
}
}  // namespace

Json api_rows(const Snapshot& snap, const ApiParams& p) {
  const Selection sel = read_selection(snap, p);
  const std::string view = param(p, "view", "selected");
  if (view != "all" &&
      std::find_if(std::begin(kRankedViews), std::end(kRankedViews),
                   [&](const char* v) { return view == v; }) == std::end(kRankedViews))
    throw ApiError(400, "parameter view must be selected, trending, downloads or all");
  const std::string q = lower(param(p, "q"));
  const std::string status = param(p, "status"), arch = param(p, "arch");
  if (!status.empty() && !is_status(status)) throw ApiError(400, "unknown status " + status);
  const int64_t offset = int_param(p, "offset", 0, 0, int64_t{1} << 40);
  const int64_t limit = int_param(p, "limit", 50, 1, kMaxPageRows);
  // Parameter counts from min_params up to, not including, max_params (0: no bound); a row
  // whose count is unknown (0), or a ranked model without a row, is outside any such range.
  constexpr int64_t kMaxParamBound = 999'999'999'999;
  const int64_t min_params = int_param(p, "min_params", 0, 0, kMaxParamBound);
  const int64_t max_params = int_param(p, "max_params", 0, 0, kMaxParamBound);
  const bool by_size = min_params > 0 || max_params > 0;

  const auto selected = select_latest(snap, sel);
  const auto& rows = *selected;
  const Catalog* ranking = nullptr;
  if (auto it = snap.rankings.find({sel.task, view}); it != snap.rankings.end())
    ranking = &it->second;
  std::vector<Item> items;
  if (ranking) {
    std::unordered_map<std::string, std::vector<const LabRow*>> by_id;
    for (const LabRow* r : rows) by_id[r->model_id].push_back(r);
    int64_t n = 0;
    for (const auto& e : ranking->models) {
      const int64_t rank = e.rank.value_or(n + 1);
      ++n;
      auto it = by_id.find(e.id);
      if (it == by_id.end()) {
        items.push_back({nullptr, &e, rank});
        continue;
      }
      for (const LabRow* r : it->second) items.push_back({r, &e, rank});
    }
  } else if (view == "all") {  // a ranked view without its ranking file lists nothing
    for (const LabRow* r : rows) items.push_back({r, nullptr, 0});
  }

  // Search and the architecture filter first; the status counts describe that set.
  std::vector<Item> found;
  Json counts = Json::object();
  for (const char* s : kStatuses) counts[s] = 0;
  for (const auto& it : items) {
    if (!q.empty()) {
      const std::string id = it.row ? std::string() : lower(it.id());
      const std::string& lid =
          it.row ? snap.lower_ids[static_cast<size_t>(it.row - snap.rows.data())] : id;
      if (lid.find(q) == std::string::npos) continue;
    }
    if (!arch.empty() && it.architecture() != arch) continue;
    if (by_size && (it.parameters() <= 0 || it.parameters() < min_params ||
                    (max_params > 0 && it.parameters() >= max_params)))
      continue;
    counts[it.status()] = counts[it.status()].get<int64_t>() + 1;
    if (!status.empty() && it.status() != status) continue;
    found.push_back(it);
  }

  const std::string sort = param(p, "sort", ranking ? "rank" : "model");
  const bool desc = param(p, "order", "asc") == "desc";
  auto by_id = [](const Item& a, const Item& b) { return a.id() < b.id(); };
  std::function<bool(const Item&, const Item&)> less;
  if (sort == "rank")
    less = [&](const Item& a, const Item& b) { return a.rank < b.rank; };
  else if (sort == "model")
    less = by_id;
  else if (sort == "status")
    less = [](const Item& a, const Item& b) {
      return status_order(a.status()) < status_order(b.status());
    };
  else if (sort == "architecture")
    less = [](const Item& a, const Item& b) { return a.architecture() < b.architecture(); };
  else if (sort == "time" || sort == "memory" || sort == "speed" || sort == "cores" ||
           sort == "params")
    less = [&](const Item& a, const Item& b) {
      return sort_number(a, sort) < sort_number(b, sort);
    };
  else
    throw ApiError(400,
                   "parameter sort must be rank, model, status, architecture, cores, time, "
                   "memory, speed or params");
  std::stable_sort(found.begin(), found.end(), by_id);
  std::stable_sort(found.begin(), found.end(),
                   [&](const Item& a, const Item& b) { return desc ? less(b, a) : less(a, b); });

  Json page = Json::array();
  for (int64_t i = offset; i < static_cast<int64_t>(found.size()) && i < offset + limit; ++i)
    page.push_back(item_json(found[static_cast<size_t>(i)], sel.task));
  Json ranking_json = nullptr;
  if (ranking)
    ranking_json = {{"view", ranking->view},
                    {"snapshot", ranking->snapshot},
                    {"source", ranking->source},
                    {"models", ranking->models.size()}};
  return {{"task", sel.task},
          {"view", view},
          {"lathe", sel.lathe},
          {"transformers", sel.transformers.empty() ? "any" : sel.transformers},
          {"ranking", ranking_json},
          {"ranking_missing", view != "all" && !ranking},
          {"total", found.size()},
          {"offset", offset},
          {"limit", limit},
          {"counts", counts},
          {"items", page}};
}

Json api_row(const Snapshot& snap, const ApiParams& p) {
  const std::string model = param(p, "model");
  if (model.empty()) throw ApiError(400, "parameter model is required");
  const std::string task = param(p, "task"), revision = param(p, "revision"),
                    dtype = param(p, "dtype"), device = param(p, "device");
  const std::string lathe = any_is_empty(param(p, "lathe")),
                    tf = any_is_empty(param(p, "transformers"));
  const LabRow* best = nullptr;
  std::vector<const LabRow*> history;
  for (const auto& r : snap.rows) {
    if (r.model_id != model || (!task.empty() && r.task != task)) continue;
    history.push_back(&r);
    if ((!revision.empty() && r.revision != revision) || (!dtype.empty() && r.dtype != dtype) ||
        (!device.empty() && r.device_kind != device) ||
        (!lathe.empty() && r.lathe_version != lathe) ||
        (!tf.empty() && transformers_label(r) != tf))
      continue;
    if (!best || best->finished_at < r.finished_at) best = &r;
  }
  if (!best) throw ApiError(404, "no row for model " + clip(model, 200) + " in this selection");
  Json row = row_to_json(*best);
  for (auto& [k, v] : row.items())
    if (v.is_string()) v = clip(v.get<std::string>(), kMaxFieldChars);
  std::sort(history.begin(), history.end(), [](const LabRow* a, const LabRow* b) {
    if (a->lathe_version != b->lathe_version)
      return version_less(b->lathe_version, a->lathe_version);
    return a->finished_at > b->finished_at;
  });
  Json hist = Json::array();
  for (size_t i = 0; i < history.size() && i < static_cast<size_t>(kMaxPageRows); ++i)
    hist.push_back(brief(*history[i]));
  return {{"row", row}, {"history", hist}};
}

Json api_summary(const Snapshot& snap, const ApiParams& p) {
  const Selection sel = read_selection(snap, p);
  const auto report =
      cached_answer(snap, "summary\n" + sel.task + '\n' + sel.lathe + '\n' + sel.transformers, [&] {
        const auto selected = select_latest(snap, sel);
        std::vector<LabRow> rows;
        std::set<std::string> transformers;
        for (const LabRow* r : *selected) {
          rows.push_back(slim(*r));
          transformers.insert(transformers_label(*r));
        }
        Json j = report_json(rows);
        j["transformers_versions"] = newest_first(transformers);
        j["rankings"] = ranking_coverage(snap, sel.task, *selected);
        return j;
      });
  Json j = *report;
  j["task"] = sel.task;
  j["lathe"] = sel.lathe;
  j["transformers"] = sel.transformers.empty() ? "any" : sel.transformers;
  return j;
}

Json api_coverage(const Snapshot& snap, const ApiParams& p) {
  const Selection sel = read_selection(snap, p);
  const auto answer = cached_answer(
      snap, "coverage\n" + sel.task + '\n' + sel.lathe + '\n' + sel.transformers, [&] {
        std::vector<LabRow> rows, fixtures;
        // Held here: a range-for over `*select_latest(...)` would drop the pointer before the
        // loop, and another request may evict the selection from the cache meanwhile.
        const auto selected = select_latest(snap, sel);
        for (const LabRow* r : *selected) {
          rows.push_back(slim(*r));
          if (r->source == "tiny") fixtures.push_back(rows.back());
        }
        // The same figures as `lathe lab report`: one function computes both.
        Json rankings = Json::array();
        for (const auto& [key, ranking] : snap.rankings) {
          const std::string& view = key.second;
          const bool ranked = std::find(std::begin(kRankedViews), std::end(kRankedViews), view) !=
                              std::end(kRankedViews);
          if (ranked && (sel.task.empty() || key.first == sel.task))
            rankings.push_back(ranking_coverage_json(ranking, rows, implemented));
        }
        const auto own = [](const std::vector<LabRow>& rs) {
          Json c = report_json(rs)["coverage"];
          c["rows"] = rs.size();
          c["percent"] =
              share_percent(c["passing"].get<int64_t>(), c["architectures"].get<int64_t>());
          return c;
        };
        return Json{{"rankings", rankings}, {"rows", own(rows)}, {"fixtures", own(fixtures)}};
      });
  Json j = *answer;
  j["task"] = sel.task.empty() ? "any" : sel.task;
  j["lathe"] = sel.lathe;
  j["transformers"] = sel.transformers.empty() ? "any" : sel.transformers;
  return j;
}

Json api_diff(const Snapshot& snap, const ApiParams& p) {
  const Selection a = read_selection(snap, p, "a_"), b = read_selection(snap, p, "b_");
  const int64_t offset = int_param(p, "offset", 0, 0, int64_t{1} << 40);
  const int64_t limit = int_param(p, "limit", 100, 1, kMaxPageRows);
  const auto diff = cached_answer(snap,
                                  cat("diff\n", a.task, '\n', a.lathe, '\n', a.transformers, '\n',
                                      b.lathe, '\n', b.transformers),
                                  [&] {
                                    std::vector<LabRow> ra, rb;
                                    const auto sa = select_latest(snap, a);
                                    const auto sb = select_latest(snap, b);
                                    for (const LabRow* r : *sa) ra.push_back(slim(*r));
                                    for (const LabRow* r : *sb) rb.push_back(slim(*r));
                                    return diff_json(ra, rb);
                                  });
  const Json& d = *diff;
  auto side = [](const Selection& s) {
    return Json{{"lathe", s.lathe},
                {"transformers", s.transformers.empty() ? "any" : s.transformers}};
  };
  Json out = {{"task", a.task},   {"a", side(a)},  {"b", side(b)}, {"unchanged", d["unchanged"]},
              {"offset", offset}, {"limit", limit}};
  for (const char* part : {"regressions", "fixes", "only_in_a", "only_in_b"}) {
    const Json& all = d[part];
    Json slice = Json::array();
    for (int64_t i = offset; i < static_cast<int64_t>(all.size()) && i < offset + limit; ++i)
      slice.push_back(all[static_cast<size_t>(i)]);
    out[part] = slice;
    out[std::string(part) + "_total"] = all.size();
  }
  return out;
}

Json api_answer(const Snapshot& snap, const std::string& endpoint, const ApiParams& params) {
  if (endpoint == "versions") return api_versions(snap);
  if (endpoint == "rows") return api_rows(snap, params);
  if (endpoint == "row") return api_row(snap, params);
  if (endpoint == "summary") return api_summary(snap, params);
  if (endpoint == "coverage") return api_coverage(snap, params);
  if (endpoint == "diff") return api_diff(snap, params);
  throw ApiError(404, "no such endpoint; see /api/versions, rows, row, summary, coverage, diff");
}

}  // namespace lathe
