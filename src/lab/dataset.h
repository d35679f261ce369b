// The lab's dataset: rows as Parquet files, one per (lathe version, transformers version),
// written with Apache Arrow C++ (docs/dataset.md documents the columns; docs/dependencies.md
// says where Arrow comes from).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "lab/row.h"

namespace lathe {

// The Parquet file name of a version pair: "lathe-0.1.0_transformers-5.24.0.parquet"
// ("transformers-none" for rows that had no reference).
std::string dataset_file_name(const std::string& lathe_version,
                              const std::string& transformers_version);

// Writes `rows` to `file` atomically (temporary file, fsync, rename). Throws lathe::Error
// naming the file when Arrow or the disk fails; an existing file is then left as it was.
void write_parquet(const std::vector<LabRow>& rows, const std::filesystem::path& file);

// Splits rows by version pair and writes one file per pair into `dir`. Returns the files.
std::vector<std::filesystem::path> write_dataset(const std::vector<LabRow>& rows,
                                                 const std::filesystem::path& dir);

// Reads a Parquet file written by write_parquet (columns it does not know are ignored;
// missing ones read as empty). Throws lathe::Error naming the file and column.
std::vector<LabRow> read_parquet(const std::filesystem::path& file);

// The Arrow C++ version lathe is built with.
std::string arrow_version();

}  // namespace lathe
