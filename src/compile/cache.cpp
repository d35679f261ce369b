#include "compile/cache.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <tuple>

#include "compile/store.h"
#include "core/error.h"
#include "core/version.h"
#include "io/durable.h"
#include "io/hub_http.h"

namespace lathe::compile {

using namespace detail;

namespace {

constexpr size_t kMaxLogBytes = 16u << 20;
constexpr const char* kModulePrefix = "MODULE_";
constexpr const char* kVersionPrefix = "lathe-";
// A temporary folder this old is abandoned even if its pid runs (pids are reused).
constexpr auto kTempMaxAge = std::chrono::hours(1);

bool version_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' ||
         c == '-';
}

void check_hash(const std::string& hash, const char* what) {
  const bool ok =
      !hash.empty() && hash.size() <= 64 && std::all_of(hash.begin(), hash.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      });
  if (!ok) fail("module key: the ", what, " \"", hash, "\" is not 1..64 lowercase hex characters");
}

// The sum of the sizes of the plain files in `dir` (entries hold no subfolders).
uint64_t folder_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (e.is_regular_file(ec2)) total += e.file_size(ec2);
  }
  return total;
}

fs::file_time_type written_time(const fs::path& dir, CompileCache::State state) {
  std::error_code ec;
  const fs::path marker = state == CompileCache::State::Ready    ? dir / kDone
                          : state == CompileCache::State::Failed ? dir / kFailed
                                                                 : dir;
  auto t = fs::last_write_time(marker, ec);
  return ec ? fs::file_time_type{} : t;
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string compiler_version() {
  std::string v = std::string(kLatheVersion) + "-" + kLatheCommit;
  for (char& c : v)
    if (!version_char(c)) c = '_';
  return v;
}

fs::path default_cache_root() {
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char* dir = env("LATHE_CACHE_DIR")) return dir;
  if (const char* xdg = env("XDG_CACHE_HOME")) return fs::path(xdg) / "lathe" / "compile-cache";
  if (const char* home = env("HOME")) return fs::path(home) / ".cache" / "lathe" / "compile-cache";
  fail(
      "no compile cache folder: set LATHE_CACHE_DIR (or XDG_CACHE_HOME or HOME), or give "
      "--cache-dir");
}

void ModuleKey::validate() const {
  check_hash(graph_hash, "graph hash");
  check_hash(flags_hash, "flags hash");
}

std::string ModuleKey::dir_name() const {
  validate();
  return kModulePrefix + graph_hash + "+" + flags_hash;
}

ModuleKey ModuleKey::parse(const std::string& dir_name) {
  const size_t plus = dir_name.find('+');
  if (dir_name.rfind(kModulePrefix, 0) != 0 || plus == std::string::npos)
    fail("\"", dir_name, "\" is not a module key MODULE_<graph hash>+<flags hash>");
  const size_t start = std::strlen(kModulePrefix);
  ModuleKey key{dir_name.substr(start, plus - start), dir_name.substr(plus + 1)};
  try {
    key.validate();
  } catch (const Error& e) {
    fail("\"", dir_name, "\": ", e.what());
  }
  return key;
}

const char* state_name(CompileCache::State state) {
  switch (state) {
    case CompileCache::State::Missing:
      return "missing";
    case CompileCache::State::Ready:
      return "ready";
    case CompileCache::State::Failed:
      return "failed";
  }
  return "?";
}

CompileCache::CompileCache(fs::path root, std::string compiler_version)
    : root_(std::move(root)), version_(std::move(compiler_version)) {
  if (version_.empty() || !std::all_of(version_.begin(), version_.end(), version_char))
    fail("compile cache: the compiler version \"", version_,
         "\" is empty or holds characters outside A-Z a-z 0-9 . _ + -");
}

fs::path CompileCache::version_dir() const {
  return root_ / (kVersionPrefix + version_);
}

fs::path CompileCache::module_dir(const ModuleKey& key) const {
  return version_dir() / key.dir_name();
}

CompileCache::State CompileCache::state(const ModuleKey& key) const {
  return state_at(module_dir(key), key, version_);
}

Files CompileCache::read(const ModuleKey& key) const {
  const fs::path dir = module_dir(key);
  Manifest m;
  const State s = state_at(dir, key, version_, &m);
  if (s != State::Ready)
    fail(dir.string(), ": no usable module (", state_name(s),
         s == State::Missing ? ": no done marker or no valid manifest.json" : "", ")");
  Files files;
  for (const auto& f : m.files) {
    const fs::path path = dir / f.name;
    // Bounded by the size the manifest gives, which state_at() checked against the file.
    const auto bytes = read_small_file(path, static_cast<size_t>(f.size));
    if (!bytes) fail(path.string(), ": listed in manifest.json but missing");
    if (static_cast<int64_t>(bytes->size()) != f.size)
      fail(path.string(), ": ", bytes->size(), " bytes, manifest.json gives ", f.size,
           " (the module is corrupt)");
    hub::Digest digest(hub::Digest::Kind::Sha256, f.size);
    digest.update(bytes->data(), bytes->size());
    const std::string got = digest.hex();
    if (got != f.sha256)
      fail(path.string(), ": sha256 ", got, " differs from manifest.json's ", f.sha256,
           " (the module is corrupt; forget it and compile again)");
    files.emplace(f.name, std::move(*bytes));
  }
  return files;
}

std::string CompileCache::failure_log(const ModuleKey& key) const {
  const fs::path dir = module_dir(key);
  if (state(key) != State::Failed) fail(dir.string(), ": not a failed compile");
  const fs::path path = dir / kFailedLog;
  try {
    auto log = read_small_file(path, kMaxLogBytes);
    if (!log) fail(path.string(), ": missing");
    return *log;
  } catch (const Error&) {
    // Larger than the bound: its beginning says what went wrong first.
    std::ifstream in(path, std::ios::binary);
    std::string head(kMaxLogBytes, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (head.empty()) throw;
    return head + "\n[... cut at " + std::to_string(kMaxLogBytes >> 20) + " MiB]\n";
  }
}

bool CompileCache::publish(const ModuleKey& key, const Files& files) {
  const fs::path final = module_dir(key);
  for (const auto& [name, bytes] : files) check_file_name(name, "module file name");
  Staging staging(version_dir(), key);
  for (const auto& [name, bytes] : files) staging.add(name, bytes);
  staging.write_manifest(version_, key);
  staging.add_unlisted(kDone, "");
  return staging.install(final,
                         [&](const fs::path& dir) { return valid_module_at(dir, key, version_); });
}

void CompileCache::record_failure(const ModuleKey& key, const std::string& log,
                                  const Files& description) {
  const fs::path final = module_dir(key);
  for (const auto& [name, bytes] : description) check_file_name(name, "description file name");
  Staging staging(version_dir(), key);
  staging.add_unlisted(kFailedLog, log);
  for (const auto& [name, bytes] : description) staging.add_unlisted(name, bytes);
  staging.add_unlisted(kFailed, "");
  staging.install(final, [&](const fs::path& dir) {
    return state_at(dir, key, version_) == State::Ready;  // another process compiled it
  });
}

void CompileCache::forget(const ModuleKey& key) {
  remove_entry(version_dir(), module_dir(key), key);
}

std::vector<std::string> CompileCache::versions() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code ec2;
    if (name.rfind(kVersionPrefix, 0) == 0 && e.is_directory(ec2))
      out.push_back(name.substr(std::strlen(kVersionPrefix)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<CompileCache::Entry> CompileCache::entries(bool all_versions) const {
  std::vector<Entry> out;
  const std::vector<std::string> vs = all_versions ? versions() : std::vector{version_};
  for (const auto& v : vs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / (kVersionPrefix + v), ec)) {
      std::error_code ec2;
      if (!e.is_directory(ec2)) continue;
      Entry entry;
      try {
        entry.key = ModuleKey::parse(e.path().filename().string());
      } catch (const Error&) {
        continue;  // a temporary folder or a stranger
      }
      entry.compiler_version = v;
      entry.dir = e.path();
      entry.state = state_at(entry.dir, entry.key, v);
      entry.bytes = folder_bytes(entry.dir);
      entry.written = written_time(entry.dir, entry.state);
      out.push_back(std::move(entry));
    }
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.compiler_version, a.key.graph_hash, a.key.flags_hash) <
           std::tie(b.compiler_version, b.key.graph_hash, b.key.flags_hash);
  });
  return out;
}

std::vector<CompileCache::Removed> CompileCache::cleanup(const CleanupOptions& options) {
  std::vector<Removed> removed;
  const auto now = fs::file_time_type::clock::now();

  // Temporary folders of processes that are gone, in every version's folder.
  for (const auto& v : versions()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / (kVersionPrefix + v), ec)) {
      const auto pid = temp_name_pid(e.path().filename().string());
      if (!pid) continue;
      std::error_code ec2;
      const auto t = fs::last_write_time(e.path(), ec2);
      if (process_alive(*pid) && !ec2 && now - t < kTempMaxAge) continue;
      removed.push_back({e.path(), "temporary", folder_bytes(e.path())});
      if (!options.dry_run) fs::remove_all(e.path(), ec2);
    }
  }

  std::vector<Entry> all = entries(options.all_versions);
  std::stable_sort(all.begin(), all.end(),
                   [](const Entry& a, const Entry& b) { return a.written < b.written; });
  uint64_t total = 0;
  for (const auto& e : all) total += e.bytes;
  auto remove = [&](const Entry& e) {
    removed.push_back(
        {e.dir, e.state == State::Missing ? "damaged" : state_name(e.state), e.bytes});
    total -= e.bytes;
    if (!options.dry_run) remove_entry(e.dir.parent_path(), e.dir, e.key);
  };
  std::vector<Entry> kept;
  for (const auto& e : all) {
    if (options.older_than && now - e.written > *options.older_than)
      remove(e);
    else
      kept.push_back(e);
  }
  if (options.max_bytes)
    for (const auto& e : kept) {  // oldest first
      if (total <= *options.max_bytes) break;
      remove(e);
    }

  // Other versions' folders left empty go too (never this version's: it is in use).
  if (!options.dry_run && options.all_versions)
    for (const auto& v : versions()) {
      std::error_code ec;
      if (v != version_) fs::remove(root_ / (kVersionPrefix + v), ec);  // fails unless empty
    }
  return removed;
}

}  // namespace lathe::compile
