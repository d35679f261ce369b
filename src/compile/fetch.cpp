// CompileCache::fetch() and sync_to(): modules copied between caches, from a folder or over
// HTTP(S), each file checked against its manifest before the module is published.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "compile/cache.h"
#include "compile/store.h"
#include "core/error.h"
#include "io/hub_http.h"

namespace lathe::compile {

using namespace detail;

namespace {

constexpr size_t kMaxMarkerBytes = 64u << 10;  // `done`, `failed` (empty), or an error page
constexpr size_t kMaxRemoteLogBytes = 64u << 10;
constexpr int kDownloadTries = 3;
// Each file of a module must arrive within this many seconds plus one second per
// kFetchMinBytesPerSecond of its size, all tries together: libcurl's own stall check (less than
// 1 byte/s for 60 s) lets a server trickling a byte a second hold a fetch for ever.
constexpr int64_t kFetchGraceSeconds = 10;
constexpr int64_t kFetchMinBytesPerSecond = 16 << 10;

// Sets `cancel` when `deadline` passes, unless it is destroyed first.
class Deadline {
 public:
  Deadline(std::chrono::steady_clock::time_point deadline, std::atomic<bool>& cancel)
      : thread_([this, deadline, &cancel] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_until(lock, deadline, [this] { return done_; })) cancel = true;
        }) {}
  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

// Where modules are fetched from. Paths are relative to the cache root
// ("lathe-V/MODULE_.../manifest.json").
class Source {
 public:
  virtual ~Source() = default;
  // The file's full path or URL, for messages.
  virtual std::string where(const std::string& rel) const = 0;
  // A small file's contents, nullopt when the source has no such file. Throws lathe::Error
  // naming it when it is larger than `max` or cannot be read.
  virtual std::optional<std::string> small(const std::string& rel, size_t max) = 0;
  // Writes the file to `fd` (hashing what it writes into `digest`), never more than
  // `size` + 1 bytes, and returns how many it wrote. Throws lathe::Error naming it when the
  // transfer fails.
  virtual int64_t copy(const std::string& rel, int64_t size, int fd, hub::Digest& digest) = 0;
};

class FolderSource : public Source {
 public:
  explicit FolderSource(fs::path root) : root_(std::move(root)) {}

  std::string where(const std::string& rel) const override { return (root_ / rel).string(); }

  std::optional<std::string> small(const std::string& rel, size_t max) override {
    return read_small_file(root_ / rel, max);
  }

  int64_t copy(const std::string& rel, int64_t size, int fd, hub::Digest& digest) override {
    const fs::path path = root_ / rel;
    const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) fail(path.string(), ": cannot open: ", std::strerror(errno));
    std::string buf(std::min<int64_t>(size + 1, 1 << 20), '\0');
    int64_t total = 0;
    std::string error;
    // One byte past `size` is enough to know the file is longer than the manifest says.
    while (total <= size && error.empty()) {
      const size_t want = static_cast<size_t>(std::min<int64_t>(buf.size(), size + 1 - total));
      const ssize_t n = ::read(in, buf.data(), want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = cat("cannot read: ", std::strerror(errno));
      if (n <= 0) break;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(fd, buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          error = cat("cannot write the copy: ", std::strerror(w < 0 ? errno : ENOSPC));
          break;
        }
        done += w;
      }
      digest.update(buf.data(), static_cast<size_t>(n));
      total += n;
    }
    ::close(in);
    if (!error.empty()) fail(path.string(), ": ", error);
    return total;
  }

 private:
  fs::path root_;
};

class HttpSource : public Source {
 public:
  explicit HttpSource(std::string base) : base_(std::move(base)), http_(std::nullopt) {
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
  }

  // '+' of the key is percent-encoded: some servers read a literal '+' in a path as a space.
  std::string where(const std::string& rel) const override {
    return base_ + "/" + hub::url_encode(rel, true);
  }

  std::optional<std::string> small(const std::string& rel, size_t max) override {
    const std::string url = where(rel);
    std::string body;
    const hub::HttpStatus st = http_.get(url, body, max);
    // Checked first: a 404 page larger than `max` still means "not there".
    if (st.code == 404 || st.code == 410) return std::nullopt;
    // HttpClient words a body over `max` in MiB, which says "0 MiB" for a marker's bound.
    if (st.transport_error.rfind("the answer is larger than", 0) == 0)
      fail(url, ": larger than the ", max, " bytes read at most");
    if (!st.transport_error.empty()) fail(url, ": ", st.transport_error);
    if (!st.ok()) fail(url, ": HTTP ", st.code);
    return body;
  }

  int64_t copy(const std::string& rel, int64_t size, int fd, hub::Digest& digest) override {
    const std::string url = where(rel);
    std::atomic<bool> cancel{false};
    const int64_t seconds = kFetchGraceSeconds + size / kFetchMinBytesPerSecond;
    const Deadline deadline(std::chrono::steady_clock::now() + std::chrono::seconds(seconds),
                            cancel);
    int64_t offset = 0;
    for (int attempt = 1;; ++attempt) {
      // HttpClient::download stops a body longer than `size`, and resumes a cut one with a
      // Range request from what the file holds.
      const hub::HttpStatus st = http_.download(
          url, fd, offset, size, digest, [](int64_t) {}, cancel);
      const off_t end = ::lseek(fd, 0, SEEK_END);
      if (end < 0) fail(url, ": cannot find the size of the download: ", std::strerror(errno));
      offset = end;
      if (st.ok()) return offset;
      if (cancel)
        fail(url, ": not fetched within ", seconds, " s (", offset, " of ", size,
             " bytes arrived; a file may take ", kFetchGraceSeconds, " s plus 1 s per ",
             kFetchMinBytesPerSecond >> 10, " KiB); nothing was kept");
      if (st.cut_short && attempt < kDownloadTries) continue;
      if (st.cut_short)
        fail(url, ": cut short at ", offset, " of ", size, " bytes (", kDownloadTries,
             " tries): ", st.transport_error);
      if (!st.transport_error.empty()) fail(url, ": ", st.transport_error);
      fail(url, ": HTTP ", st.code,
           st.code == 404 ? " (manifest.json lists the file, the server does not have it)" : "");
    }
  }

 private:
  std::string base_;
  hub::HttpClient http_;
};

std::unique_ptr<Source> make_source(const std::string& from) {
  if (from.rfind("http://", 0) == 0 || from.rfind("https://", 0) == 0)
    return std::make_unique<HttpSource>(from);
  if (from.find("://") != std::string::npos)
    fail(from, ": fetching needs an http:// or https:// URL or a folder");
  std::error_code ec;
  if (!fs::is_directory(from, ec)) fail(from, ": not a folder (nor an http:// or https:// URL)");
  return std::make_unique<FolderSource>(from);
}

// The first line of `text`, at most 200 characters.
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}

CompileCache::FetchResult fetch_one(CompileCache& cache, const ModuleKey& key, Source& src) {
  CompileCache::FetchResult r;
  r.key = key;
  try {
    const fs::path final = cache.module_dir(key);  // validates the key
    if (valid_module_at(final, key, cache.version())) {
      r.outcome = FetchOutcome::AlreadyPresent;
      r.message = cat("already in ", final.string());
      return r;
    }
    const std::string rel = "lathe-" + cache.version() + "/" + key.dir_name() + "/";
    const auto manifest_text = src.small(rel + kManifest, kMaxManifestBytes);
    if (!manifest_text) {
      if (src.small(rel + kFailed, kMaxMarkerBytes)) {
        r.outcome = FetchOutcome::RemoteFailed;
        r.message = cat(src.where(rel), ": failed to compile there");
        try {
          if (const auto log = src.small(rel + kFailedLog, kMaxRemoteLogBytes))
            r.message += ": " + first_line(*log);
        } catch (const Error&) {
          // The log is only the message's detail; a large or unreadable one is left out.
        }
        return r;
      }
      r.outcome = FetchOutcome::Missing;
      r.message = cat(src.where(rel + kManifest), ": not there");
      return r;
    }
    const Manifest m = parse_manifest(*manifest_text, src.where(rel + kManifest), key);
    if (m.compiler_version != cache.version())
      fail("module ", key.dir_name(), " at ", src.where(rel), " was compiled by lathe-",
           m.compiler_version, ", this is lathe-", cache.version(), "; it cannot be used");
    if (!src.small(rel + kDone, kMaxMarkerBytes))
      fail(src.where(rel + kDone), ": missing, so the module there is incomplete");

    Staging staging(cache.version_dir(), key);
    int64_t bytes = 0;
    for (const auto& f : m.files) {
      staging.add_streamed(f.name, [&](int fd, const fs::path&) {
        hub::Digest digest(hub::Digest::Kind::Sha256, f.size);
        const int64_t got = src.copy(rel + f.name, f.size, fd, digest);
        if (got != f.size)
          fail(src.where(rel + f.name), ": ", got > f.size ? "more than" : "only", " ",
               got > f.size ? f.size : got, " bytes, manifest.json gives ", f.size,
               "; nothing was kept");
        const std::string sha = digest.hex();
        if (sha != f.sha256)
          fail(src.where(rel + f.name), ": sha256 ", sha, " differs from manifest.json's ",
               f.sha256, " (damaged in transit or at the source); nothing was kept");
        return ManifestFile{f.name, f.size, sha};
      });
      bytes += f.size;
    }
    staging.write_manifest(cache.version(), key);
    staging.add_unlisted(kDone, "");
    const std::string version = cache.version();
    const bool installed = staging.install(
        final, [&](const fs::path& dir) { return valid_module_at(dir, key, version); });
    r.outcome = installed ? FetchOutcome::Fetched : FetchOutcome::AlreadyPresent;
    r.message = installed ? cat(m.files.size(), " files, ", bytes, " bytes from ", src.where(rel))
                          : cat("already in ", final.string(), " (another process put it there)");
  } catch (const std::exception& e) {  // lathe::Error, or a filesystem error of this machine
    r.outcome = FetchOutcome::Error;
    r.message = e.what();
  }
  return r;
}

}  // namespace

const char* fetch_outcome_name(FetchOutcome outcome) {
  switch (outcome) {
    case FetchOutcome::Fetched:
      return "fetched";
    case FetchOutcome::AlreadyPresent:
      return "already present";
    case FetchOutcome::Missing:
      return "missing";
    case FetchOutcome::RemoteFailed:
      return "failed there";
    case FetchOutcome::Error:
      return "error";
  }
  return "?";
}

std::vector<CompileCache::FetchResult> CompileCache::fetch(const std::vector<ModuleKey>& keys,
                                                           const std::string& from) {
  std::vector<FetchResult> results;
  std::unique_ptr<Source> src;
  try {
    src = make_source(from);
  } catch (const Error& e) {
    for (const auto& k : keys) results.push_back({k, FetchOutcome::Error, e.what()});
    return results;
  }
  for (const auto& k : keys) results.push_back(fetch_one(*this, k, *src));
  return results;
}

CompileCache::SyncResult CompileCache::sync_to(const fs::path& dest) const {
  SyncResult r;
  CompileCache to(dest, version_);
  FolderSource src(root_);
  for (const auto& e : entries()) {
    if (e.state != State::Ready) continue;
    const FetchResult f = fetch_one(to, e.key, src);
    if (f.outcome == FetchOutcome::Fetched)
      ++r.copied;
    else if (f.outcome == FetchOutcome::AlreadyPresent)
      ++r.already_there;
    else
      r.errors.push_back(e.key.dir_name() + ": " + f.message);
  }
  return r;
}

}  // namespace lathe::compile
