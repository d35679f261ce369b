#include "compile/compiler.h"

#include <chrono>
#include <iostream>

#include "compile/cache.h"
#include "core/error.h"

namespace lathe::compile {
namespace {

// The description files beside a module or a failure: what was compiled, in words.
Files description(const graph::Graph& bucket, const Flags& flags) {
  return {{"graph.txt", bucket.dump()}, {"flags.json", flags.json()}};
}

}  // namespace

Flags step_flags(const Backend& backend, int threads, int64_t max_context, int64_t tokens,
                 int64_t rows, const std::string& shard) {
  return {backend.name(), backend.kernel_level(), threads, max_context, tokens, rows, shard};
}

ModuleKey module_key(const graph::Graph& bucket, const Flags& flags) {
  return {hex_hash(bucket.hash()), flags.hash()};
}

Compiler::Compiler(CompilerOptions opts) : opts_(opts) {}
Compiler::~Compiler() = default;

const graph::Schedule* Compiler::schedule_for(const graph::Graph& bucket, const Backend& backend,
                                              ThreadPool& pool, int64_t max_context, int64_t tokens,
                                              int64_t rows) {
  const Flags flags = step_flags(backend, pool.size(), max_context, tokens, rows, opts_.shard);
  const ModuleKey key = module_key(bucket, flags);
  const std::string name = key.dir_name();
  if (auto it = given_.find(name); it != given_.end()) return it->second.get();
  const auto start = std::chrono::steady_clock::now();
  auto done = [&](std::unique_ptr<graph::Schedule> s) {
    stats_.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s) stats_.keys.push_back(name);
    return (given_[name] = std::move(s)).get();
  };
  CompileCache* cache = opts_.cache;
  if (cache && opts_.recompile) cache->forget(key);
  if (cache) {
    switch (cache->state(key)) {
      case CompileCache::State::Ready:
        try {
          Module m = Module::parse(cache->read(key).at("module.json"), name + "/module.json");
          if (m.graph_hash != key.graph_hash || m.flags.hash() != key.flags_hash)
            fail(name, "/module.json: made for another graph or other flags than its name says");
          graph::check_schedule(bucket, backend, pool.size(), max_context, m.schedule, true);
          ++stats_.loaded;
          return done(std::make_unique<graph::Schedule>(std::move(m.schedule)));
        } catch (const std::exception& e) {
          std::cerr << "lathe: warning: compile cache module " << name << " is unusable ("
                    << e.what() << "); compiling it again\n";
          cache->forget(key);
        }
        break;
      case CompileCache::State::Failed:
        std::cerr << "lathe: warning: module " << name
                  << " failed to compile before; its steps run uncompiled (lathe cache status "
                     "shows the log; --recompile tries again)\n";
        ++stats_.failed;
        return done(nullptr);
      case CompileCache::State::Missing:
        break;
    }
  }
  Module m;
  try {
    m = compile_module(bucket, backend, pool, flags, stats_.work);
  } catch (const std::exception& e) {
    std::cerr << "lathe: warning: module " << name << " failed to compile (" << e.what()
              << "); its steps run uncompiled\n";
    ++stats_.failed;
    if (cache) {
      try {
        cache->record_failure(key, e.what(), description(bucket, flags));
      } catch (const std::exception& e2) {
        std::cerr << "lathe: warning: could not record the failure: " << e2.what() << "\n";
      }
    }
    return done(nullptr);
  }
  ++stats_.compiled;
  if (cache) {
    Files files = description(bucket, flags);
    files["module.json"] = m.json();
    try {
      cache->publish(key, files);
    } catch (const std::exception& e) {
      std::cerr << "lathe: warning: could not keep module " << name << " in the compile cache ("
                << e.what() << ")\n";
    }
  }
  return done(std::make_unique<graph::Schedule>(std::move(m.schedule)));
}

}  // namespace lathe::compile
