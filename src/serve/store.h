// The explorer's view of the lab's results: every Parquet file below a data folder and the
// catalog rankings, loaded into an immutable snapshot. The store rescans when the files change
// (their names, sizes or modification times), looking at most once a second, so a sweep that
// publishes new files shows up without a restart; only the files that changed are read again.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "lab/catalog.h"
#include "lab/row.h"

namespace lathe {

// The views of the page whose order comes from a ranking file.
inline constexpr const char* kRankedViews[] = {"selected", "trending", "downloads"};

struct Snapshot {
  std::vector<LabRow> rows;
  std::vector<std::string> lower_ids;  // rows[i].model_id in lower case, for search
  std::vector<std::string> keys;       // rows[i].key()
  // Rankings per (task, view): from the catalog folder (<task>-<view>.json), else from the
  // catalog.json of a sweep folder below the data folder.
  std::map<std::pair<std::string, std::string>, Catalog> rankings;
  std::vector<std::string> files;   // the Parquet and catalog files read
  std::vector<std::string> errors;  // files that could not be read, with the reason
  std::string loaded_at;            // UTC, when this snapshot was read
  uint64_t generation = 0;          // counts reloads
  size_t files_read = 0;            // files read for this snapshot; the rest were unchanged

  // Answers computed from this snapshot (api.cpp), kept until the snapshot is replaced: a
  // snapshot never changes, so a selection or summary asked for again is not recomputed.
  mutable std::mutex cache_mutex;
  mutable std::map<std::string, std::shared_ptr<const std::vector<const LabRow*>>> selections;
  mutable std::map<std::string, std::shared_ptr<const Json>> answers;
};

// Fills lower_ids and keys from rows.
void index_rows(Snapshot& snap);

// The transformers version as the API names it: "none" for rows without a reference.
std::string transformers_label(const LabRow& row);

// Orders version strings numerically part by part ("0.10.0" after "0.9.1").
bool version_less(const std::string& a, const std::string& b);

class DataStore {
 public:
  // `data`: searched recursively for *.parquet and catalog.json; `catalog`: the ranking files
  // (<task>-<view>.json), which may be absent.
  DataStore(std::filesystem::path data, std::filesystem::path catalog);

  // The current snapshot, rescanning first when the last look is a second old or more.
  std::shared_ptr<const Snapshot> get();
  // Rescans now; returns true when the files had changed and were reloaded.
  bool refresh();

 private:
  using Signature = std::vector<std::tuple<std::string, uintmax_t, int64_t>>;
  // What one file held when it was read: its rows, or its ranking, or why it could not be read.
  struct FileContents {
    uintmax_t size = 0;
    int64_t mtime = 0;
    std::shared_ptr<const std::vector<LabRow>> rows;
    std::shared_ptr<const Catalog> catalog;
    std::string error;
  };
  Signature scan() const;
  // Builds the snapshot of the files in `sig`, reading those not in files_ as they are now.
  std::shared_ptr<const Snapshot> load(const Signature& sig, uint64_t generation);

  std::filesystem::path data_, catalog_;
  std::mutex refresh_mutex_;                   // one rescan at a time; guards files_
  std::map<std::string, FileContents> files_;  // by path, as of the last load
  std::mutex snap_mutex_;                      // guards snap_, sig_ and last_check_
  std::shared_ptr<const Snapshot> snap_;
  Signature sig_;
  std::chrono::steady_clock::time_point last_check_{};
};

}  // namespace lathe
