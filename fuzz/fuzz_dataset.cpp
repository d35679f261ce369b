// The lab's dataset from hostile bytes. The first byte picks the input:
// even: the rest is a Parquet file, read with lathe::read_parquet;
// odd: the rest is journal JSON lines, each read with row_from_json as the sweep resumes; the
// rows that read are then written to Parquet and read back, as `lab merge` publishes them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/json.h"
#include "lab/dataset.h"
#include "lab/row.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    const auto file = lathe::fuzz::scratch_dir() / "rows.parquet";
    lathe::fuzz::write_bytes(file, data + 1, size - 1);
    try {
      for (const auto& row : lathe::read_parquet(file)) (void)lathe::row_to_json(row);
    } catch (const lathe::Error&) {
    }
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<lathe::LabRow> rows;
  size_t start = 0;
  int line = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string one(text.substr(start, end - start));
    ++line;
    try {
      const lathe::Json j = lathe::parse_json(one, "journal line " + std::to_string(line));
      lathe::LabRow row = lathe::row_from_json(j, "journal line " + std::to_string(line));
      (void)lathe::row_to_json(row).dump();
      (void)row.key();
      rows.push_back(std::move(row));
    } catch (const lathe::Error&) {
    }
    start = end + 1;
  }
  if (!rows.empty()) {
    const auto file = lathe::fuzz::scratch_dir() / "journal.parquet";
    try {
      lathe::write_parquet(rows, file);
      (void)lathe::read_parquet(file);
    } catch (const lathe::Error&) {
    }
  }
  return 0;
}
