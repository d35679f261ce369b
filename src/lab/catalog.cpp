#include "lab/catalog.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "io/durable.h"
#include "io/hub_cache.h"
#include "lab/row.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {
constexpr int64_t kCatalogFormat = 1;

CatalogEntry entry_from_json(const Json& j, const std::string& origin, const fs::path& base) {
  if (!j.is_object()) fail(origin, ": each model must be a JSON object");
  JsonFields f(j, origin);
  CatalogEntry e;
  e.id = f.get<std::string>("id");
  if (e.id.empty()) fail(origin, ": field \"id\" is empty");
  e.revision = f.get_or<std::string>("revision", "main");
  e.task = f.get_or<std::string>("task", "");
  e.rank = f.get_optional<int64_t>("rank");
  e.architecture = f.get_or<std::string>("architecture", "");
  e.downloads = f.get_optional<int64_t>("downloads");
  e.likes = f.get_optional<int64_t>("likes");
  e.trending_score = f.get_optional<double>("trending_score");
  if (f.has("path")) e.path = fs::absolute(base / f.get<std::string>("path")).lexically_normal();
  if (f.has("fixture"))
    e.fixture = fs::absolute(base / f.get<std::string>("fixture")).lexically_normal();
  if (f.has("prompt_ids")) {
    const Json& ids = f.at("prompt_ids");
    if (!ids.is_array()) fail(origin, ": field \"prompt_ids\" must be a list of token ids");
    for (const Json& x : ids) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
        fail(origin, ": field \"prompt_ids\" holds ", x.dump(), ", not a token id");
      e.prompt_ids.push_back(x.get<int32_t>());
    }
  }
  const int64_t mb = f.get_or<int64_t>("memory_limit_mb", 0);
  if (mb < 0 || mb > (int64_t{1} << 30))
    fail(origin, ": field \"memory_limit_mb\" is out of range");
  e.memory_limit_bytes = mb << 20;
  e.timeout_seconds = f.get_or<double>("timeout_seconds", 0);
  if (!(e.timeout_seconds >= 0 && e.timeout_seconds < 1e7))
    fail(origin, ": field \"timeout_seconds\" is out of range");
  e.inject = f.get_or<std::string>("inject", "");
  bool numeric = false;
  try {
    numeric = numeric_fault(e.inject).kind != NumericFault::Kind::None;
  } catch (const Error& err) {
    fail(origin, ": field \"inject\": ", err.what());
  }
  if (!e.inject.empty() && e.inject != "hang" && e.inject != "crash" && e.inject != "oom" &&
      e.inject != "alloc" && !numeric)
    fail(origin,
         ": field \"inject\" must be \"hang\", \"crash\", \"oom\", \"alloc\", \"perturb:TENSOR\", "
         "\"config:FIELD*X\", \"config:FIELD+X\" or \"kv:LAYER\", got \"",
         e.inject, "\"");
  // A fault is written into the checkpoint the lab builds, never into a user's.
  if (numeric && e.fixture.empty())
    fail(origin, ": field \"inject\" \"", e.inject, "\" needs a \"fixture\" entry");
  return e;
}

Json entry_to_json(const CatalogEntry& e) {
  Json j = {{"id", e.id}, {"revision", e.revision}};
  if (!e.task.empty()) j["task"] = e.task;
  if (e.rank) j["rank"] = *e.rank;
  if (!e.architecture.empty()) j["architecture"] = e.architecture;
  if (e.downloads) j["downloads"] = *e.downloads;
  if (e.likes) j["likes"] = *e.likes;
  if (e.trending_score) j["trending_score"] = *e.trending_score;
  if (!e.path.empty()) j["path"] = e.path.string();
  if (!e.fixture.empty()) j["fixture"] = e.fixture.string();
  if (!e.prompt_ids.empty()) j["prompt_ids"] = e.prompt_ids;
  if (e.memory_limit_bytes) j["memory_limit_mb"] = e.memory_limit_bytes >> 20;
  if (e.timeout_seconds) j["timeout_seconds"] = e.timeout_seconds;
  if (!e.inject.empty()) j["inject"] = e.inject;
  return j;
}

}  // namespace

NumericFault numeric_fault(const std::string& inject) {
  NumericFault f;
  const auto number = [&](const std::string& s) {
    size_t used = 0;
    double x = 0;
    try {
      x = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size() || !std::isfinite(x))
      fail("\"", inject, "\": \"", s, "\" is not a number");
    return x;
  };
  if (inject.rfind("perturb:", 0) == 0 && inject.size() > 8) {
    f.kind = NumericFault::Kind::Weight;
    f.target = inject.substr(8);
  } else if (inject.rfind("config:", 0) == 0) {
    const size_t op = inject.find_first_of("*+", 7);
    if (op == std::string::npos || op == 7)
      fail("\"", inject, "\" must be config:FIELD*X or config:FIELD+X");
    f.kind = NumericFault::Kind::Config;
    f.target = inject.substr(7, op - 7);
    const double x = number(inject.substr(op + 1));
    (inject[op] == '*' ? f.factor : f.offset) = x;
  } else if (inject.rfind("kv:", 0) == 0) {
    f.kind = NumericFault::Kind::Cache;
    const double layer = number(inject.substr(3));
    if (layer < 0 || layer != static_cast<double>(static_cast<int64_t>(layer)))
      fail("\"", inject, "\": the layer must be a whole number");
    f.layer = static_cast<int64_t>(layer);
  }
  return f;
}

Catalog read_catalog(const fs::path& file) {
  const Json j = read_json_file(file);
  const std::string origin = file.string();
  if (!j.is_object()) fail(origin, ": a catalog must be a JSON object");
  JsonFields f(j, origin);
  const int64_t format = f.get_or<int64_t>("format", kCatalogFormat);
  if (format != kCatalogFormat)
    fail(origin, ": catalog format ", format, ", this lathe reads format ", kCatalogFormat);
  Catalog c;
  c.task = f.get_or<std::string>("task", "text-generation");
  c.view = f.get_or<std::string>("view", "local");
  c.snapshot = f.get_or<std::string>("snapshot", "");
  c.source = f.get_or<std::string>("source", "");
  const Json& models = f.at("models");
  if (!models.is_array()) fail(origin, ": field \"models\" must be a list");
  const fs::path base = file.parent_path();
  for (size_t i = 0; i < models.size(); ++i) {
    CatalogEntry e = entry_from_json(models[i], cat(origin, " models[", i, "]"), base);
    if (e.task.empty()) e.task = c.task;
    c.models.push_back(std::move(e));
  }
  return c;
}

Json catalog_to_json(const Catalog& c) {
  Json models = Json::array();
  for (const auto& e : c.models) models.push_back(entry_to_json(e));
  return {{"format", kCatalogFormat}, {"task", c.task},     {"view", c.view},
          {"snapshot", c.snapshot},   {"source", c.source}, {"models", models}};
}

void write_catalog(const Catalog& c, const fs::path& file) {
  write_file_atomic(file, catalog_to_json(c).dump(1) + "\n");
}

fs::path default_hf_hub_cache() {
  return hub::cache_dir();
}

std::optional<fs::path> find_in_hf_cache(const fs::path& hf_hub, const std::string& id,
                                         const std::string& revision) {
  std::string folder = "models--" + id;
  for (size_t p; (p = folder.find('/')) != std::string::npos;) folder.replace(p, 1, "--");
  const fs::path repo = hf_hub / folder;
  std::error_code ec;
  if (!fs::is_directory(repo / "snapshots", ec)) return std::nullopt;
  // refs/<revision> names the snapshot of a branch or tag; a commit hash names it directly.
  std::ifstream ref(repo / "refs" / revision);
  std::string commit;
  if (ref && std::getline(ref, commit) && fs::is_directory(repo / "snapshots" / commit, ec))
    return repo / "snapshots" / commit;
  if (fs::is_directory(repo / "snapshots" / revision, ec)) return repo / "snapshots" / revision;
  std::optional<fs::path> newest;
  fs::file_time_type newest_time{};
  for (const auto& s : fs::directory_iterator(repo / "snapshots", ec)) {
    if (!fs::exists(s.path() / "config.json", ec)) continue;
    const auto t = fs::last_write_time(s.path(), ec);
    if (!newest || t > newest_time) newest = s.path(), newest_time = t;
  }
  return newest;
}

Catalog default_catalog(const fs::path& fixtures, const std::vector<fs::path>& local,
                        const std::optional<fs::path>& hf_hub) {
  Catalog c;
  c.view = "local";
  c.source = "bundled";
  c.snapshot = utc_now().substr(0, 10);
  std::vector<fs::path> names;
  std::error_code ec;
  if (fs::is_directory(fixtures, ec))
    for (const auto& e : fs::directory_iterator(fixtures))
      if (fs::exists(e.path() / "goldens.json")) names.push_back(e.path());
  std::sort(names.begin(), names.end());
  for (const auto& f : names) {
    CatalogEntry e;
    e.id = "lathe-tiny/" + f.filename().string();
    e.revision = "fixture";
    e.fixture = fs::absolute(f).lexically_normal();
    c.models.push_back(std::move(e));
  }
  for (const auto& dir : local) {
    CatalogEntry e;
    e.id = fs::absolute(dir).lexically_normal().filename().string();
    e.revision = "local";
    e.path = fs::absolute(dir).lexically_normal();
    c.models.push_back(std::move(e));
  }
  if (hf_hub && fs::is_directory(*hf_hub, ec)) {
    std::vector<fs::path> repos;
    for (const auto& r : fs::directory_iterator(*hf_hub, ec))
      if (r.path().filename().string().rfind("models--", 0) == 0) repos.push_back(r.path());
    std::sort(repos.begin(), repos.end());
    for (const auto& r : repos) {
      std::string id = r.filename().string().substr(8);
      if (const size_t p = id.find("--"); p != std::string::npos) id.replace(p, 2, "/");
      const auto snap = find_in_hf_cache(*hf_hub, id, "main");
      if (!snap || !fs::exists(*snap / "config.json", ec)) continue;
      CatalogEntry e;
      e.id = id;
      e.revision = snap->filename().string();
      e.path = *snap;
      c.models.push_back(std::move(e));
    }
  }
  return c;
}

}  // namespace lathe
