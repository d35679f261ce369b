// `lathe lab run --download` (docs/lab.md): a ranked model the Hugging Face cache lacks is
// sized from the Hub's listing before anything is downloaded; one that fits the budget is
// pulled by `lathe pull` in a process of its own, run, and removed after its run unless the
// downloads are kept. One that does not fit, or whose download fails, is a row saying why.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lab/catalog.h"
#include "lab/row.h"

namespace lathe {

// The default of --max-download-gb: 16 GB, the weights of an 8B model in bf16.
inline constexpr double kDefaultMaxDownloadGb = 16;

struct DownloadOptions {
  std::string endpoint;  // the Hub or a mirror, without a trailing '/'
  int64_t max_bytes = static_cast<int64_t>(kDefaultMaxDownloadGb * 1e9);  // per model
  bool keep = false;              // keep what was downloaded (default: removed after the run)
  double timeout_seconds = 3600;  // per `lathe pull`
};

// What the Hugging Face cache held of one repository (models--ORG--NAME and its lock folder):
// every path in it, so that what a pull adds can be removed again and nothing else.
class CacheFootprint {
 public:
  CacheFootprint(const std::filesystem::path& cache, const std::string& id);
  // Removes every file, link and folder of the repository that was not there when the
  // footprint was taken; returns the bytes of the files removed (links count nothing).
  int64_t remove_added() const;

 private:
  std::vector<std::filesystem::path> roots_;
  std::vector<std::pair<std::filesystem::path, bool>> before_;  // sorted; bool: it existed
};

// The outcome of making one ranked entry available: where its snapshot is, or the row that
// stands for it when it is not run.
struct Fetched {
  std::optional<LabRow> row;       // over a budget, not implemented, or the download failed
  std::filesystem::path snapshot;  // else the pulled snapshot
  int64_t downloaded_bytes = 0;    // what the pull lacked in the cache (the listing's sizes)
};

// Sizes `e` from the listing and pulls it into `hf_hub` when it fits: its catalog
// architecture must be one lathe implements (else `unsupported`, stage inspect), its
// weights must fit `memory_limit_bytes`, what the cache lacks of it must fit
// `opts.max_bytes` and the cache's free space (else `untested`, stage fetch); a listing or
// pull that fails is `error` (download_error) with lathe pull's message, and its log tail.
// `base` is the entry's base row; `lathe` the binary that runs `lathe pull`, whose output
// goes to `log_file`.
Fetched fetch_ranked_model(const CatalogEntry& e, LabRow base, const std::filesystem::path& hf_hub,
                           const DownloadOptions& opts, int64_t memory_limit_bytes,
                           const std::filesystem::path& lathe,
                           const std::filesystem::path& log_file);

}  // namespace lathe
