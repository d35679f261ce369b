// Modules for tests/core/module_test.cpp: liblathe_fake_module.so, a module with one function
// in its table, and liblathe_no_entry.so (LATHE_FAKE_NO_ENTRY), a shared library without the
// lathe_module function.
#include "core/module_loader.h"

namespace {

struct FakeTable {
  lathe::ModuleStamp stamp;
  int (*answer)();
};

const FakeTable kTable = {lathe::module_stamp(7), [] { return 42; }};

}  // namespace

#ifndef LATHE_FAKE_NO_ENTRY
extern "C" __attribute__((visibility("default"))) const lathe::ModuleStamp* lathe_module() {
  return &kTable.stamp;
}
#else
extern "C" __attribute__((visibility("default"))) int lathe_answer() {
  return kTable.answer();
}
#endif
