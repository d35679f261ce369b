// Modules: the parts of lathe that need a large library only some commands use (Apache Arrow
// for the lab's Parquet) are shared libraries loaded the first time they are needed, so a run
// that does not need them neither loads nor maps them (docs/architecture.md, "Modules").
//
// A module exports one C function, `lathe_module`, returning its table of functions; the table
// begins with a ModuleStamp, and a module whose stamp differs from the binary's (another
// table layout, another commit) is refused, since the two share C++ types.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <type_traits>

#include "core/version.h"

namespace lathe {

struct ModuleStamp {
  int abi;             // the table's layout version, Table::kAbi
  const char* commit;  // kLatheCommit of the sources the module was built from
};

// The stamp a module built from these sources carries.
constexpr ModuleStamp module_stamp(int abi) {
  return {abi, kLatheCommit};
}

// Finds `file` (LATHE_MODULE_DIR if set, else lib/lathe beside an installed binary, else the
// build tree), loads it, and returns its stamp, checked against `abi`. Throws lathe::Error
// naming the file: not found, not loadable, not a module, or from another build.
const ModuleStamp* open_module(const std::string& file, int abi, const std::string& what);

// The table of module `file`, loaded once per process. `what` names it in errors ("the
// Parquet module"). A failed load is tried again on the next call, and fails the same way.
template <class Table>
const Table& load_module(const char* file, const char* what) {
  static_assert(std::is_standard_layout_v<Table> && offsetof(Table, stamp) == 0,
                "a module's table begins with its ModuleStamp");
  static std::mutex mutex;
  static const Table* table = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!table) table = reinterpret_cast<const Table*>(open_module(file, Table::kAbi, what));
  return *table;
}

}  // namespace lathe
