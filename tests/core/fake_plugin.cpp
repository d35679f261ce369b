// Plug-ins for tests/core/plugin_test.cpp: liblathe_fake_plugin.so, a plug-in with one function
// in its table, and liblathe_no_entry.so (LATHE_FAKE_NO_ENTRY), a shared library without the
// lathe_plugin function.
#include "core/plugin.h"

namespace {

struct FakeTable {
  lathe::PluginStamp stamp;
  int (*answer)();
};

const FakeTable kTable = {lathe::plugin_stamp(7), [] { return 42; }};

}  // namespace

#ifndef LATHE_FAKE_NO_ENTRY
extern "C" __attribute__((visibility("default"))) const lathe::PluginStamp* lathe_plugin() {
  return &kTable.stamp;
}
#else
extern "C" __attribute__((visibility("default"))) int lathe_answer() {
  return kTable.answer();
}
#endif
