// docs/limits.md's byte limits on files, each checked at the limit the document gives, with
// sparse files so that no test writes or reads hundreds of megabytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "support/run.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using lathe::testing::ScratchDir;

// A file of `size` bytes beginning with `head`, the rest a hole.
void write_sparse(const fs::path& path, const std::string& head, uintmax_t size) {
  std::ofstream(path, std::ios::binary) << head;
  fs::resize_file(path, size);
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// "any JSON file: 512 MiB".
TEST(Limits, JsonFilesAbove512MiBAreRefusedBeforeReading) {
  ScratchDir dir("limits-json");
  constexpr uintmax_t kLimit = uintmax_t{512} << 20;
  write_sparse(dir / "config.json", "{}", kLimit + 1);
  const std::string e = error_of([&] { read_json_file(dir / "config.json"); });
  EXPECT_NE(e.find("config.json: JSON file of " + std::to_string(kLimit + 1) +
                   " bytes exceeds the limit of " + std::to_string(kLimit)),
            std::string::npos)
      << e;
  // Below the limit the file is read: padded with spaces, it parses.
  std::ofstream(dir / "small.json") << "{\"a\": 1}" << std::string(4096, ' ');
  EXPECT_EQ(read_json_file(dir / "small.json")["a"], 1);
}

// "safetensors header: 100 MB and within the file" (the safetensors format's own limit).
TEST(Limits, SafetensorsHeadersAbove100MBAreRefused) {
  ScratchDir dir("limits-st");
  auto header_of = [](uint64_t n) {
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(n >> (8 * i) & 0xff);
    return len;
  };
  constexpr uint64_t kLimit = 100'000'000;
  // The file holds the whole header: only the limit can refuse it.
  write_sparse(dir / "big.safetensors", header_of(kLimit + 1), kLimit + 64);
  std::string e = error_of([&] { SafetensorsFile::open(dir / "big.safetensors"); });
  EXPECT_NE(e.find("header length " + std::to_string(kLimit + 1) + " exceeds the limit of " +
                   std::to_string(kLimit) + " bytes"),
            std::string::npos)
      << e;
  // At the limit the header is read (a hole of zero bytes is not JSON).
  write_sparse(dir / "at.safetensors", header_of(kLimit), kLimit + 64);
  e = error_of([&] { SafetensorsFile::open(dir / "at.safetensors"); });
  EXPECT_EQ(e.find("exceeds the limit"), std::string::npos) << e;
  EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;
  // A length beyond the file is refused as such.
  write_sparse(dir / "short.safetensors", header_of(1000), 500);
  e = error_of([&] { SafetensorsFile::open(dir / "short.safetensors"); });
  EXPECT_NE(e.find("runs beyond the end of the file (500 bytes)"), std::string::npos) << e;
}

}  // namespace
}  // namespace lathe
