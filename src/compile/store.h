// The pieces of the compile cache shared by cache.cpp (the local store) and fetch.cpp (sync
// and fetch): the manifest, the checks of an entry on disk, and the temporary folder a module
// is written in before it is renamed into place. Internal to lathe_compile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compile/cache.h"

namespace lathe::compile::detail {

namespace fs = std::filesystem;

inline constexpr int kManifestFormat = 1;
inline constexpr const char* kManifest = "manifest.json";
inline constexpr const char* kDone = "done";
inline constexpr const char* kFailed = "failed";
inline constexpr const char* kFailedLog = "failed.log";
inline constexpr const char* kTempPrefix = ".tmp-";

struct ManifestFile {
  std::string name;
  int64_t size = 0;
  std::string sha256;  // 64 lowercase hex characters
};

struct Manifest {
  std::string compiler_version;
  std::vector<ManifestFile> files;  // sorted by name
};

// Throws lathe::Error (naming `what`, e.g. "module file name") when `name` is not a plain
// file name a module may hold.
void check_file_name(const std::string& name, const std::string& what);

// The manifest's JSON text.
std::string manifest_json(const Manifest& m, const ModuleKey& key);
// Parses and checks a manifest: format, fields, its key equal to `key`, names, sizes and
// hashes within the bounds of cache.h. `origin` (a path or URL) starts every error message.
// The compiler version is returned, not compared: callers word that error themselves.
Manifest parse_manifest(const std::string& text, const std::string& origin, const ModuleKey& key);

// The contents of a small local file, at most `max` bytes (a larger one is an Error naming
// it); nullopt when it does not exist.
std::optional<std::string> read_small_file(const fs::path& path, size_t max);

// The state of the entry in `dir` for `key` and `version` (see CompileCache::state()); the
// manifest is stored in `manifest` when Ready.
CompileCache::State state_at(const fs::path& dir, const ModuleKey& key, const std::string& version,
                             Manifest* manifest = nullptr);
// Why the Ready module in `dir` does not match `manifest` (a file's size or sha256), naming the
// file; nullopt when every file matches.
std::optional<std::string> verify_files(const fs::path& dir, const Manifest& manifest);
// A Ready module in `dir` whose files all match its manifest.
bool valid_module_at(const fs::path& dir, const ModuleKey& key, const std::string& version);

// ".tmp-MODULE_<key>-<pid>-<random>": a fresh temporary name in a version folder.
std::string temp_name(const ModuleKey& key);
// The pid in a temporary name, or nullopt when `name` is not one.
std::optional<long> temp_name_pid(const std::string& name);

// Renames `dir` to a temporary name in `version_dir`, then removes it, so that readers see the
// entry whole or not at all. Nothing when it does not exist.
void remove_entry(const fs::path& version_dir, const fs::path& dir, const ModuleKey& key);

// An entry being written: a temporary folder in the version folder that becomes the entry
// when install() renames it into place, and is removed otherwise (on any exception).
class Staging {
 public:
  Staging(const fs::path& version_dir, const ModuleKey& key);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  const fs::path& dir() const { return dir_; }

  // A whole file, fsync'd, listed in the manifest to come.
  void add(const std::string& name, std::string_view bytes);
  // A file written by `write` (given a file descriptor open for writing, returning the size and
  // sha256 it wrote, throwing lathe::Error on a failure); fsync'd, then listed.
  void add_streamed(const std::string& name,
                    const std::function<ManifestFile(int fd, const fs::path& path)>& write);
  // A file that is not listed in a manifest (a failure's log and description, the markers).
  void add_unlisted(const std::string& name, std::string_view bytes);
  // manifest.json from the files added so far.
  void write_manifest(const std::string& version, const ModuleKey& key);

  // Renames the folder to `final`. When something is there already: keeps it and returns false
  // if `keep_existing(path)` says so; otherwise moves it aside, removes it and tries again.
  bool install(const fs::path& final, const std::function<bool(const fs::path&)>& keep_existing);

 private:
  fs::path version_dir_, dir_;
  ModuleKey key_;
  std::vector<ManifestFile> files_;
  bool installed_ = false;
};

}  // namespace lathe::compile::detail
