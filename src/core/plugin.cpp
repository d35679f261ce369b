#include "core/plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

// Where plug-ins are looked for, in order.
std::vector<fs::path> plugin_dirs() {
  if (const char* env = std::getenv("LATHE_PLUGIN_DIR"); env && *env) return {fs::path(env)};
  std::vector<fs::path> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  // PREFIX/bin/lathe reads PREFIX/lib/lathe (`cmake --install`).
  if (!ec) dirs.push_back(exe.parent_path().parent_path() / "lib" / "lathe");
  dirs.push_back(LATHE_PLUGIN_BUILD_DIR);
  return dirs;
}

}  // namespace

const PluginStamp* open_plugin(const std::string& file, int abi, const std::string& what) {
  const std::vector<fs::path> dirs = plugin_dirs();
  fs::path path;
  std::string looked;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    if (fs::exists(dir / file, ec)) {
      path = dir / file;
      break;
    }
    looked += (looked.empty() ? "" : ", ") + dir.string();
  }
  if (path.empty())
    fail("cannot find ", what, " (", file, ") in ", looked,
         "; build it (cmake --build), install it (cmake --install) or set LATHE_PLUGIN_DIR");
  // Never closed: its functions are used until the process ends.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string why = dlerror();  // "PATH: reason"; the message names PATH once
    if (why.starts_with(path.string() + ": ")) why.erase(0, path.string().size() + 2);
    fail(path.string(), ": cannot load ", what, ": ", why);
  }
  using Entry = const PluginStamp* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, "lathe_plugin"));
  if (!entry) fail(path.string(), ": not a lathe plug-in (it has no lathe_plugin function)");
  const PluginStamp* stamp = entry();
  if (!stamp || stamp->abi != abi || !stamp->commit || std::strcmp(stamp->commit, kLatheCommit))
    fail(path.string(), ": ", what, " is from another build of lathe (",
         stamp && stamp->commit ? stamp->commit : "no commit", ", table ", stamp ? stamp->abi : 0,
         ") than this one (", kLatheCommit, ", table ", abi, "); rebuild or reinstall both");
  return stamp;
}

}  // namespace lathe
