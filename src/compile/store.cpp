#include "compile/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/error.h"
#include "io/durable.h"
#include "io/hub_http.h"
#include "io/json.h"

namespace lathe::compile::detail {

namespace {

constexpr size_t kChunk = 1 << 20;  // bytes read or hashed at a time
constexpr int kInstallTries = 64;

bool is_lower_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads up to `n` bytes (fewer only at the end of the file).
size_t read_some(int fd, char* out, size_t n, const fs::path& path) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(path.string(), ": cannot read: ", std::strerror(errno));
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

std::string random_hex() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

}  // namespace

void check_file_name(const std::string& name, const std::string& what) {
  const bool chars_ok =
      !name.empty() && name.size() <= 128 && name[0] != '.' &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      });
  if (!chars_ok)
    fail(what, " \"", name,
         "\" is not a plain file name (1..128 of A-Z a-z 0-9 . _ -, not starting with '.')");
  if (name == kManifest || name == kDone || name == kFailed || name == kFailedLog)
    fail(what, " \"", name, "\" is one of the cache's own file names");
}

std::string manifest_json(const Manifest& m, const ModuleKey& key) {
  Json files = Json::object();
  for (const auto& f : m.files) files[f.name] = {{"size", f.size}, {"sha256", f.sha256}};
  const Json j = {{"format", kManifestFormat},
                  {"compiler_version", m.compiler_version},
                  {"key", key.dir_name()},
                  {"files", files}};
  return j.dump(2) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& origin, const ModuleKey& key) {
  const Json j = parse_json(text, origin);
  if (!j.is_object()) fail(origin, ": not a JSON object");
  const JsonFields top(j, origin);
  const Json& format = top.at("format");
  if (!format.is_number_integer() || format.get<int64_t>() != kManifestFormat)
    fail(origin, ": format is ", format.dump(), ", this lathe reads format ", kManifestFormat);
  Manifest m;
  m.compiler_version = top.get<std::string>("compiler_version");
  const std::string k = top.get<std::string>("key");
  if (k != key.dir_name()) fail(origin, ": key is \"", k, "\", expected \"", key.dir_name(), "\"");
  const Json& files = top.at("files");
  if (!files.is_object()) fail(origin, ": files must be an object of name -> {size, sha256}");
  if (files.size() > kMaxModuleFiles)
    fail(origin, ": files lists ", files.size(), " files, at most ", kMaxModuleFiles, " allowed");
  for (const auto& [name, value] : files.items()) {
    const std::string field = "files." + name;
    check_file_name(name, origin + ": " + field + ": the name");
    if (!value.is_object()) fail(origin, ": ", field, " must be an object {size, sha256}");
    const JsonFields f(value, origin + ": " + field);
    ManifestFile mf;
    mf.name = name;
    mf.size = f.get<int64_t>("size");
    if (mf.size < 0 || mf.size > kMaxModuleFileBytes)
      fail(origin, ": ", field, ".size is ", mf.size, ", outside 0..", kMaxModuleFileBytes);
    mf.sha256 = f.get<std::string>("sha256");
    if (mf.sha256.size() != 64 || !is_lower_hex(mf.sha256))
      fail(origin, ": ", field, ".sha256 is not 64 lowercase hex characters");
    m.files.push_back(std::move(mf));
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const ManifestFile& a, const ManifestFile& b) { return a.name < b.name; });
  return m;
}

std::optional<std::string> read_small_file(const fs::path& path, size_t max) {
  Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    fail(path.string(), ": cannot open: ", std::strerror(errno));
  }
  // One byte more than allowed tells a file that is too large from one that fits exactly.
  std::string text(max + 1, '\0');
  const size_t n = read_some(in.fd, text.data(), text.size(), path);
  if (n > max) fail(path.string(), ": larger than ", max, " bytes");
  text.resize(n);
  return text;
}

CompileCache::State state_at(const fs::path& dir, const ModuleKey& key, const std::string& version,
                             Manifest* manifest) {
  std::error_code ec;
  if (fs::exists(dir / kDone, ec)) {
    try {
      const auto text = read_small_file(dir / kManifest, kMaxManifestBytes);
      if (!text) return CompileCache::State::Missing;
      Manifest m = parse_manifest(*text, (dir / kManifest).string(), key);
      if (m.compiler_version != version) return CompileCache::State::Missing;
      for (const auto& f : m.files) {
        const auto size = fs::file_size(dir / f.name, ec);
        if (ec || static_cast<int64_t>(size) != f.size) return CompileCache::State::Missing;
      }
      if (manifest) *manifest = std::move(m);
      return CompileCache::State::Ready;
    } catch (const Error&) {
      return CompileCache::State::Missing;  // a damaged manifest: not a usable module
    }
  }
  if (fs::exists(dir / kFailed, ec)) return CompileCache::State::Failed;
  return CompileCache::State::Missing;
}

std::optional<std::string> verify_files(const fs::path& dir, const Manifest& manifest) {
  std::string buf(kChunk, '\0');
  for (const auto& f : manifest.files) {
    const fs::path path = dir / f.name;
    Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (in.fd < 0) return cat(path.string(), ": cannot open: ", std::strerror(errno));
    hub::Digest digest(hub::Digest::Kind::Sha256, f.size);
    int64_t total = 0;
    try {
      for (size_t n; (n = read_some(in.fd, buf.data(), buf.size(), path)) > 0;) {
        digest.update(buf.data(), n);
        total += static_cast<int64_t>(n);
        if (total > f.size) break;
      }
    } catch (const Error& e) {
      return e.what();
    }
    if (total != f.size)
      return cat(path.string(), ": ", total > f.size ? "longer" : "shorter",
                 " than the manifest's ", f.size, " bytes (the file is corrupt)");
    const std::string got = digest.hex();
    if (got != f.sha256)
      return cat(path.string(), ": sha256 ", got, " differs from the manifest's ", f.sha256,
                 " (the file is corrupt)");
  }
  return std::nullopt;
}

bool valid_module_at(const fs::path& dir, const ModuleKey& key, const std::string& version) {
  Manifest m;
  if (state_at(dir, key, version, &m) != CompileCache::State::Ready) return false;
  return !verify_files(dir, m);
}

std::string temp_name(const ModuleKey& key) {
  return cat(kTempPrefix, key.dir_name(), "-", ::getpid(), "-", random_hex());
}

std::optional<long> temp_name_pid(const std::string& name) {
  if (name.rfind(kTempPrefix, 0) != 0) return std::nullopt;
  // Keys hold no '-', so the last two '-' separate the pid and the random part.
  const size_t last = name.rfind('-');
  if (last == std::string::npos || last == 0) return std::nullopt;
  const size_t before = name.rfind('-', last - 1);
  if (before == std::string::npos || before < std::strlen(kTempPrefix)) return std::nullopt;
  const std::string pid = name.substr(before + 1, last - before - 1);
  if (pid.empty() || pid.size() > 10 ||
      !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stol(pid);
}

void remove_entry(const fs::path& version_dir, const fs::path& dir, const ModuleKey& key) {
  const fs::path aside = version_dir / temp_name(key);
  if (::rename(dir.c_str(), aside.c_str()) != 0) {
    if (errno == ENOENT) return;
    fail(dir.string(), ": cannot move it aside to remove it: ", std::strerror(errno));
  }
  std::error_code ec;
  fs::remove_all(aside, ec);
  if (ec) fail(aside.string(), ": cannot remove: ", ec.message());
}

// ---- Staging ---------------------------------------------------------------------------

Staging::Staging(const fs::path& version_dir, const ModuleKey& key)
    : version_dir_(version_dir), key_(key) {
  std::error_code ec;
  if (!fs::is_directory(version_dir, ec)) {
    fs::create_directories(version_dir, ec);
    if (ec) fail(version_dir.string(), ": cannot create the cache folder: ", ec.message());
    fsync_dir(version_dir.parent_path());
  }
  for (int i = 0;; ++i) {
    dir_ = version_dir / temp_name(key);
    if (::mkdir(dir_.c_str(), 0755) == 0) break;
    if (errno != EEXIST || i == 8)
      fail(dir_.string(), ": cannot create a temporary folder: ", std::strerror(errno));
  }
}

Staging::~Staging() {
  if (installed_) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);  // nothing better to do with a failure in a destructor
}

void Staging::add(const std::string& name, std::string_view bytes) {
  check_file_name(name, "module file name");
  write_file_atomic(dir_ / name, bytes);
  hub::Digest digest(hub::Digest::Kind::Sha256, static_cast<int64_t>(bytes.size()));
  digest.update(bytes.data(), bytes.size());
  files_.push_back({name, static_cast<int64_t>(bytes.size()), digest.hex()});
}

void Staging::add_streamed(const std::string& name,
                           const std::function<ManifestFile(int fd, const fs::path& path)>& write) {
  check_file_name(name, "module file name");
  const fs::path path = dir_ / name;
  Fd out{::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
  if (out.fd < 0) fail(path.string(), ": cannot create: ", std::strerror(errno));
  ManifestFile f = write(out.fd, path);
  f.name = name;
  if (::fsync(out.fd) != 0) fail(path.string(), ": cannot sync: ", std::strerror(errno));
  const int rc = ::close(out.fd);
  out.fd = -1;
  if (rc != 0) fail(path.string(), ": cannot write: ", std::strerror(errno));
  files_.push_back(std::move(f));
}

void Staging::add_unlisted(const std::string& name, std::string_view bytes) {
  write_file_atomic(dir_ / name, bytes);
}

void Staging::write_manifest(const std::string& version, const ModuleKey& key) {
  Manifest m;
  m.compiler_version = version;
  m.files = files_;
  std::sort(m.files.begin(), m.files.end(),
            [](const ManifestFile& a, const ManifestFile& b) { return a.name < b.name; });
  for (size_t i = 1; i < m.files.size(); ++i)
    if (m.files[i].name == m.files[i - 1].name)
      fail(dir_.string(), ": file ", m.files[i].name, " was added twice");
  write_file_atomic(dir_ / kManifest, manifest_json(m, key));
}

bool Staging::install(const fs::path& final,
                      const std::function<bool(const fs::path&)>& keep_existing) {
  fsync_dir(dir_);
  for (int i = 0; i < kInstallTries; ++i) {
    // rename(2) replaces only an empty folder; a full one makes it fail, so of two processes
    // publishing the same entry exactly one wins and neither sees a mix.
    if (::rename(dir_.c_str(), final.c_str()) == 0) {
      installed_ = true;
      fsync_dir(version_dir_);
      return true;
    }
    const int err = errno;
    if (err != ENOTEMPTY && err != EEXIST && err != ENOTDIR && err != EISDIR)
      fail(final.string(), ": cannot rename the finished entry into place: ", std::strerror(err));
    if (keep_existing(final)) return false;
    // Move what is there aside and look again: between the look above and this rename,
    // another process may have put an entry to keep there.
    const fs::path aside = version_dir_ / temp_name(key_);
    if (::rename(final.c_str(), aside.c_str()) != 0) {
      if (errno == ENOENT) continue;  // another process moved it first
      fail(final.string(), ": cannot move the old entry aside: ", std::strerror(errno));
    }
    if (keep_existing(aside) && ::rename(aside.c_str(), final.c_str()) == 0) return false;
    std::error_code ec;
    fs::remove_all(aside, ec);
    if (ec) fail(aside.string(), ": cannot remove the old entry: ", ec.message());
  }
  fail(final.string(), ": could not be put in place after ", kInstallTries,
       " tries: other processes keep replacing it");
}

}  // namespace lathe::compile::detail
