#include "lab/download.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/version.h"
#include "io/hub_cache.h"
#include "io/hub_pull.h"
#include "lab/subprocess.h"
#include "models/registry.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

std::string gigabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", static_cast<double>(bytes) / 1e9);
  return buf;
}

// The row of a model that is not run, with the reason.
LabRow not_run(LabRow row, const std::string& status, const std::string& stage,
               const std::string& type, const std::string& message) {
  row.status = status;
  row.stage = stage;
  row.error_type = type;
  row.error_message = message;
  row.judge_verdict = "not run: " + message;
  row.finished_at = utc_now();
  return row;
}

// lathe pull's own message: its last line that starts with "error: ", without the prefix.
std::string pull_error(const fs::path& log) {
  const std::string tail = file_tail(log, 1 << 16);
  std::string found;
  size_t start = 0;
  while (start < tail.size()) {
    size_t end = tail.find('\n', start);
    if (end == std::string::npos) end = tail.size();
    const std::string line = tail.substr(start, end - start);
    if (line.rfind("error: ", 0) == 0) found = line.substr(7);
    start = end + 1;
  }
  return found;
}

}  // namespace

CacheFootprint::CacheFootprint(const fs::path& cache, const std::string& id) {
  const fs::path repo = hub::repo_dir(cache, id);
  roots_ = {repo, cache / ".locks" / repo.filename()};
  std::error_code ec;
  for (const fs::path& root : roots_) {
    const bool exists = fs::exists(fs::symlink_status(root, ec));
    before_.emplace_back(root, exists);
    if (!exists) continue;
    for (auto it = fs::recursive_directory_iterator(root, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      before_.emplace_back(it->path(), true);
  }
  std::sort(before_.begin(), before_.end());
}

int64_t CacheFootprint::remove_added() const {
  const auto existed = [&](const fs::path& p) {
    const auto it = std::lower_bound(before_.begin(), before_.end(), std::make_pair(p, false));
    return it != before_.end() && it->first == p && it->second;
  };
  int64_t freed = 0;
  std::error_code ec;
  for (const fs::path& root : roots_) {
    if (!existed(root)) {  // the pull made the whole folder
      std::error_code file_ec;
      for (auto it = fs::recursive_directory_iterator(root, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(file_ec) && !it->is_symlink(file_ec))
          freed += static_cast<int64_t>(it->file_size(file_ec));
      fs::remove_all(root, ec);
      continue;
    }
    std::vector<fs::path> added;
    for (auto it = fs::recursive_directory_iterator(root, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (!existed(it->path())) added.push_back(it->path());
    // Deepest first, so a folder is empty of what the pull added when its turn comes.
    std::sort(added.rbegin(), added.rend());
    for (const fs::path& p : added) {
      const auto st = fs::symlink_status(p, ec);
      if (fs::is_regular_file(st)) freed += static_cast<int64_t>(fs::file_size(p, ec));
      fs::remove_all(p, ec);
    }
  }
  return freed;
}

Fetched fetch_ranked_model(const CatalogEntry& e, LabRow base, const fs::path& hf_hub,
                           const DownloadOptions& opts, int64_t memory_limit_bytes,
                           const fs::path& lathe, const fs::path& log_file) {
  Fetched out;
  base.started_at = utc_now();
  if (!e.architecture.empty() && !find_architecture(e.architecture)) {
    out.row = not_run(
        base, "unsupported", "inspect", "unsupported_architecture",
        cat("architecture ", e.architecture, " (the catalog's) is not implemented by lathe ",
            kLatheVersion, " (lathe architectures): not downloaded"));
    return out;
  }
  const auto ref = hub::parse_model_ref(e.id + "@" + e.revision);
  if (!ref) {  // the sweep checks ids before it starts; a row rather than an abort
    out.row = not_run(base, "error", "fetch", "download_error",
                      cat("\"", e.id, "@", e.revision, "\" is not a Hub model id"));
    return out;
  }
  hub::PullOptions po;
  po.cache = hf_hub;
  po.endpoint = opts.endpoint;
  po.token = hub::token_from_env();
  hub::PullPlan plan;
  try {
    plan = hub::plan_pull(*ref, po);
  } catch (const Error& err) {
    out.row = not_run(base, "error", "fetch", "download_error", err.what());
    return out;
  }
  base.weight_bytes = plan.weight_bytes;
  const std::string listed = plan.weights_estimated ? " (the listing's safetensors files)" : "";
  if (memory_limit_bytes > 0 && plan.weight_bytes > memory_limit_bytes) {
    out.row = not_run(base, "untested", "fetch", "over_memory_limit",
                      cat("its weights are ", gigabytes(plan.weight_bytes), " GB", listed,
                          ", over the memory limit of ", memory_limit_bytes >> 20,
                          " MiB (--memory-limit): not downloaded"));
    return out;
  }
  if (plan.missing_bytes > opts.max_bytes) {
    out.row = not_run(base, "untested", "fetch", "over_download_budget",
                      cat("it needs ", gigabytes(plan.missing_bytes), " GB downloaded", listed,
                          ", over the budget of ", gigabytes(opts.max_bytes),
                          " GB (--max-download-gb): not downloaded"));
    return out;
  }
  fs::create_directories(hf_hub);
  struct statvfs v {};
  if (::statvfs(hf_hub.c_str(), &v) == 0) {
    const double free_bytes = static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize);
    if (static_cast<double>(plan.missing_bytes) > free_bytes) {
      out.row = not_run(
          base, "untested", "fetch", "over_free_disk",
          cat("it needs ", gigabytes(plan.missing_bytes), " GB downloaded and ", hf_hub.string(),
              " has ", gigabytes(static_cast<int64_t>(free_bytes)), " GB free: not downloaded"));
      return out;
    }
  }
  ProcessOptions p;
  p.argv = {lathe.string(), "pull",        "--cache",  hf_hub.string(),
            "--endpoint",   opts.endpoint, ref->text()};
  p.log_file = log_file;
  p.timeout_seconds = opts.timeout_seconds;
  std::error_code ec;
  fs::remove(log_file, ec);
  const ProcessResult r = run_process(p);
  if (r.timed_out || r.exit_code != 0) {
    std::string why = pull_error(log_file);
    if (r.timed_out)
      why = cat("lathe pull took longer than its timeout of ", opts.timeout_seconds,
                " s (--download-timeout); run it again to resume");
    else if (why.empty())
      why = r.signal ? cat("lathe pull ended with signal ", *r.signal)
                     : cat("lathe pull exited with code ", r.exit_code.value_or(-1));
    LabRow row = not_run(base, "error", "fetch", "download_error", why);
    row.log_tail = file_tail(log_file, 4000);
    out.row = std::move(row);
    return out;
  }
  const auto snap = hub::cached_snapshot(hf_hub, *ref);
  if (!snap) {
    out.row = not_run(base, "error", "fetch", "download_error",
                      cat("lathe pull ", ref->text(), " succeeded, but ", hf_hub.string(),
                          " holds no snapshot of it with a config.json"));
    return out;
  }
  out.snapshot = *snap;
  out.downloaded_bytes = plan.missing_bytes;
  return out;
}

}  // namespace lathe
