// The table of liblathe_dataset.so, the plug-in that holds every use of Apache Arrow
// (src/lab/dataset_arrow.cpp), loaded by src/lab/dataset.cpp the first time a Parquet file is
// read or written: the rest of lathe neither links nor maps Arrow (core/plugin.h).
#pragma once

#include <string>
#include <vector>

#include "core/plugin.h"
#include "lab/row.h"

namespace lathe {

struct DatasetPlugin {
  static constexpr int kAbi = 1;  // bump when the table or LabRow changes shape
  static constexpr const char* kFile = "liblathe_dataset.so";
  PluginStamp stamp;
  // Each returns "" when it worked, else the error, which names `file` (and the column).
  // Writes `rows` as one Parquet table to `path` (errors name `file`, the path the caller
  // renames it to).
  std::string (*write)(const std::vector<LabRow>& rows, const std::string& path,
                       const std::string& file);
  // Reads the Parquet file `file` into `rows`.
  std::string (*read)(const std::string& file, std::vector<LabRow>& rows);
  // The column names, in file order.
  std::vector<std::string> (*columns)();
};

}  // namespace lathe
