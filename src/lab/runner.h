// A sweep: the catalog's models, each through the protocol in its own process (`lathe lab
// run-one`) with a timeout and a memory limit. Each finished row is appended to the sweep's
// journal (OUT/rows.jsonl, fsync'd) before the next model starts, so a killed sweep resumes
// (--resume) without losing or repeating a row; the Parquet dataset is written from the
// journal at the end.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lab/catalog.h"
#include "lab/download.h"
#include "lab/protocol.h"
#include "lab/row.h"

namespace lathe {

// Address space a model's process gets beyond its memory limit, for its code, libraries,
// thread stacks and allocator arenas (a lathe process starts in about 200 MiB).
inline constexpr int64_t kProcessAllowanceBytes = int64_t{512} << 20;

struct SweepOptions {
  std::filesystem::path out;  // the sweep's folder
  bool resume = false;
  int shard_index = 0, shard_count = 1;  // run entries i with i % count == index
  int64_t memory_limit_bytes = 8LL << 30;
  double timeout_seconds = 600;
  ProtocolOptions protocol;                // work_dir and progress_file are set per sweep
  std::filesystem::path lathe_executable;  // the binary that runs `lab run-one`
  // Where entries without a path are looked up (the Hugging Face hub cache layout). Entries
  // found nowhere are not run (they stay untested) and are listed in SweepResult.
  std::optional<std::filesystem::path> hf_hub;
  // Set: ranked entries that hf_hub lacks are pulled into it when they fit the budget, run,
  // and removed after their run unless kept (lab/download.h); unset: they stay untested.
  std::optional<DownloadOptions> download;
  std::function<void(const std::string&)> progress;  // one line per finished model
};

struct SweepResult {
  std::vector<LabRow> rows;  // every row of the journal, resumed ones included
  int ran = 0, resumed = 0;
  std::vector<std::string> not_available;  // ids not found on this machine (untested)
  int downloaded = 0, removed = 0;         // models pulled by --download, and removed again
  int64_t downloaded_bytes = 0;
  std::vector<std::filesystem::path> dataset_files;
};

// Holds OUT's folder lock (OUT/.lock) from start to end. Throws lathe::Error when another
// process holds it, when OUT already holds a sweep and --resume is not given, or when the
// journal cannot be written. A key journaled twice is resumed and published once.
SweepResult run_sweep(const Catalog& catalog, const SweepOptions& opts);

// Turns how a model's process ended into its row when the process wrote none (killed by the
// timeout, a signal or the kernel's out-of-memory killer).
LabRow row_for_dead_process(LabRow base, const std::string& last_stage, bool timed_out,
                            std::optional<int> signal, std::optional<int> exit_code,
                            int64_t peak_rss_bytes, double seconds);

// The journal's rows (a cut-short last line is dropped). Throws naming the file and line.
std::vector<LabRow> read_journal(const std::filesystem::path& file, bool repair);

// Rows from a sweep folder (its journal, one row per key), a dataset folder or a Parquet file.
std::vector<LabRow> read_rows(const std::filesystem::path& path);

// Merges sweeps (e.g. the shards of a Slurm array) into OUT (holding its folder lock while it
// writes): one journal, one dataset.
// A key present twice keeps the row that finished last. Returns the merged rows.
std::vector<LabRow> merge_sweeps(const std::vector<std::filesystem::path>& inputs,
                                 const std::filesystem::path& out);

}  // namespace lathe
