#include "lab/dataset.h"

// The version macro alone: Arrow itself is used only by the plug-in (lab/dataset_plugin.h).
#include <arrow/util/config.h>
#include <unistd.h>

#include <map>

#include "core/error.h"
#include "io/durable.h"
#include "lab/dataset_plugin.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

const DatasetPlugin& plugin() {
  return load_plugin<DatasetPlugin>(DatasetPlugin::kFile, "the Parquet plug-in");
}

}  // namespace

std::string arrow_version() {
  return ARROW_VERSION_STRING;
}

std::string dataset_file_name(const std::string& lathe_version,
                              const std::string& transformers_version) {
  return cat("lathe-", lathe_version.empty() ? "unknown" : lathe_version, "_transformers-",
             transformers_version.empty() ? "none" : transformers_version, ".parquet");
}

void write_parquet(const std::vector<LabRow>& rows, const fs::path& file) {
  const DatasetPlugin& m = plugin();
  const fs::path tmp = fs::path(file).concat(cat(".tmp", ::getpid()));
  try {
    if (std::string error = m.write(rows, tmp.string(), file.string()); !error.empty())
      throw Error(error);
    fsync_file(tmp);
  } catch (...) {
    fs::remove(tmp);
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp);
    fail(file.string(), ": cannot rename the finished file into place: ", ec.message());
  }
  fsync_dir(file.parent_path());
}

std::vector<fs::path> write_dataset(const std::vector<LabRow>& rows, const fs::path& dir) {
  std::map<std::string, std::vector<LabRow>> by_file;
  for (const auto& r : rows)
    by_file[dataset_file_name(r.lathe_version, r.transformers_version)].push_back(r);
  fs::create_directories(dir);
  std::vector<fs::path> files;
  for (const auto& [name, part] : by_file) {
    write_parquet(part, dir / name);
    files.push_back(dir / name);
  }
  return files;
}

std::vector<LabRow> read_parquet(const fs::path& file) {
  std::vector<LabRow> rows;
  if (std::string error = plugin().read(file.string(), rows); !error.empty()) throw Error(error);
  for (size_t i = 0; i < rows.size(); ++i)
    if (!is_status(rows[i].status))
      fail(file.string(), ": row ", i, " has unknown status \"", rows[i].status, "\"");
  return rows;
}

}  // namespace lathe
