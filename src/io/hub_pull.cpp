#include "io/hub_pull.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "io/durable.h"
#include "io/hub_http.h"
#include "io/hub_progress.h"
#include "io/json.h"

namespace lathe::hub {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxListingBytes = 32u << 20;        // the model listing, with every file's entry
constexpr std::uintmax_t kMaxIndexBytes = 64u << 20;  // model.safetensors.index.json
constexpr int kAttempts = 5;  // tries of one file when the connection is cut

struct RemoteFile {
  std::string name;  // the path inside the repository
  int64_t size = 0;
  std::string blob;  // the LFS sha256, else the git blob id
  bool lfs = false;
};

struct Listing {
  std::string commit;
  std::map<std::string, RemoteFile> files;
};

// The request's context, for the messages.
struct Target {
  const ModelRef& ref;
  const PullOptions& options;
  std::string page() const { return options.endpoint + "/" + ref.id; }
};

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  return true;
}

// One line on what a failed answer means and what to do about it.
[[noreturn]] void fail_status(const HttpStatus& st, const std::string& url, const Target& t) {
  const std::string& id = t.ref.id;
  const bool token = t.options.token.has_value();
  if (!st.transport_error.empty() && (st.code < 400))
    fail(url, ": ", st.transport_error,
         "; check the network and HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use only the cache");
  if (st.code == 401) {
    if (token)
      fail(url,
           ": HTTP 401: the token was refused; check --token or HF_TOKEN (a read token "
           "from the Hub's settings page, of an account that accepted ",
           id, "'s licence)");
    fail(url, ": HTTP 401: ", id, " needs a token (it is gated or private): accept its licence on ",
         t.page(), ", then pass a read token with --token or HF_TOKEN");
  }
  if (st.code == 403)
    fail(url, ": HTTP 403: access to ", id, " is refused (a gated model): accept its licence on ",
         t.page(),
         token ? " with the account of this token"
               : " and pass that account's token "
                 "with --token or HF_TOKEN",
         ", then run the command again");
  if (st.code == 404) {
    if (st.error_code == "RevisionNotFound")
      fail(url, ": HTTP 404: ", id, " has no revision \"", t.ref.revision,
           "\" (check the branch, tag or commit)");
    if (st.error_code == "RepoNotFound")
      fail(url, ": HTTP 404: model ", id,
           " does not exist (check the id; a private model answers 404 without a token)");
    if (st.error_code == "EntryNotFound")
      fail(url, ": HTTP 404: the file listed for ", id, " is not there; run the command again");
    fail(url, ": HTTP 404: model ", id, " or its revision \"", t.ref.revision,
         "\" does not exist (check the id; a private model answers 404 without a token)");
  }
  if (st.code == 429)
    fail(url, ": HTTP 429: too many requests; wait a minute and run the command again");
  if (st.code >= 500)
    fail(url, ": HTTP ", st.code,
         ": the server failed; run the command again later (finished files are kept and a "
         "partial one resumes)");
  fail(url, ": HTTP ", st.code, ": unexpected answer", st.transport_error.empty() ? "" : ": ",
       st.transport_error);
}

Listing fetch_listing(HttpClient& http, const Target& t) {
  const std::string url = t.options.endpoint + "/api/models/" + t.ref.id + "/revision/" +
                          url_encode(t.ref.revision, false) + "?blobs=true";
  std::string body;
  const HttpStatus st = http.get(url, body, kMaxListingBytes);
  if (!st.ok()) fail_status(st, url, t);
  const Json j = parse_json(body, url);
  if (!j.is_object()) fail(url, ": the model listing must be a JSON object");
  Listing l;
  if (!j.contains("sha") || !j["sha"].is_string() || !is_hex(j["sha"].get<std::string>(), 40))
    fail(url, ": field \"sha\" must be the revision's 40-digit commit hash");
  l.commit = j["sha"].get<std::string>();
  if (!j.contains("siblings") || !j["siblings"].is_array())
    fail(url, ": field \"siblings\" must list the repository's files");
  for (size_t i = 0; i < j["siblings"].size(); ++i) {
    const Json& s = j["siblings"][i];
    const std::string where = cat(url, ": siblings[", i, "]");
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string())
      fail(where, ": each file needs a string \"rfilename\"");
    RemoteFile f;
    f.name = s["rfilename"].get<std::string>();
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const Json& lfs = s["lfs"];
      f.lfs = true;
      if (!lfs.contains("sha256") || !lfs["sha256"].is_string() ||
          !is_hex(lfs["sha256"].get<std::string>(), 64))
        fail(where, " (", f.name, "): field \"lfs.sha256\" must be a sha256 in hex");
      f.blob = lfs["sha256"].get<std::string>();
      if (!lfs.contains("size") || !lfs["size"].is_number_unsigned())
        fail(where, " (", f.name, "): field \"lfs.size\" must be a byte count");
      f.size = lfs["size"].get<int64_t>();
    } else {
      if (s.contains("blobId") && s["blobId"].is_string() &&
          is_hex(s["blobId"].get<std::string>(), 40))
        f.blob = s["blobId"].get<std::string>();
      if (s.contains("size") && s["size"].is_number_unsigned())
        f.size = s["size"].get<int64_t>();
      else
        f.size = -1;
    }
    if (f.size < 0 || f.size > (int64_t{1} << 46)) f.size = -1;
    l.files[f.name] = std::move(f);
  }
  return l;
}

// A file lathe reads, checked to be described well enough to fetch and verify.
const RemoteFile& need(const Listing& l, const std::string& name, const std::string& url) {
  const RemoteFile& f = l.files.at(name);
  if (f.blob.empty() || f.size < 0)
    fail(url, ": ", name,
         " is listed without its size and blob id (the endpoint must answer "
         "?blobs=true as the Hub does)");
  return f;
}

// The non-weight files lathe (and transformers beside it) reads.
std::vector<std::string> metadata_files(const Listing& l) {
  static const char* const kFiles[] = {
      "config.json",         "generation_config.json", "model.safetensors.index.json",
      "tokenizer.json",      "tokenizer_config.json",  "special_tokens_map.json",
      "chat_template.jinja", "chat_template.json"};
  std::vector<std::string> out;
  for (const char* f : kFiles)
    if (l.files.count(f)) out.push_back(f);
  const std::string extra = "additional_chat_templates/";
  for (const auto& [name, f] : l.files) {
    if (name.rfind(extra, 0) != 0 || !name.ends_with(".jinja")) continue;
    const std::string base = name.substr(extra.size());
    if (!base.empty() && base.find('/') == std::string::npos && base[0] != '.') out.push_back(name);
  }
  return out;
}

// The shards an index names, checked as Checkpoint::open checks them.
std::vector<std::string> index_shards(const fs::path& index_file, const std::string& origin) {
  std::error_code ec;
  if (fs::file_size(index_file, ec) > kMaxIndexBytes)
    fail(origin, ": larger than ", kMaxIndexBytes >> 20, " MiB");
  const Json index = read_json_file(index_file);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail(origin, ": field \"weight_map\" must be an object");
  std::set<std::string> shards;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) fail(origin, ": weight_map entry \"", tensor, "\" must name a file");
    const std::string s = file.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s[0] == '.' ||
        !s.ends_with(".safetensors"))
      fail(origin, ": weight_map entry \"", tensor, "\" names \"", s,
           "\", which is not a safetensors file beside the index");
    shards.insert(s);
  }
  return {shards.begin(), shards.end()};
}

// An exclusive lock on CACHE/.locks/models--ORG--NAME/BLOB.lock, the file huggingface_hub
// locks while it downloads that blob, so a pull and a huggingface_hub download wait for
// each other. The kernel drops it when the process dies.
class BlobLock {
 public:
  explicit BlobLock(const fs::path& file) {
    fs::create_directories(file.parent_path());
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(file.string(), ": cannot create the lock file: ", std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) fail(file.string(), ": cannot lock: ", std::strerror(errno));
  }
  ~BlobLock() { ::close(fd_); }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Hashes the first `n` bytes of `path` into `d`.
void hash_prefix(const fs::path& path, int64_t n, Digest& d) {
  Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) fail(path.string(), ": cannot read: ", std::strerror(errno));
  std::vector<char> buf(1 << 20);
  while (n > 0) {
    const ssize_t r = ::read(in.fd, buf.data(), std::min<int64_t>(n, buf.size()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail(path.string(), ": cannot read: ", r < 0 ? std::strerror(errno) : "short file");
    d.update(buf.data(), static_cast<size_t>(r));
    n -= r;
  }
}

struct RepoPaths {
  fs::path repo, blobs, locks;
};

// Makes blobs/BLOB for `f`, downloading and verifying it unless it is there. Returns the
// bytes transferred.
int64_t fetch_blob(HttpClient& http, const RemoteFile& f, const RepoPaths& p, const Target& t,
                   const std::string& commit, Progress& progress, const std::atomic<bool>& cancel) {
  const fs::path blob = p.blobs / f.blob;
  std::error_code ec;
  auto present = [&] {
    return fs::is_regular_file(blob, ec) && static_cast<int64_t>(fs::file_size(blob, ec)) == f.size;
  };
  if (present()) {
    progress.add(f.size);
    progress.file_done();
    return 0;
  }
  BlobLock lock(p.locks / (f.blob + ".lock"));
  if (present()) {  // another process made it while this one waited
    progress.add(f.size);
    progress.file_done();
    return 0;
  }
  const fs::path part = fs::path(blob).concat(".incomplete");
  Fd out{::open(part.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)};
  if (out.fd < 0) fail(part.string(), ": cannot create: ", std::strerror(errno));
  int64_t offset = ::lseek(out.fd, 0, SEEK_END);
  if (offset < 0 || offset > f.size) {  // not a prefix of this file: start again
    if (::ftruncate(out.fd, 0) != 0 || ::lseek(out.fd, 0, SEEK_SET) != 0)
      fail(part.string(), ": cannot truncate: ", std::strerror(errno));
    offset = 0;
  }
  Digest digest(f.lfs ? Digest::Kind::Sha256 : Digest::Kind::GitBlobSha1, f.size);
  hash_prefix(part, offset, digest);
  progress.add(offset);
  const int64_t resumed_from = offset;
  const std::string url =
      t.options.endpoint + "/" + t.ref.id + "/resolve/" + commit + "/" + url_encode(f.name, true);
  auto on_bytes = [&](int64_t n) { progress.add(n); };
  for (int attempt = 1; offset < f.size; ++attempt) {
    const HttpStatus st = http.download(url, out.fd, offset, f.size, digest, on_bytes, cancel);
    offset = ::lseek(out.fd, 0, SEEK_END);
    if (st.ok()) break;
    if (cancel.load()) throw Error("cancelled");
    if (st.cut_short && attempt < kAttempts) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
      continue;
    }
    if (st.cut_short)
      fail(url, ": ", st.transport_error, " (", offset, " of ", f.size, " bytes, ", kAttempts,
           " tries); run the command again to resume from byte ", offset);
    fail_status(st, url, t);
  }
  const std::string got = digest.hex();
  if (offset != f.size || got != f.blob) {
    out.fd = (::close(out.fd), -1);
    fs::remove(part, ec);
    if (offset != f.size)
      fail(url, ": got ", offset, " bytes, the listing gives ", f.size,
           "; the partial file was removed, run the command again");
    fail(url, ": the ", f.lfs ? "sha256" : "git blob id", " of the download is ", got,
         ", the listing gives ", f.blob,
         " (damaged in transit, or the server sends another file); it was removed, run the "
         "command again");
  }
  if (::fsync(out.fd) != 0) fail(part.string(), ": cannot sync: ", std::strerror(errno));
  out.fd = (::close(out.fd), -1);
  fs::rename(part, blob);
  fsync_dir(p.blobs);
  progress.file_done();
  return offset - resumed_from;
}

// Runs fetch_blob over `files` on up to `jobs` threads, each with its own connection; the
// first failure cancels the others and is rethrown.
int64_t fetch_all(const std::vector<const RemoteFile*>& files, const RepoPaths& p, const Target& t,
                  const std::string& commit, Progress& progress) {
  std::atomic<size_t> next{0};
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> transferred{0};
  std::exception_ptr first;
  std::mutex mu;
  auto worker = [&] {
    try {
      HttpClient http(t.options.token);
      for (size_t i; !cancel.load() && (i = next.fetch_add(1)) < files.size();)
        transferred += fetch_blob(http, *files[i], p, t, commit, progress, cancel);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu);
      if (!first && !cancel.load()) first = std::current_exception();
      cancel = true;
    }
  };
  const size_t n = std::min<size_t>(std::max(1, t.options.jobs), files.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) threads.emplace_back(worker);
  if (n > 0) worker();
  for (auto& th : threads) th.join();
  if (first) std::rethrow_exception(first);
  return transferred;
}

// The bytes of `f` a pull would still transfer: none when its blob is there, the rest of a
// partial download, else all of it.
int64_t missing_bytes(const RemoteFile& f, const fs::path& blobs) {
  const fs::path blob = blobs / f.blob;
  std::error_code ec;
  if (fs::exists(blob, ec)) return 0;
  const auto part = fs::file_size(fs::path(blob).concat(".incomplete"), ec);
  return f.size - (ec ? 0 : std::min<int64_t>(static_cast<int64_t>(part), f.size));
}

void check_space(const std::vector<const RemoteFile*>& files, const RepoPaths& p) {
  int64_t need = 0;
  for (const RemoteFile* f : files) need += missing_bytes(*f, p.blobs);
  struct statvfs v {};
  if (::statvfs(p.blobs.c_str(), &v) != 0) return;
  const double free_bytes = static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize);
  if (static_cast<double>(need) > free_bytes)
    fail(p.blobs.string(), ": the download needs ", need / 1048576.0, " MiB and ",
         free_bytes / 1048576.0, " MiB are free; free some space or set HF_HUB_CACHE elsewhere");
}

// snapshots/COMMIT/NAME -> ../../blobs/BLOB (one more ../ per folder in NAME), replaced
// atomically when it points elsewhere.
void link_file(const fs::path& snapshot, const std::string& name, const std::string& blob) {
  const fs::path link = snapshot / name;
  std::string target = "../../";
  for (char c : name) target += c == '/' ? "../" : "";
  target += "blobs/" + blob;
  std::error_code ec;
  if (fs::is_symlink(link, ec) && fs::read_symlink(link, ec) == target) return;
  fs::create_directories(link.parent_path());
  const fs::path tmp = fs::path(link).concat(".tmp" + std::to_string(::getpid()));
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp);
  fs::rename(tmp, link);
}

}  // namespace

PullResult pull(const ModelRef& ref, const PullOptions& options) {
  const Target t{ref, options};
  if (options.token) {
    const std::string& tok = *options.token;
    if (tok.empty() || tok.size() > 4096 ||
        std::any_of(tok.begin(), tok.end(), [](char c) { return c <= ' ' || c == 127; }))
      fail("the token (--token or HF_TOKEN) must be one word of printable characters");
  }
  Listing l;
  {
    HttpClient http(options.token);
    l = fetch_listing(http, t);
  }
  const std::string listing_url =
      options.endpoint + "/api/models/" + ref.id + "/revision/" + url_encode(ref.revision, false);
  const std::string what = cat(ref.text(), " (commit ", l.commit, ")");
  if (!l.files.count("config.json"))
    fail(what, " has no config.json: not a transformers checkpoint lathe can run");
  RepoPaths p;
  p.repo = repo_dir(options.cache, ref.id);
  p.blobs = p.repo / "blobs";
  p.locks = options.cache / ".locks" / p.repo.filename();
  fs::create_directories(p.blobs);

  Progress progress(ref.id, options.progress);
  PullResult r;
  r.commit = l.commit;
  std::vector<const RemoteFile*> meta;
  for (const std::string& name : metadata_files(l)) meta.push_back(&need(l, name, listing_url));
  int64_t meta_bytes = 0;
  for (const RemoteFile* f : meta) meta_bytes += f->size;
  progress.expect(meta_bytes, static_cast<int>(meta.size()));
  r.bytes_downloaded += fetch_all(meta, p, t, l.commit, progress);

  std::vector<std::string> shard_names;
  if (l.files.count("model.safetensors.index.json")) {
    const RemoteFile& index = l.files.at("model.safetensors.index.json");
    shard_names = index_shards(p.blobs / index.blob, what + ": model.safetensors.index.json");
    for (const std::string& s : shard_names)
      if (!l.files.count(s))
        fail(what, ": model.safetensors.index.json names ", s, ", which the repository lacks");
  } else if (l.files.count("model.safetensors")) {
    shard_names = {"model.safetensors"};
  } else {
    fail(what,
         " has neither model.safetensors nor model.safetensors.index.json: lathe reads "
         "safetensors checkpoints only");
  }
  std::vector<const RemoteFile*> weights;
  int64_t weight_bytes = 0;
  for (const std::string& s : shard_names) {
    weights.push_back(&need(l, s, listing_url));
    weight_bytes += weights.back()->size;
  }
  check_space(weights, p);
  progress.expect(weight_bytes, static_cast<int>(weights.size()));
  r.bytes_downloaded += fetch_all(weights, p, t, l.commit, progress);
  progress.finish();

  // Every blob is verified and in place: link the snapshot, then name it in refs/.
  r.snapshot = p.repo / "snapshots" / l.commit;
  for (const auto* group : {&meta, &weights})
    for (const RemoteFile* f : *group) {
      link_file(r.snapshot, f->name, f->blob);
      r.files.push_back(f->name);
      r.bytes_total += f->size;
    }
  fsync_dir(r.snapshot);
  if (ref.revision != l.commit) {
    const fs::path ref_file = p.repo / "refs" / ref.revision;
    fs::create_directories(ref_file.parent_path());
    write_file_atomic(ref_file, l.commit);  // no newline, as huggingface_hub writes it
  }
  return r;
}

PullPlan plan_pull(const ModelRef& ref, const PullOptions& options) {
  const Target t{ref, options};
  HttpClient http(options.token);
  const Listing l = fetch_listing(http, t);
  const std::string listing_url =
      options.endpoint + "/api/models/" + ref.id + "/revision/" + url_encode(ref.revision, false);
  const std::string what = cat(ref.text(), " (commit ", l.commit, ")");
  if (!l.files.count("config.json"))
    fail(what, " has no config.json: not a transformers checkpoint lathe can run");
  const fs::path blobs = repo_dir(options.cache, ref.id) / "blobs";
  PullPlan plan;
  plan.commit = l.commit;
  const auto add = [&](const RemoteFile& f, bool weight) {
    plan.bytes += f.size;
    if (weight) plan.weight_bytes += f.size;
    plan.missing_bytes += missing_bytes(f, blobs);
  };
  for (const std::string& name : metadata_files(l)) add(need(l, name, listing_url), false);
  if (l.files.count("model.safetensors.index.json")) {
    const fs::path index = blobs / l.files.at("model.safetensors.index.json").blob;
    std::error_code ec;
    if (fs::exists(index, ec)) {
      for (const std::string& s : index_shards(index, what + ": model.safetensors.index.json")) {
        if (!l.files.count(s))
          fail(what, ": model.safetensors.index.json names ", s, ", which the repository lacks");
        add(need(l, s, listing_url), true);
      }
    } else {
      plan.weights_estimated = true;
      for (const auto& [name, f] : l.files)
        if (name.ends_with(".safetensors") && name.find('/') == std::string::npos &&
            name.rfind("consolidated", 0) != 0)
          add(need(l, name, listing_url), true);
    }
  } else if (l.files.count("model.safetensors")) {
    add(need(l, "model.safetensors", listing_url), true);
  } else {
    fail(what,
         " has neither model.safetensors nor model.safetensors.index.json: lathe reads "
         "safetensors checkpoints only");
  }
  return plan;
}

fs::path resolve_model(const std::string& arg, const ResolveOptions& o) {
  std::error_code ec;
  if (fs::exists(arg, ec)) return arg;
  const auto ref = parse_model_ref(arg);
  if (!ref) return arg;
  const fs::path cache = cache_dir();
  if (auto snap = cached_snapshot(cache, *ref)) return *snap;
  if (o.pull && !o.offline) {
    PullOptions po;
    po.cache = cache;
    po.endpoint = endpoint_from_env();
    po.token = o.token ? o.token : token_from_env();
    po.progress = o.progress;
    return pull(*ref, po).snapshot;
  }
  fail(arg, ": no such folder, and the Hugging Face cache (", cache.string(), ") has no ",
       ref->text(),
       o.offline ? " (offline: HF_HUB_OFFLINE=1 or --offline forbids downloading)" : "",
       "; fetch it with: lathe pull ", ref->text(), o.offline ? "" : " (or add --pull)");
}

}  // namespace lathe::hub
