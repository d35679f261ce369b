// The compiled mode: gives the engine a schedule (memory plan and measured kernel choices;
// module.h) for each step shape's bucket, from the compile cache when a module is there
// (another run's, or another machine's, fetched), else by compiling it and keeping it there.
// A compile that failed is recorded in the cache and not tried again unless asked
// (`recompile`): its steps run planned per process, as without the compiled mode, with a
// warning.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "compile/module.h"

namespace lathe::compile {

class CompileCache;
struct ModuleKey;

struct CompilerOptions {
  CompileCache* cache = nullptr;  // null: compile in this process only, keep nothing
  bool recompile = false;         // compile again even over a ready or failed module
  // The shard layout in the modules' flags: "tp1" for one process, "tp2", "ep4" for a rank
  // of a sharded run (each rank's graph differs from one process's anyway).
  std::string shard = "tp1";
};

// What a run's compiled mode did: the lab's row and the tests read it.
struct CompileStats {
  int64_t compiled = 0;           // modules compiled in this process
  int64_t loaded = 0;             // modules read from the cache
  int64_t failed = 0;             // buckets run without a module (a failed compile, now or before)
  double seconds = 0;             // spent compiling and loading
  Work work;                      // the costly work done (none on a warm run)
  std::vector<std::string> keys;  // every module used, as its cache folder name
};

class Compiler : public graph::ScheduleSource {
 public:
  explicit Compiler(CompilerOptions opts);
  ~Compiler() override;

  const graph::Schedule* schedule_for(const graph::Graph& bucket, const Backend& backend,
                                      ThreadPool& pool, int64_t max_context, int64_t tokens,
                                      int64_t rows) override;
  const CompileStats& stats() const { return stats_; }

 private:
  CompilerOptions opts_;
  CompileStats stats_;
  // Schedules already given in this process, by cache folder name (null: failed).
  std::map<std::string, std::unique_ptr<graph::Schedule>> given_;
};

// The flags of a bucket's module: the backend and its kernels, the pool, the caches' size,
// the bucket and the shard layout.
Flags step_flags(const Backend& backend, int threads, int64_t max_context, int64_t tokens,
                 int64_t rows, const std::string& shard = "tp1");
// The cache key of a bucket's module (its folder: MODULE_<graph hash>+<flags hash>).
ModuleKey module_key(const graph::Graph& bucket, const Flags& flags);

}  // namespace lathe::compile
