// compile/cache: the store's layout, atomic publishing (two real processes racing), failures,
// cleanup, sync and fetch (from a folder, and over HTTP from a cpp-httplib server started
// here, serving good, cut, corrupt, foreign and failed modules), and `lathe cache`.
#include "compile/cache.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "support/run.h"

namespace lathe::compile {
namespace {
namespace fs = std::filesystem;
using testing::read_file;
using testing::ScratchDir;
using testing::write_file;
using Json = nlohmann::json;

constexpr const char* kVersion = "0.1.0-test";

ModuleKey key(int i) {
  std::ostringstream g;
  g << std::hex << (0xa000 + i);
  return {g.str(), "f1a9"};
}

// A module whose every byte says which writer (`who`) made it.
Files module_files(char who, size_t size = 3000) {
  return {{"module.json", std::string(size, who)},
          {"graph.txt", std::string("graph by ") + who + "\n"},
          {"flags.json", std::string("{\"who\": \"") + who + "\"}"}};
}

// Names in the version folder that are temporary folders (being written or left over).
int temp_folders(const CompileCache& cache) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache.version_dir(), ec))
    n += e.path().filename().string().rfind(".tmp-", 0) == 0;
  return n;
}

void flip_byte(const fs::path& path, size_t at) {
  std::string s = read_file(path);
  ASSERT_LT(at, s.size()) << path;
  s[at] ^= 0x20;
  write_file(path, s);
}

void set_age(const fs::path& path, std::chrono::hours age) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - age);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModuleKey, NamesRoundTripAndMalformedOnesAreErrors) {
  const ModuleKey k{"0123abcd", "ef"};
  EXPECT_EQ(k.dir_name(), "MODULE_0123abcd+ef");
  EXPECT_EQ(ModuleKey::parse("MODULE_0123abcd+ef"), k);
  EXPECT_EQ(ModuleKey::parse("MODULE_" + std::string(64, 'f') + "+0").graph_hash,
            std::string(64, 'f'));
  for (const char* bad : {"MODULE_+ef", "MODULE_ab+", "MODULE_AB+ef", "MODULE_ab-ef", "MODULE_abef",
                          "module_ab+ef", "MODULE_ab+ef/..", "MODULE_xy+ef", ""})
    EXPECT_THROW(ModuleKey::parse(bad), Error) << bad;
  EXPECT_THROW(ModuleKey::parse("MODULE_" + std::string(65, 'a') + "+0"), Error);
  EXPECT_THROW((ModuleKey{"../a", "b"}.dir_name()), Error);
  EXPECT_NE(error_of([] { ModuleKey::parse("MODULE_zz+ef"); }).find("graph hash"),
            std::string::npos);
}

TEST(CompileCache, CompilerVersionIsTheBuildsAndVersionStringsAreChecked) {
  const std::string v = compiler_version();
  EXPECT_FALSE(v.empty());
  EXPECT_EQ(
      v.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-"),
      std::string::npos)
      << v;
  EXPECT_EQ(CompileCache("/x").version(), v);
  EXPECT_EQ(CompileCache("/x").version_dir(), fs::path("/x") / ("lathe-" + v));
  EXPECT_THROW(CompileCache("/x", "a/b"), Error);
  EXPECT_THROW(CompileCache("/x", ""), Error);
}

TEST(CompileCache, DefaultRootFollowsTheEnvironment) {
  auto saved = [](const char* n) {
    const char* v = std::getenv(n);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto lathe = saved("LATHE_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"), home = saved("HOME");
  setenv("HOME", "/home/u", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("LATHE_CACHE_DIR", "/lathe-cache", 1);
  EXPECT_EQ(default_cache_root(), fs::path("/lathe-cache"));
  setenv("LATHE_CACHE_DIR", "", 1);  // empty: ignored
  EXPECT_EQ(default_cache_root(), fs::path("/xdg/lathe/compile-cache"));
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_root(), fs::path("/home/u/.cache/lathe/compile-cache"));
  unsetenv("HOME");
  unsetenv("LATHE_CACHE_DIR");
  EXPECT_THROW(default_cache_root(), Error);
  auto restore = [](const char* n, const std::optional<std::string>& v) {
    if (v)
      setenv(n, v->c_str(), 1);
    else
      unsetenv(n);
  };
  restore("LATHE_CACHE_DIR", lathe);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}

TEST(CompileCache, PublishThenReadRoundTripsInTheDocumentedLayout) {
  ScratchDir dir("cache-rt");
  CompileCache cache(dir.path(), kVersion);
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Missing);
  EXPECT_FALSE(fs::exists(dir / "lathe-0.1.0-test"));  // nothing made before a write
  const Files files = module_files('A');
  EXPECT_TRUE(cache.publish(key(1), files));
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Ready);
  EXPECT_EQ(cache.read(key(1)), files);

  const fs::path m = dir / "lathe-0.1.0-test" / "MODULE_a001+f1a9";
  EXPECT_TRUE(fs::is_regular_file(m / "done"));
  EXPECT_EQ(read_file(m / "module.json"), files.at("module.json"));
  const Json manifest = Json::parse(read_file(m / "manifest.json"));
  EXPECT_EQ(manifest["format"], 1);
  EXPECT_EQ(manifest["compiler_version"], kVersion);
  EXPECT_EQ(manifest["key"], "MODULE_a001+f1a9");
  EXPECT_EQ(manifest["files"]["module.json"]["size"], 3000);
  EXPECT_EQ(manifest["files"]["module.json"]["sha256"], testing::sha256_of(m / "module.json"));
  EXPECT_EQ(manifest["files"].size(), 3u);
  EXPECT_EQ(temp_folders(cache), 0);

  // A second publish keeps the first module (another process won).
  EXPECT_FALSE(cache.publish(key(1), module_files('B')));
  EXPECT_EQ(cache.read(key(1)), files);
  EXPECT_EQ(temp_folders(cache), 0);
  // Another compiler version does not see it.
  EXPECT_EQ(CompileCache(dir.path(), "0.1.0-other").state(key(1)), CompileCache::State::Missing);
}

TEST(CompileCache, WithoutDoneOrAValidManifestAModuleIsNotReady) {
  ScratchDir dir("cache-done");
  CompileCache cache(dir.path(), kVersion);
  ASSERT_TRUE(cache.publish(key(1), module_files('A')));
  const fs::path m = cache.module_dir(key(1));
  fs::remove(m / "done");
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Missing);
  EXPECT_NE(error_of([&] { cache.read(key(1)); }).find("no usable module"), std::string::npos);

  ASSERT_TRUE(cache.publish(key(2), module_files('A')));
  const fs::path m2 = cache.module_dir(key(2));
  std::string manifest = read_file(m2 / "manifest.json");
  manifest.replace(manifest.find(kVersion), std::strlen(kVersion), "0.1.0-xxxx");
  write_file(m2 / "manifest.json", manifest);
  EXPECT_EQ(cache.state(key(2)), CompileCache::State::Missing) << "another compiler's manifest";

  ASSERT_TRUE(cache.publish(key(3), module_files('A')));
  write_file(cache.module_dir(key(3)) / "graph.txt", "shorter");
  EXPECT_EQ(cache.state(key(3)), CompileCache::State::Missing) << "a file of the wrong size";

  // A damaged folder is replaced by the next publish.
  EXPECT_TRUE(cache.publish(key(1), module_files('B')));
  EXPECT_EQ(cache.read(key(1)), module_files('B'));
}

TEST(CompileCache, AFlippedByteMakesReadThrowNamingTheFile) {
  ScratchDir dir("cache-flip");
  CompileCache cache(dir.path(), kVersion);
  ASSERT_TRUE(cache.publish(key(1), module_files('A')));
  flip_byte(cache.module_dir(key(1)) / "module.json", 1234);
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Ready);  // sizes match; hashes are read()'s
  const std::string e = error_of([&] { cache.read(key(1)); });
  EXPECT_NE(e.find("module.json"), std::string::npos) << e;
  EXPECT_NE(e.find("sha256"), std::string::npos) << e;
  // Publishing again replaces the corrupt module instead of keeping it.
  EXPECT_TRUE(cache.publish(key(1), module_files('B')));
  EXPECT_EQ(cache.read(key(1)), module_files('B'));
}

TEST(CompileCache, BadFileNamesAreRefusedAndLeaveNothing) {
  ScratchDir dir("cache-names");
  CompileCache cache(dir.path(), kVersion);
  for (const char* bad : {"../escape", ".hidden", "done", "manifest.json", "failed", "a/b", ""}) {
    EXPECT_THROW(cache.publish(key(1), {{"module.json", "x"}, {bad, "y"}}), Error) << bad;
    EXPECT_THROW(cache.record_failure(key(1), "log", {{bad, "y"}}), Error) << bad;
  }
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Missing);
  EXPECT_EQ(temp_folders(cache), 0);
  EXPECT_FALSE(fs::exists(dir / "escape"));
  EXPECT_THROW(cache.publish(ModuleKey{"XY", "00"}, module_files('A')), Error);
}

TEST(CompileCache, AFailureIsRecordedReadAndReplacedByALaterModule) {
  ScratchDir dir("cache-failed");
  CompileCache cache(dir.path(), kVersion);
  const std::string log = "error: kernel search ran out of memory\ndetails...\n";
  cache.record_failure(key(1), log, {{"graph.txt", "g"}, {"flags.json", "{}"}});
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Failed);
  EXPECT_EQ(cache.failure_log(key(1)), log);
  const fs::path m = cache.module_dir(key(1));
  EXPECT_EQ(read_file(m / "graph.txt"), "g");
  EXPECT_TRUE(fs::exists(m / "failed"));
  EXPECT_FALSE(fs::exists(m / "manifest.json"));
  EXPECT_THROW(cache.read(key(1)), Error);
  EXPECT_THROW(cache.failure_log(key(2)), Error);

  cache.forget(key(1));
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Missing);
  EXPECT_FALSE(fs::exists(m));
  EXPECT_TRUE(cache.publish(key(1), module_files('A')));
  EXPECT_EQ(cache.read(key(1)), module_files('A'));

  // Without forget(): a publish replaces a failure too; a failure never replaces a module.
  cache.record_failure(key(2), "first", {});
  EXPECT_TRUE(cache.publish(key(2), module_files('B')));
  EXPECT_EQ(cache.state(key(2)), CompileCache::State::Ready);
  cache.record_failure(key(2), "late", {});
  EXPECT_EQ(cache.read(key(2)), module_files('B'));
  // A newer failure replaces an older one.
  cache.record_failure(key(3), "old", {});
  cache.record_failure(key(3), "new", {});
  EXPECT_EQ(cache.failure_log(key(3)), "new");
  cache.forget(key(4));  // nothing there: nothing happens
  EXPECT_EQ(temp_folders(cache), 0);
}

TEST(CompileCache, TwoProcessesPublishingTheSameKeysLeaveOneWholeModuleEach) {
  ScratchDir dir("cache-race");
  CompileCache cache(dir.path(), kVersion);
  constexpr int kKeys = 120;
  // Every third key starts as a failure, so the racers also replace an entry together.
  for (int i = 0; i < kKeys; i += 3) cache.record_failure(key(i), "old failure", {});
  // Before each key both processes meet (each writes a byte to the other, then reads the
  // other's), so that they publish it at the same moment.
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  auto meet = [](int write_fd, int read_fd) {
    char c = 'x';
    return ::write(write_fd, &c, 1) == 1 && ::read(read_fd, &c, 1) == 1;
  };
  const fs::path wins_b = dir / "wins-b";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      CompileCache mine(dir.path(), kVersion);
      std::string wins;
      for (int i = 0; i < kKeys; ++i) {
        if (!meet(to_parent[1], to_child[0])) ::_exit(2);
        wins += mine.publish(key(i), module_files('B')) ? '1' : '0';
      }
      write_file(wins_b, wins);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  std::string wins_a;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(meet(to_child[1], to_parent[0]));
    wins_a += cache.publish(key(i), module_files('A')) ? '1' : '0';
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string wins_b_text = read_file(wins_b);
  ASSERT_EQ(wins_b_text.size(), static_cast<size_t>(kKeys));
  int a = 0, b = 0;
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_NE(wins_a[i], wins_b_text[i]) << "key " << i << ": exactly one publish must win";
    const char winner = wins_a[i] == '1' ? 'A' : 'B';
    (winner == 'A' ? a : b) += 1;
    ASSERT_EQ(cache.state(key(i)), CompileCache::State::Ready) << i;
    EXPECT_EQ(cache.read(key(i)), module_files(winner)) << "key " << i << ": a mix of writers";
  }
  EXPECT_EQ(temp_folders(cache), 0);
  EXPECT_EQ(cache.entries().size(), static_cast<size_t>(kKeys));
  std::cout << "wins: this process " << a << ", the other " << b << "\n";
}

TEST(CompileCache, CleanupRemovesByAgeThenOldestFirstBySize) {
  ScratchDir dir("cache-cleanup");
  CompileCache cache(dir.path(), kVersion);
  // key(i) is i * 10 days old; each module takes 3000 + its small files' bytes.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(cache.publish(key(i), module_files('A')));
    set_age(cache.module_dir(key(i)) / "done", std::chrono::hours(24 * 10 * i + 1));
  }
  cache.record_failure(key(9), "log", {});
  set_age(cache.module_dir(key(9)) / "failed", std::chrono::hours(24 * 100));
  CompileCache other(dir.path(), "0.0.9-old");
  ASSERT_TRUE(other.publish(key(1), module_files('O')));
  set_age(other.module_dir(key(1)) / "done", std::chrono::hours(24 * 365));

  const uint64_t one = cache.entries()[0].bytes;
  EXPECT_GT(one, 3000u);
  CleanupOptions dry;
  dry.older_than = std::chrono::hours(24 * 15);
  dry.dry_run = true;
  EXPECT_EQ(cache.cleanup(dry).size(), 3u);  // key 2, key 3, the failure
  EXPECT_EQ(cache.entries().size(), 5u) << "a dry run removes nothing";

  CleanupOptions age;
  age.older_than = std::chrono::hours(24 * 15);
  const auto removed = cache.cleanup(age);
  ASSERT_EQ(removed.size(), 3u);
  EXPECT_EQ(cache.state(key(0)), CompileCache::State::Ready);
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Ready);
  EXPECT_EQ(cache.state(key(2)), CompileCache::State::Missing);
  EXPECT_EQ(cache.state(key(9)), CompileCache::State::Missing);
  EXPECT_EQ(other.state(key(1)), CompileCache::State::Ready) << "other versions are left alone";

  CleanupOptions size;
  size.max_bytes = one + one / 2;  // room for one module: the older (key 1) goes
  ASSERT_EQ(cache.cleanup(size).size(), 1u);
  EXPECT_EQ(cache.state(key(0)), CompileCache::State::Ready);
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Missing);

  CleanupOptions all;
  all.older_than = std::chrono::hours(24 * 100);
  all.all_versions = true;
  ASSERT_EQ(cache.cleanup(all).size(), 1u);
  EXPECT_EQ(other.state(key(1)), CompileCache::State::Missing);
  EXPECT_FALSE(fs::exists(other.version_dir())) << "an emptied other version's folder goes";
  EXPECT_EQ(cache.versions(), std::vector<std::string>{kVersion});
  EXPECT_EQ(temp_folders(cache), 0);
}

TEST(CompileCache, CleanupRemovesTheTemporaryFoldersOfDeadProcessesOnly) {
  ScratchDir dir("cache-temps");
  CompileCache cache(dir.path(), kVersion);
  ASSERT_TRUE(cache.publish(key(1), module_files('A')));
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const fs::path v = cache.version_dir();
  const std::string me = std::to_string(::getpid());
  const fs::path of_dead = v / (".tmp-MODULE_a002+f1a9-" + std::to_string(dead) + "-0123abcd");
  const fs::path of_live = v / (".tmp-MODULE_a003+f1a9-" + me + "-0123abcd");
  const fs::path stale = v / (".tmp-MODULE_a004+f1a9-" + me + "-4567abcd");
  for (const auto& d : {of_dead, of_live, stale}) {
    fs::create_directories(d);
    write_file(d / "module.json", "partial");
  }
  set_age(stale, std::chrono::hours(2));
  EXPECT_EQ(cache.entries().size(), 1u) << "temporary folders are never entries";
  const auto removed = cache.cleanup({});
  ASSERT_EQ(removed.size(), 2u);
  for (const auto& r : removed) EXPECT_EQ(r.what, "temporary");
  EXPECT_FALSE(fs::exists(of_dead));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(of_live)) << "a running process's folder stays";
  EXPECT_EQ(cache.state(key(1)), CompileCache::State::Ready);
}

TEST(CompileCache, SyncToAFolderThenFetchFromItIntoAnEmptyCache) {
  ScratchDir dir("cache-sync");
  CompileCache a(dir / "a", kVersion);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(a.publish(key(i), module_files(static_cast<char>('A' + i))));
  a.record_failure(key(7), "error: no kernel fits\nmore\n", {{"graph.txt", "g"}});

  auto r = a.sync_to(dir / "shared");
  EXPECT_EQ(r.copied, 3);
  EXPECT_EQ(r.already_there, 0);
  EXPECT_TRUE(r.errors.empty());
  r = a.sync_to(dir / "shared");
  EXPECT_EQ(r.copied, 0);
  EXPECT_EQ(r.already_there, 3);

  CompileCache c(dir / "c", kVersion);
  const auto got = c.fetch({key(0), key(1), key(2), key(5), key(7)}, (dir / "shared").string());
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].outcome, FetchOutcome::Fetched) << got[i].message;
    EXPECT_EQ(c.read(key(i)), module_files(static_cast<char>('A' + i)));
  }
  EXPECT_EQ(got[3].outcome, FetchOutcome::Missing) << got[3].message;
  EXPECT_EQ(got[4].outcome, FetchOutcome::Missing) << "failures are not synced";
  EXPECT_EQ(c.fetch({key(0)}, (dir / "shared").string())[0].outcome, FetchOutcome::AlreadyPresent);

  // From the first cache itself: the failure is reported with its log's first line, not kept.
  const auto failed = c.fetch({key(7)}, (dir / "a").string());
  EXPECT_EQ(failed[0].outcome, FetchOutcome::RemoteFailed);
  EXPECT_NE(failed[0].message.find("error: no kernel fits"), std::string::npos)
      << failed[0].message;
  EXPECT_EQ(failed[0].message.find("more"), std::string::npos) << failed[0].message;
  EXPECT_EQ(c.state(key(7)), CompileCache::State::Missing);

  // A corrupt module is reported by sync, not copied.
  flip_byte(a.module_dir(key(1)) / "module.json", 7);
  r = a.sync_to(dir / "d");
  EXPECT_EQ(r.copied, 2);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("MODULE_a001+f1a9"), std::string::npos) << r.errors[0];
  EXPECT_NE(r.errors[0].find("sha256"), std::string::npos) << r.errors[0];
  CompileCache d(dir / "d", kVersion);
  EXPECT_EQ(d.state(key(1)), CompileCache::State::Missing);
  EXPECT_EQ(temp_folders(d), 0);

  // A folder of another compiler version's layout has nothing for this one; not a folder.
  EXPECT_EQ(
      CompileCache(dir / "e", "0.1.0-else").fetch({key(0)}, (dir / "shared").string())[0].outcome,
      FetchOutcome::Missing);
  const auto nowhere = c.fetch({key(0), key(1)}, (dir / "nowhere").string());
  EXPECT_EQ(nowhere[1].outcome, FetchOutcome::Error);
  EXPECT_NE(nowhere[1].message.find("not a folder"), std::string::npos);
  EXPECT_EQ(c.fetch({key(0)}, "ftp://host/x")[0].outcome, FetchOutcome::Error);
}

// Serves a cache folder over HTTP on 127.0.0.1, with per-file misbehaviour.
class CacheServer {
 public:
  enum class Mode { Normal, CutShort, Truncated, Longer, FlipByte, Error500, Huge, Trickle };

  explicit CacheServer(fs::path root) : root_(std::move(root)) {
    server_.Get(R"(/(.*))", [this](const httplib::Request& req, httplib::Response& res) {
      serve(req.matches[1].str(), res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~CacheServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  // `rel`: a path below the root, e.g. lathe-V/MODULE_.../module.json
  void set_mode(const std::string& rel, Mode m) {
    std::lock_guard<std::mutex> lock(mutex_);
    modes_[rel] = m;
  }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  void serve(const std::string& rel, httplib::Response& res) {
    Mode mode = Mode::Normal;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(rel);
      if (auto it = modes_.find(rel); it != modes_.end()) mode = it->second;
    }
    const fs::path path = root_ / rel;
    if (rel.find("..") != std::string::npos || !fs::is_regular_file(path)) {
      res.status = 404;
      res.set_content(std::string(100000, 'x'), "text/plain");  // a 404 page larger than a marker
      return;
    }
    std::string data = read_file(path);
    switch (mode) {
      case Mode::Normal:
        break;
      case Mode::CutShort: {
        // Announces the whole length, sends half, drops the connection.
        const size_t half = data.size() / 2;
        res.set_content_provider(
            data.size(), "application/octet-stream",
            [data, half](size_t offset, size_t length, httplib::DataSink& sink) {
              if (offset >= half) return false;
              sink.write(data.data() + offset, std::min(length, half - offset));
              return true;
            });
        return;
      }
      case Mode::Truncated:
        data.resize(data.size() - 1);
        break;
      case Mode::Longer:
        data += "tail";
        break;
      case Mode::FlipByte:
        data[data.size() / 2] ^= 0x01;
        break;
      case Mode::Huge:
        data.assign(2 << 20, ' ');  // valid JSON padding, over the manifest bound
        data += "{}";
        break;
      case Mode::Trickle:
        // One byte every 200 ms (libcurl's stall check wants less than 1 byte/s for 60 s).
        res.set_content_provider(data.size(), "application/octet-stream",
                                 [data](size_t offset, size_t, httplib::DataSink& sink) {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(200));
                                   return sink.is_writable() && sink.write(data.data() + offset, 1);
                                 });
        return;
      case Mode::Error500:
        res.status = 500;
        res.set_content("internal error", "text/plain");
        return;
    }
    res.set_content(data, "application/octet-stream");
  }

  fs::path root_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::map<std::string, Mode> modes_;
  std::vector<std::string> requests_;
};

TEST(CompileCache, FetchOverHttpTakesGoodModulesAndRejectsEveryBadTransfer) {
  ScratchDir dir("cache-http");
  CompileCache remote(dir / "remote", kVersion);
  constexpr int kBad = 9;  // keys 1..kBad are served badly
  for (int i = 0; i <= kBad; ++i) ASSERT_TRUE(remote.publish(key(i), module_files('R', 100000)));
  remote.record_failure(key(20), "error: out of registers\nline 2\n", {{"graph.txt", "g"}});
  // A module whose manifest names another compiler version (kept consistent otherwise).
  const fs::path foreign = remote.module_dir(key(6)) / "manifest.json";
  std::string m = read_file(foreign);
  m.replace(m.find(kVersion), std::strlen(kVersion), "0.0.7-abc");
  write_file(foreign, m);
  fs::remove(remote.module_dir(key(7)) / "done");  // incomplete at the source

  CacheServer server(dir / "remote");
  ASSERT_GT(server.url().size(), 20u);
  using Mode = CacheServer::Mode;
  const std::string v = "lathe-" + std::string(kVersion) + "/";
  auto rel = [&](int i, const std::string& f) { return v + key(i).dir_name() + "/" + f; };
  server.set_mode(rel(1, "module.json"), Mode::CutShort);
  server.set_mode(rel(2, "module.json"), Mode::Truncated);
  server.set_mode(rel(3, "module.json"), Mode::Longer);
  server.set_mode(rel(4, "module.json"), Mode::FlipByte);
  server.set_mode(rel(5, "manifest.json"), Mode::Error500);
  server.set_mode(rel(8, "flags.json"), Mode::FlipByte);  // the last file, after others arrived
  server.set_mode(rel(9, "manifest.json"), Mode::Huge);

  CompileCache local(dir / "local", kVersion);
  std::vector<ModuleKey> keys;
  for (int i = 0; i <= kBad; ++i) keys.push_back(key(i));
  keys.push_back(key(20));
  keys.push_back(key(30));
  const auto got = local.fetch(keys, server.url());
  ASSERT_EQ(got.size(), keys.size());

  EXPECT_EQ(got[0].outcome, FetchOutcome::Fetched) << got[0].message;
  EXPECT_EQ(local.read(key(0)), module_files('R', 100000));
  const std::vector<std::pair<int, std::string>> errors = {
      {1, "cut short"},
      {2, "only 99999 bytes"},
      {3, "more than"},
      {4, "sha256"},
      {5, "HTTP 500"},
      {6, "was compiled by lathe-0.0.7-abc, this is lathe-0.1.0-test"},
      {7, "done"},
      {8, "sha256"},
      {9, "larger than the 1048576 bytes"}};
  for (const auto& [i, text] : errors) {
    EXPECT_EQ(got[i].outcome, FetchOutcome::Error) << i << ": " << got[i].message;
    EXPECT_NE(got[i].message.find(text), std::string::npos) << i << ": " << got[i].message;
    EXPECT_NE(got[i].message.find("http://127.0.0.1"), std::string::npos) << got[i].message;
    EXPECT_EQ(local.state(key(i)), CompileCache::State::Missing) << i;
    EXPECT_FALSE(fs::exists(local.module_dir(key(i)))) << i;
  }
  const auto& failed = got[kBad + 1];
  EXPECT_EQ(failed.outcome, FetchOutcome::RemoteFailed) << failed.message;
  EXPECT_NE(failed.message.find("error: out of registers"), std::string::npos) << failed.message;
  EXPECT_EQ(local.state(key(20)), CompileCache::State::Missing);
  EXPECT_EQ(got[kBad + 2].outcome, FetchOutcome::Missing) << got[kBad + 2].message;
  EXPECT_EQ(temp_folders(local), 0);
  EXPECT_EQ(local.entries().size(), 1u);

  // The key's '+' travels percent-encoded; a second fetch transfers nothing.
  const auto before = server.requests().size();
  EXPECT_EQ(local.fetch({key(0)}, server.url())[0].outcome, FetchOutcome::AlreadyPresent);
  EXPECT_EQ(server.requests().size(), before);
  // Once the server behaves, the cut module arrives whole.
  server.set_mode(rel(1, "module.json"), Mode::Normal);
  EXPECT_EQ(local.fetch({key(1)}, server.url() + "//")[0].outcome, FetchOutcome::Fetched);
  EXPECT_EQ(local.read(key(1)), module_files('R', 100000));
}

// A server trickling a file used to hold a fetch for as long as it kept going (issue 47,
// item 6). Each file now has a deadline: 10 s plus 1 s per 16 KiB, all tries together.
TEST(CompileCache, FetchGivesUpOnATricklingServerAndKeepsNothing) {
  ScratchDir dir("cache-trickle");
  CompileCache remote(dir / "remote", kVersion);
  ASSERT_TRUE(remote.publish(key(0), module_files('T', 100)));
  CacheServer server(dir / "remote");
  const std::string v = "lathe-" + std::string(kVersion) + "/";
  server.set_mode(v + key(0).dir_name() + "/module.json", CacheServer::Mode::Trickle);
  CompileCache local(dir / "local", kVersion);
  const auto start = std::chrono::steady_clock::now();
  const auto got = local.fetch({key(0)}, server.url());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].outcome, FetchOutcome::Error) << got[0].message;
  EXPECT_NE(got[0].message.find("module.json: not fetched within 10 s"), std::string::npos)
      << got[0].message;
  EXPECT_LT(seconds, 15.0);
  EXPECT_EQ(local.state(key(0)), CompileCache::State::Missing);
  EXPECT_EQ(temp_folders(local), 0);
}

// ---- lathe cache ------------------------------------------------------------------------

// The compiler version of the lathe binary (it and this test are built from the same tree,
// but a commit between their builds would change it).
std::string binary_version(const fs::path& empty_root) {
  const auto r = testing::run_lathe_split("cache status --json --cache-dir " + empty_root.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return Json::parse(r.out)["compiler_version"].get<std::string>();
}

TEST(CacheCli, StatusOfAnEmptyFolderAndHelpFollowTheConventions) {
  ScratchDir dir("cache-cli-status");
  auto r = testing::run_lathe_split("cache status --cache-dir " + (dir / "none").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("entries: 0 ready, 0 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compiler version: " + compiler_version()), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "none")) << "status creates nothing";
  r = testing::run_lathe_split_env("env LATHE_CACHE_DIR=" + (dir / "env").string(),
                                   "cache status --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["root"], (dir / "env").string());

  for (const std::string c :
       {"cache", "cache status", "cache lookup", "cache cleanup", "cache sync", "cache fetch"}) {
    const auto h = testing::run_lathe_split(c + " --help");
    EXPECT_EQ(h.exit_code, 0) << c;
    EXPECT_EQ(h.out.rfind("usage: lathe " + (c == "cache" ? "cache SUBCOMMAND" : c), 0), 0u)
        << h.out;
    std::istringstream lines(h.out);
    for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << c << line;
    EXPECT_EQ(testing::run_lathe_split("help " + c).out, h.out) << c;
  }
  EXPECT_NE(testing::run_lathe_split("cache --help").out.find("MODULE_<graph hash>+<flags hash>"),
            std::string::npos);
  EXPECT_EQ(testing::run_lathe_split("cache").exit_code, 2);
  EXPECT_EQ(testing::run_lathe_split("cache frobnicate").exit_code, 2);
  EXPECT_NE(testing::run_lathe_split("--help").out.find("cache status"), std::string::npos);
}

// SIGTERM during `cache fetch` used to leave the module's .tmp-MODULE_... folder for a later
// cleanup (issue 47, item 6): it is removed, and the exit says why.
TEST(CacheCli, ATerminatedFetchRemovesItsPartialModule) {
  ScratchDir dir("cache-cli-term");
  const std::string v = binary_version(dir / "probe");
  CompileCache remote(dir / "remote", v);
  ASSERT_TRUE(remote.publish(key(3), module_files('K', 100)));
  CacheServer server(dir / "remote");
  server.set_mode("lathe-" + v + "/" + key(3).dir_name() + "/module.json",
                  CacheServer::Mode::Trickle);
  const fs::path err = dir / "err.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = std::string("exec ") + LATHE_BINARY + " cache fetch --from " +
                            server.url() + " --key " + key(3).dir_name() + " --cache-dir " +
                            (dir / "local").string() + " >/dev/null 2>" + err.string();
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  CompileCache local(dir / "local", v);
  for (int i = 0; i < 500 && temp_folders(local) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(temp_folders(local), 1) << "the fetch did not start writing";
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(temp_folders(local), 0);
  EXPECT_EQ(read_file(err),
            "lathe cache fetch: stopped by SIGTERM; removed 1 partly fetched "
            "modules\n");
}

TEST(CacheCli, FetchFromAFolderCleanupAndUsageErrors) {
  ScratchDir dir("cache-cli-fetch");
  const std::string v = binary_version(dir / "probe");
  CompileCache src(dir / "src", v);
  ASSERT_TRUE(src.publish(key(1), module_files('S')));
  src.record_failure(key(2), "error: it broke\n", {});
  const std::string dst = " --cache-dir " + (dir / "dst").string();
  const std::string from = " --from " + (dir / "src").string();

  auto r = testing::run_lathe_split("cache fetch" + from + " --key MODULE_a001+f1a9" + dst);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("MODULE_a001+f1a9: fetched"), std::string::npos) << r.out;
  CompileCache dst_cache(dir / "dst", v);
  EXPECT_EQ(dst_cache.read(key(1)), module_files('S'));

  // One module there, one failed there, one missing: exit 1, each named on stderr.
  r = testing::run_lathe_split("cache fetch" + from +
                               " --key MODULE_a001+f1a9 --key=MODULE_a002+f1a9 --key MODULE_ff+00" +
                               dst);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("MODULE_a001+f1a9: already present"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("MODULE_a002+f1a9: failed there"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: it broke"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MODULE_ff+00: missing"), std::string::npos) << r.err;

  r = testing::run_lathe_split("cache fetch" + from + " --key MODULE_XYZ+00" + dst);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("MODULE_XYZ+00"), std::string::npos) << r.err;
  EXPECT_EQ(testing::run_lathe_split("cache fetch" + from + dst).exit_code, 2) << "no --key";
  EXPECT_EQ(testing::run_lathe_split("cache fetch --key MODULE_a1+00" + dst).exit_code, 2);
  EXPECT_EQ(testing::run_lathe_split("cache fetch --key" + dst).exit_code, 2);
  EXPECT_EQ(testing::run_lathe_split("cache sync" + dst).exit_code, 2) << "no --to";
  EXPECT_EQ(testing::run_lathe_split("cache cleanup --max-size 12X" + dst).exit_code, 2);
  EXPECT_EQ(testing::run_lathe_split("cache cleanup --older-than -1" + dst).exit_code, 2);

  r = testing::run_lathe_split("cache sync --to " + (dir / "shared").string() + dst);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("copied 1 modules"), std::string::npos) << r.out;
  EXPECT_EQ(CompileCache(dir / "shared", v).read(key(1)), module_files('S'));

  r = testing::run_lathe_split("cache status" + dst);
  EXPECT_NE(r.out.find("MODULE_a001+f1a9  ready"), std::string::npos) << r.out;
  r = testing::run_lathe_split("cache cleanup --max-size 1K --dry-run" + dst);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("would remove 1 folders"), std::string::npos) << r.out;
  EXPECT_EQ(dst_cache.state(key(1)), CompileCache::State::Ready);
  r = testing::run_lathe_split("cache cleanup --max-size 0.5M" + dst);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(dst_cache.state(key(1)), CompileCache::State::Ready) << "it fits in 0.5 MiB";
  r = testing::run_lathe_split("cache cleanup --max-size 1K" + dst);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(dst_cache.state(key(1)), CompileCache::State::Missing) << r.out;
}

// The modules a model needs (lathe cache lookup) are the ones lathe generate --compiled writes,
// and lathe cache fetch MODEL brings those another cache has.
TEST(CacheCli, LookupAndFetchOfAModelFollowGenerate) {
  ScratchDir dir("cache-cli-model");
  const std::string model = (dir / "model").string();
  ASSERT_EQ(testing::run_lathe("tiny build " + testing::fixture_dir("llama_tied_gqa") + " " + model)
                .exit_code,
            0);
  const std::string opts = " --threads 2 --max-seq 64";
  const std::string src = " --cache-dir " + (dir / "src").string();
  auto r = testing::run_lathe_split("generate " + model + " --prompt-ids '[1, 2, 3, 4, 5]'" +
                                    " --max-new-tokens 3 --compiled" + opts + src);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = testing::run_lathe_split("cache lookup " + model + opts + src + " --prompt-tokens 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int64_t, std::string> state;
  const Json lookup = Json::parse(r.out);
  for (const auto& m : lookup["modules"])
    state[m["tokens"].get<int64_t>()] = m["state"].get<std::string>();
  EXPECT_EQ(state,
            (std::map<int64_t, std::string>{
                {1, "ready"}, {2, "missing"}, {4, "missing"}, {8, "ready"}, {16, "missing"}}));
  // Another cache fetches the two that exist; the rest are missing there, which is no error.
  const std::string dst = " --cache-dir " + (dir / "dst").string();
  r = testing::run_lathe_split("cache fetch " + model + " --from " + (dir / "src").string() + opts +
                               dst + " --prompt-tokens 16");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 of 5 modules are in the cache"), std::string::npos) << r.out;
  r = testing::run_lathe_split("cache lookup " + model + opts + dst + " --prompt-tokens 16");
  EXPECT_NE(r.out.find("2 of 5 modules ready"), std::string::npos) << r.out;
  // and the generate run on the fetched cache compiles nothing
  r = testing::run_lathe_split("bench " + model + " --prompt-tokens 5 --new-tokens 3 --warmup 0" +
                               " --repeat 1 --compiled --json" + opts + dst);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["compiled"]["modules_compiled"], 0) << r.out;
  EXPECT_EQ(Json::parse(r.out)["compiled"]["modules_loaded"], 2) << r.out;
}

}  // namespace
}  // namespace lathe::compile
