// The persistent compile cache's store (docs/compile-cache.md): compiled modules kept on disk
// by compiler version and key, published atomically so that concurrent processes, crashes and
// corrupt or partial downloads never leave a module that looks usable and is not. What a
// module holds is the engine's business; here its files are opaque bytes.
//
// Layout under the cache root:
//   lathe-<compiler version>/MODULE_<graph hash>+<flags hash>/
//       <the module's files>, manifest.json (each file's size and sha256), done (written last)
//   or, after a failed compile:
//       failed.log, the description files (graph.txt, flags.json), failed (written last)
//   lathe-<compiler version>/.tmp-MODULE_...-<pid>-<random>/   being written; never an entry
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lathe::compile {

// The version modules are compiled by: kLatheVersion "-" kLatheCommit (core/version.h), every
// character outside [A-Za-z0-9._+-] replaced by '_'. A module is only ever used by the
// compiler version that wrote it.
std::string compiler_version();

// The cache root when no --cache-dir is given: $LATHE_CACHE_DIR, else
// $XDG_CACHE_HOME/lathe/compile-cache, else ~/.cache/lathe/compile-cache (empty variables are
// ignored). Throws lathe::Error when none of LATHE_CACHE_DIR, XDG_CACHE_HOME, HOME is set.
std::filesystem::path default_cache_root();

// A module's identity: the hashes of its graph and of its compile flags, each 1..64 lowercase
// hex characters, given by the caller.
struct ModuleKey {
  std::string graph_hash, flags_hash;

  // "MODULE_<graph hash>+<flags hash>"; throws lathe::Error when either hash is malformed.
  std::string dir_name() const;
  // The key a dir_name() names; throws lathe::Error quoting `dir_name` when it is not one.
  static ModuleKey parse(const std::string& dir_name);
  // Throws lathe::Error naming the hash that is not 1..64 lowercase hex characters.
  void validate() const;
  bool operator==(const ModuleKey&) const = default;
};

// A module's (or a failure description's) files: name -> bytes. Names are plain file names of
// [A-Za-z0-9._-], not starting with '.', other than the store's own (manifest.json, done,
// failed, failed.log).
using Files = std::map<std::string, std::string>;

// Bounds on what a manifest may announce, so that a hostile or damaged one cannot make lathe
// read or download without limit: its own size, its number of files, each file's size.
inline constexpr size_t kMaxManifestBytes = 1u << 20;
inline constexpr size_t kMaxModuleFiles = 1024;
inline constexpr int64_t kMaxModuleFileBytes = int64_t{1} << 32;

// What cleanup() may remove. With neither rule, only leftover temporary folders go.
struct CleanupOptions {
  // Entries written longer ago than this.
  std::optional<std::chrono::seconds> older_than;
  // Then the oldest entries until the entries considered take at most this many bytes.
  std::optional<uint64_t> max_bytes;
  // Other compiler versions' entries are considered too (by default they are left alone).
  bool all_versions = false;
  // Report what would go, remove nothing.
  bool dry_run = false;
};

// Where fetch() found a module, per key.
enum class FetchOutcome {
  Fetched,         // downloaded, verified and published here
  AlreadyPresent,  // this cache already had it, valid; nothing was transferred
  Missing,         // the source has no such module
  RemoteFailed,    // the source holds a failed compile for it (not fetched, not retried)
  Error,           // anything else: the message says what (nothing was published)
};

class CompileCache {
 public:
  // A cache under `root` for modules of `compiler_version` (which must be non-empty and of
  // [A-Za-z0-9._+-]; tests pass another one). Nothing is created until something is written.
  explicit CompileCache(std::filesystem::path root,
                        std::string compiler_version = compile::compiler_version());

  const std::filesystem::path& root() const { return root_; }
  const std::string& version() const { return version_; }
  // root/lathe-<compiler version>
  std::filesystem::path version_dir() const;
  // version_dir()/MODULE_<graph>+<flags>
  std::filesystem::path module_dir(const ModuleKey& key) const;

  enum class State { Missing, Ready, Failed };
  // Ready only when `done` is there and manifest.json is valid (this compiler version, this
  // key, each listed file present with its listed size); Failed when `failed` is there;
  // anything else (nothing, a damaged folder) is Missing. The files' hashes are checked by
  // read(), not here.
  State state(const ModuleKey& key) const;

  // A Ready module's files, each checked against the manifest's size and sha256. Throws
  // lathe::Error naming the module (not Ready) or the file (a size or hash mismatch): a corrupt
  // module is never returned; forget() it and compile again.
  Files read(const ModuleKey& key) const;

  // A Failed entry's log (at most its first 16 MiB). Throws lathe::Error when it is not one.
  std::string failure_log(const ModuleKey& key) const;

  // Publishes a compiled module: its files, each fsync'd, then manifest.json, then `done`, in a
  // temporary folder renamed into place, so other processes see the whole module or nothing.
  // Returns false, and keeps the module already there, when a valid Ready module is there (a
  // concurrent process published it first); a Failed entry or a damaged folder there is
  // replaced. Throws lathe::Error (nothing left behind) when a write fails or a name is bad.
  bool publish(const ModuleKey& key, const Files& files);

  // Records a failed compile: `log` as failed.log, the `description` files (graph.txt,
  // flags.json), then `failed`, atomically as publish() does. A Ready module already there is
  // kept (another process compiled it); an older failure is replaced.
  void record_failure(const ModuleKey& key, const std::string& log, const Files& description);

  // Removes an entry, Ready or Failed (--recompile); nothing when there is none. The entry is
  // renamed aside first, so readers see it whole or not at all.
  void forget(const ModuleKey& key);

  struct Entry {
    std::string compiler_version;
    ModuleKey key;
    State state = State::Missing;             // Missing: a folder that is neither (damaged)
    uint64_t bytes = 0;                       // its files' sizes
    std::filesystem::file_time_type written;  // when `done` or `failed` was written
    std::filesystem::path dir;
  };
  // This compiler version's entries (every version's with `all_versions`), by key. Temporary
  // folders and names that are not MODULE_<key> are skipped.
  std::vector<Entry> entries(bool all_versions = false) const;
  // The compiler versions with a lathe-<version> folder under the root, this one included
  // when it has one, sorted.
  std::vector<std::string> versions() const;

  struct Removed {
    std::filesystem::path path;
    std::string what;  // "ready", "failed", "damaged" or "temporary"
    uint64_t bytes = 0;
  };
  // Removes, per `options`: entries older than options.older_than, then the oldest entries
  // until the rest fit options.max_bytes; and always the temporary folders left by processes
  // that died (their pid is not running) or that are older than an hour, in every version.
  // Returns what it removed (or would remove, with dry_run).
  std::vector<Removed> cleanup(const CleanupOptions& options);

  struct SyncResult {
    int copied = 0, already_there = 0;
    std::vector<std::string> errors;  // one message per module that could not be copied
  };
  // Copies every Ready module of this compiler version into the cache rooted at `dest` (same
  // layout), each verified and published there atomically; modules already there and valid
  // are skipped. A module that fails its check here is reported in errors, not copied.
  SyncResult sync_to(const std::filesystem::path& dest) const;

  struct FetchResult {
    ModuleKey key;
    FetchOutcome outcome = FetchOutcome::Error;
    std::string message;  // what happened, naming the URL or file; the log's first line for
                          // RemoteFailed
  };
  // Fetches modules from `from`: an http:// or https:// URL, or a folder, either holding the
  // same layout. Per key: reads lathe-<version>/MODULE_.../manifest.json (at most
  // kMaxManifestBytes), requires this compiler version and the `done` marker, downloads each
  // listed file (at most its listed size), checks its size and sha256, and publishes the
  // module here as publish() does. A partial or corrupt transfer is never published. Never
  // throws for one key's failure: each key gets its result.
  std::vector<FetchResult> fetch(const std::vector<ModuleKey>& keys, const std::string& from);

 private:
  std::filesystem::path root_;
  std::string version_;
};

// "ready", "failed", "missing".
const char* state_name(CompileCache::State state);
// "fetched", "already present", "missing", "failed there", "error".
const char* fetch_outcome_name(FetchOutcome outcome);

}  // namespace lathe::compile
