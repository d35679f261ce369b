#include "lab/runner.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/sanitizers.h"
#include "io/durable.h"
#include "lab/dataset.h"
#include "lab/subprocess.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

std::string safe_name(const std::string& id) {
  std::string s;
  for (char c : id) {
    if (c == '/')
      s += "--";
    else
      s +=
          std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  }
  return s.substr(0, 200);
}

std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

std::vector<std::string> child_args(const SweepOptions& o, const fs::path& entry,
                                    const fs::path& result, const fs::path& progress) {
  const ProtocolOptions& p = o.protocol;
  std::vector<std::string> a = {o.lathe_executable.string(),
                                "lab",
                                "run-one",
                                "--entry",
                                entry.string(),
                                "--result",
                                result.string(),
                                "--progress",
                                progress.string(),
                                "--work",
                                p.work_dir.string(),
                                "--reference-cache",
                                p.reference_cache.string(),
                                "--dtype",
                                p.dtype,
                                "--threads",
                                std::to_string(p.threads),
                                "--max-new-tokens",
                                std::to_string(p.max_new_tokens),
                                "--prompt",
                                p.prompt_text,
                                "--cache-dir",
                                p.compile_cache.string()};
  if (!p.compiled) a.push_back("--eager");
  if (!p.cache_remote.empty()) a.insert(a.end(), {"--cache-remote", p.cache_remote});
  if (p.tp > 1) a.insert(a.end(), {"--tp", std::to_string(p.tp)});
  if (p.ep > 1) a.insert(a.end(), {"--ep", std::to_string(p.ep)});
  if (p.max_cores > 0)
    a.insert(a.end(), {"--cores", std::to_string(p.max_cores), "--core-memory",
                       std::to_string(p.core_memory)});
  if (!p.judge_model.empty()) a.insert(a.end(), {"--judge-model", p.judge_model.string()});
  if (p.bridge) {
    a.insert(a.end(),
             {"--reference-python", p.bridge->python, "--reference-bridge", p.bridge->script,
              "--reference-timeout", std::to_string(p.bridge->timeout_seconds)});
  }
  return a;
}

// One row per key, the one that finished last (the first on a tie), in the order the keys
// first appear.
std::vector<LabRow> unique_rows(std::vector<LabRow> rows) {
  std::map<std::string, size_t> index;
  std::vector<LabRow> out;
  for (auto& r : rows) {
    auto [it, fresh] = index.emplace(r.key(), out.size());
    if (fresh)
      out.push_back(std::move(r));
    else if (r.finished_at > out[it->second].finished_at)
      out[it->second] = std::move(r);
  }
  return out;
}

}  // namespace

LabRow row_for_dead_process(LabRow row, const std::string& last_stage, bool timed_out,
                            std::optional<int> signal, std::optional<int> exit_code,
                            int64_t peak_rss_bytes, double seconds) {
  row.stage = last_stage.empty() || !is_stage(last_stage) ? "fetch" : last_stage;
  row.signal = signal;
  row.exit_code = exit_code;
  row.peak_memory_bytes = peak_rss_bytes;
  row.total_seconds = seconds;
  if (timed_out) {
    row.status = "timeout";
    row.error_type = "timeout";
    row.error_message =
        cat("killed after its timeout of ", row.timeout_seconds, " s, in stage ", row.stage);
  } else if (signal == SIGKILL && row.memory_limit_bytes > 0 &&
             peak_rss_bytes * 10 >= row.memory_limit_bytes * 9) {
    // The kernel's out-of-memory killer sends SIGKILL; the sweep's own kill is the timeout.
    row.status = "oom";
    row.error_type = "out_of_memory";
    row.error_message = cat("killed (SIGKILL) at ", peak_rss_bytes >> 20,
                            " MiB resident, near its memory limit of ",
                            row.memory_limit_bytes >> 20, " MiB, in stage ", row.stage);
  } else if (signal) {
    row.status = "error";
    row.error_type = "crash";
    row.error_message = cat("the model's process ended with signal ", *signal, " (",
                            strsignal(*signal), ") in stage ", row.stage);
  } else {
    row.status = "error";
    row.error_type = "no_result";
    row.error_message = cat("the model's process exited with code ", exit_code.value_or(-1),
                            " without a result, in stage ", row.stage);
  }
  return row;
}

std::vector<LabRow> read_journal(const fs::path& file, bool repair) {
  std::vector<LabRow> rows;
  const auto lines = read_log_lines(file, repair);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string origin = cat(file.string(), " line ", i + 1);
    rows.push_back(row_from_json(parse_json(lines[i], origin), origin));
  }
  return rows;
}

std::vector<LabRow> read_rows(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() == ".parquet") return read_parquet(path);
    return unique_rows(read_journal(path, false));
  }
  // A journal holds a key once; older lathe let two sweeps share a folder and write it twice.
  if (fs::exists(path / "rows.jsonl")) return unique_rows(read_journal(path / "rows.jsonl", false));
  const fs::path data = fs::exists(path / "dataset") ? path / "dataset" : path;
  std::vector<fs::path> files;
  if (fs::is_directory(data, ec))
    for (const auto& e : fs::directory_iterator(data))
      if (e.path().extension() == ".parquet") files.push_back(e.path());
  if (files.empty()) fail(path.string(), ": no lab rows here (no rows.jsonl, no .parquet files)");
  std::sort(files.begin(), files.end());
  std::vector<LabRow> rows;
  for (const auto& f : files)
    for (auto& r : read_parquet(f)) rows.push_back(std::move(r));
  return rows;
}

SweepResult run_sweep(const Catalog& catalog, const SweepOptions& o) {
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    throw UsageError(
        cat("--shard must be I/N with 0 <= I < N, got ", o.shard_index, "/", o.shard_count));
  // One sweep per folder for the sweep's whole life: two would run each model twice, write
  // each other's result files and journal every row twice. The lock dies with the process.
  fs::create_directories(o.out);
  const FolderLock lock(o.out, "wait for it to finish, or choose another --out");
  if (o.progress)
    o.progress(cat("lab: ", catalog.models.size(), " models in the catalog; sweep folder ",
                   o.out.string()));
  fs::create_directories(o.out / "logs");
  fs::create_directories(o.out / "run");
  const fs::path journal_path = o.out / "rows.jsonl";
  SweepResult res;
  if (fs::exists(journal_path)) {
    res.rows = read_journal(journal_path, o.resume);
    if (!o.resume && !res.rows.empty())
      fail(o.out.string(), ": this folder already holds a sweep (", res.rows.size(),
           " rows in rows.jsonl); pass --resume to continue it, or choose another --out");
    // A key journaled twice (by an older lathe) is resumed and published once.
    res.rows = unique_rows(std::move(res.rows));
  }
  std::set<std::string> done;
  for (const auto& r : res.rows) done.insert(r.key());
  res.resumed = static_cast<int>(res.rows.size());
  if (o.download && !o.hf_hub)
    throw UsageError("--download needs a Hugging Face cache to pull into (drop --no-hf-cache)");
  Catalog snapshot = catalog;
  snapshot.models.clear();
  std::vector<bool> to_download;  // per snapshot entry: pulled before it runs
  for (size_t i = 0; i < catalog.models.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(o.shard_count)) != o.shard_index) continue;
    CatalogEntry e = catalog.models[i];
    bool pull = false;
    if (e.path.empty() && e.fixture.empty()) {
      // A ranked model: run it when its snapshot is in the Hugging Face cache, or pull it.
      std::optional<fs::path> found;
      if (o.hf_hub) found = find_in_hf_cache(*o.hf_hub, e.id, e.revision);
      if (found) {
        e.path = *found;
      } else if (o.download) {
        pull = true;
      } else {
        res.not_available.push_back(e.id);
        continue;
      }
    }
    snapshot.models.push_back(std::move(e));
    to_download.push_back(pull);
  }
  write_catalog(snapshot, o.out / "catalog.json");

  ProtocolOptions protocol = o.protocol;
  protocol.work_dir = o.out / "models";
  fs::create_directories(protocol.work_dir);
  SweepOptions child = o;
  child.protocol = protocol;
  AppendLog journal(journal_path);
  const size_t n = snapshot.models.size();
  const auto journal_row = [&](const LabRow& row, size_t i, const std::string& note) {
    journal.append(row_to_json(row).dump());
    done.insert(row.key());
    res.rows.push_back(row);
    ++res.ran;
    if (o.progress)
      o.progress(cat("[", i + 1, "/", n, "] ", row.model_id, "  ", row.status,
                     row.status == "pass" ? "" : " (" + row.stage + ": " + row.error_type + ")",
                     "  ", static_cast<int>(row.total_seconds * 1000), " ms", note));
  };
  for (size_t i = 0; i < n; ++i) {
    CatalogEntry e = snapshot.models[i];
    LabRow base = base_row(e, protocol);
    base.catalog_snapshot = catalog.snapshot;
    base.timeout_seconds = e.timeout_seconds > 0 ? e.timeout_seconds : o.timeout_seconds;
    if (!base.memory_limit_bytes) base.memory_limit_bytes = o.memory_limit_bytes;
    if (done.count(base.key())) continue;

    // A ranked model the cache lacks: sized from the listing, pulled when it fits, and what
    // the pull added removed after the run unless the downloads are kept.
    std::optional<CacheFootprint> footprint;
    if (to_download[i]) {
      const CacheFootprint before(*o.hf_hub, e.id);
      const Fetched f =
          fetch_ranked_model(e, base, *o.hf_hub, *o.download, base.memory_limit_bytes,
                             o.lathe_executable, o.out / "logs" / (safe_name(e.id) + ".pull.log"));
      if (f.row) {
        LabRow row = *f.row;
        row.timeout_seconds = base.timeout_seconds;
        journal_row(row, i, "");
        // What a failed pull left (a partial file) goes too, unless downloads are kept.
        if (!o.download->keep) before.remove_added();
        continue;
      }
      e.path = f.snapshot;
      ++res.downloaded;
      res.downloaded_bytes += f.downloaded_bytes;
      if (!o.download->keep) footprint = before;
    }

    const std::string name = cat(i, "-", safe_name(e.id));
    const fs::path entry_file = o.out / "run" / (name + ".entry.json");
    const fs::path result_file = o.out / "run" / (name + ".result.json");
    const fs::path progress_file = o.out / "run" / (name + ".progress");
    const fs::path log_file = o.out / "logs" / (safe_name(e.id) + ".log");
    Catalog one;
    one.models = {e};
    one.models[0].memory_limit_bytes = base.memory_limit_bytes;
    write_catalog(one, entry_file);
    fs::remove(result_file);
    fs::remove(progress_file);
    fs::remove(log_file);

    ProcessOptions p;
    p.argv = child_args(child, entry_file, result_file, progress_file);
    p.log_file = log_file;
    p.memory_limit_bytes = base.memory_limit_bytes + kProcessAllowanceBytes;
    p.timeout_seconds = base.timeout_seconds;
    base.started_at = utc_now();
    const ProcessResult pr = run_process(p);

    LabRow row;
    if (!pr.timed_out && pr.exit_code == 0 && fs::exists(result_file)) {
      row = row_from_json(read_json_file(result_file), result_file.string());
      row.catalog_snapshot = base.catalog_snapshot;
      row.timeout_seconds = base.timeout_seconds;
      row.exit_code = 0;
      if (row.peak_memory_bytes == 0) row.peak_memory_bytes = pr.peak_rss_bytes;
    } else {
      row = row_for_dead_process(base, last_line(progress_file), pr.timed_out, pr.signal,
                                 pr.exit_code, pr.peak_rss_bytes, pr.seconds);
      // In an AddressSanitizer build ASan enforces the memory limit (lab/subprocess.cpp): it
      // aborts the process when an allocation would pass it.
      if (kAddressSanitizer && pr.signal == SIGABRT &&
          file_tail(log_file, 1 << 16).find("SUMMARY: AddressSanitizer: out-of-memory") !=
              std::string::npos) {
        row.status = "oom";
        row.error_type = "out_of_memory";
        row.error_message = cat("out of memory in stage ", row.stage, " (limit ",
                                row.memory_limit_bytes >> 20, " MiB, enforced by ASan)");
      }
      row.finished_at = utc_now();
    }
    if (row.status != "pass") row.log_tail = file_tail(log_file, 4000);
    journal_row(row, i,
                !to_download[i] ? ""
                : footprint     ? "; downloaded, then removed"
                                : "; downloaded, kept");
    for (const auto& f : {entry_file, result_file, progress_file}) fs::remove(f);
    // Removed once its row is journaled: a sweep killed before this keeps the model, which
    // the next run then finds in the cache.
    if (footprint) {
      footprint->remove_added();
      ++res.removed;
    }
  }
  res.dataset_files = write_dataset(res.rows, o.out / "dataset");
  return res;
}

std::vector<LabRow> merge_sweeps(const std::vector<fs::path>& inputs, const fs::path& out) {
  std::vector<LabRow> all;
  for (const auto& in : inputs)
    for (auto& r : read_rows(in)) all.push_back(std::move(r));
  const std::vector<LabRow> rows = unique_rows(std::move(all));
  fs::create_directories(out);
  const FolderLock lock(out, "wait for it to finish, or merge into another folder");
  std::string journal;
  for (const auto& r : rows) journal += row_to_json(r).dump() + "\n";
  write_file_atomic(out / "rows.jsonl", journal);
  write_dataset(rows, out / "dataset");
  return rows;
}

}  // namespace lathe
