// The module loader (core/module_loader.h) over two test modules built beside this test
// (tests/core/fake_module.cpp): a module loads and its table works; a missing file, a file
// that is no shared library, a library without lathe_module and a module of another table
// version are each one error naming the file.
#include "core/module_loader.h"

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
  ModuleStamp stamp;
  int (*answer)();
};

// Runs `f` with LATHE_MODULE_DIR set to `dir`, and returns the error it threw ("" if none).
template <class F>
std::string error_with_dir(const fs::path& dir, F f) {
  ::setenv("LATHE_MODULE_DIR", dir.c_str(), 1);
  std::string error;
  try {
    f();
  } catch (const Error& e) {
    error = e.what();
  }
  ::unsetenv("LATHE_MODULE_DIR");
  return error;
}

TEST(Module, LoadsAndRuns) {
  const FakeTable* table = nullptr;
  EXPECT_EQ(
      error_with_dir(
          LATHE_FAKE_MODULE_DIR,
          [&] { table = &load_module<FakeTable>("liblathe_fake_module.so", "the test module"); }),
      "");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->answer(), 42);
  EXPECT_STREQ(table->stamp.commit, kLatheCommit);
}

TEST(Module, EachFailureIsOneErrorNamingTheFile) {
  testing::ScratchDir scratch("modules");
  const fs::path dir = scratch.path();
  testing::write_file(dir / "liblathe_text.so", "not a shared library\n");
  struct Case {
    fs::path dir;
    std::string file;
    int abi;
    std::string says;
  };
  const fs::path built = LATHE_FAKE_MODULE_DIR;
  for (const Case& c : std::vector<Case>{
           {dir, "liblathe_missing.so", 7, "cannot find the test module (liblathe_missing.so) in "},
           {dir, "liblathe_text.so", 7, "liblathe_text.so: cannot load the test module: "},
           {built, "liblathe_no_entry.so", 7, "liblathe_no_entry.so: not a lathe module"},
           {built, "liblathe_fake_module.so", 8, "from another build of lathe"},
       }) {
    const std::string error =
        error_with_dir(c.dir, [&] { open_module(c.file, c.abi, "the test module"); });
    EXPECT_NE(error.find(c.says), std::string::npos) << c.file << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace lathe
