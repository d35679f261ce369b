// Shared helpers for the libFuzzer targets: a private scratch folder per process, since the
// readers under test take paths (they map or stream files, as lathe does with real input).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace lathe::fuzz {

// A folder under $TMPDIR (or /tmp) unique to this process, created on first use.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path p =
        std::filesystem::temp_directory_path() / ("lathe-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return dir;
}

inline void write_bytes(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  write_bytes(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

// The repository root and the shared data folder beside it, compiled in.
inline std::filesystem::path source_dir() {
  return LATHE_SOURCE_DIR;
}
inline std::filesystem::path shared_dir() {
  return LATHE_SHARED_DIR;
}

}  // namespace lathe::fuzz
