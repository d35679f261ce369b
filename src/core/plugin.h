// Plug-ins: the parts of lathe that need a large library only some commands use (Apache Arrow
// for the lab's Parquet) are shared libraries loaded the first time they are needed, so a run
// that does not need them neither loads nor maps them (docs/architecture.md, "Plug-ins").
//
// A plug-in exports one C function, `lathe_plugin`, returning its table of functions; the table
// begins with a PluginStamp, and a plug-in whose stamp differs from the binary's (another
// table layout, another commit) is refused, since the two share C++ types.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <type_traits>

#include "core/version.h"

namespace lathe {

struct PluginStamp {
  int abi;             // the table's layout version, Table::kAbi
  const char* commit;  // kLatheCommit of the sources the plug-in was built from
};

// The stamp a plug-in built from these sources carries.
constexpr PluginStamp plugin_stamp(int abi) {
  return {abi, kLatheCommit};
}

// Finds `file` (LATHE_PLUGIN_DIR if set, else lib/lathe beside an installed binary, else the
// build tree), loads it, and returns its stamp, checked against `abi`. Throws lathe::Error
// naming the file: not found, not loadable, not a plug-in, or from another build.
const PluginStamp* open_plugin(const std::string& file, int abi, const std::string& what);

// The table of plug-in `file`, loaded once per process. `what` names it in errors ("the
// Parquet plug-in"). A failed load is tried again on the next call, and fails the same way.
template <class Table>
const Table& load_plugin(const char* file, const char* what) {
  static_assert(std::is_standard_layout_v<Table> && offsetof(Table, stamp) == 0,
                "a plug-in's table begins with its PluginStamp");
  static std::mutex mutex;
  static const Table* table = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!table) table = reinterpret_cast<const Table*>(open_plugin(file, Table::kAbi, what));
  return *table;
}

}  // namespace lathe
