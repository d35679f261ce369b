// The plug-in loader (core/plugin.h) over two test plug-ins built beside this test
// (tests/core/fake_plugin.cpp): a plug-in loads and its table works; a missing file, a file
// that is no shared library, a library without lathe_plugin and a plug-in of another table
// version are each one error naming the file.
#include "core/plugin.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "support/run.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

struct FakeTable {
  static constexpr int kAbi = 7;
  PluginStamp stamp;
  int (*answer)();
};

// Runs `f` with LATHE_PLUGIN_DIR set to `dir`, and returns the error it threw ("" if none).
template <class F>
std::string error_with_dir(const fs::path& dir, F f) {
  ::setenv("LATHE_PLUGIN_DIR", dir.c_str(), 1);
  std::string error;
  try {
    f();
  } catch (const Error& e) {
    error = e.what();
  }
  ::unsetenv("LATHE_PLUGIN_DIR");
  return error;
}

TEST(Plugin, LoadsAndRuns) {
  const FakeTable* table = nullptr;
  EXPECT_EQ(
      error_with_dir(
          LATHE_FAKE_PLUGIN_DIR,
          [&] { table = &load_plugin<FakeTable>("liblathe_fake_plugin.so", "the test plug-in"); }),
      "");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->answer(), 42);
  EXPECT_STREQ(table->stamp.commit, kLatheCommit);
}

TEST(Plugin, EachFailureIsOneErrorNamingTheFile) {
  testing::ScratchDir scratch("plug-ins");
  const fs::path dir = scratch.path();
  testing::write_file(dir / "liblathe_text.so", "not a shared library\n");
  struct Case {
    fs::path dir;
    std::string file;
    int abi;
    std::string says;
  };
  const fs::path built = LATHE_FAKE_PLUGIN_DIR;
  for (const Case& c : std::vector<Case>{
           {dir, "liblathe_missing.so", 7,
            "cannot find the test plug-in (liblathe_missing.so) in "},
           {dir, "liblathe_text.so", 7, "liblathe_text.so: cannot load the test plug-in: "},
           {built, "liblathe_no_entry.so", 7, "liblathe_no_entry.so: not a lathe plug-in"},
           {built, "liblathe_fake_plugin.so", 8, "from another build of lathe"},
       }) {
    const std::string error =
        error_with_dir(c.dir, [&] { open_plugin(c.file, c.abi, "the test plug-in"); });
    EXPECT_NE(error.find(c.says), std::string::npos) << c.file << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace lathe
