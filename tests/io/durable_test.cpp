// io/durable: whole files or none, no temporary file left by any failure, and the folder lock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "core/error.h"
#include "io/durable.h"
#include "io/safetensors.h"
#include "support/run.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicFile, ReplacesWholeOnCommitAndLeavesNothingOtherwise) {
  testing::ScratchDir dir("atomic");
  write_file_atomic(dir / "f", "old");
  {
    AtomicFile out(dir / "f");
    out.write("new, but never committed");
    EXPECT_EQ(testing::read_file(dir / "f"), "old");
  }
  EXPECT_EQ(testing::read_file(dir / "f"), "old");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"f"});
  {
    AtomicFile out(dir / "f");
    out.write("new");
    out.commit();
  }
  EXPECT_EQ(testing::read_file(dir / "f"), "new");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"f"});
  // A folder where the file should go: refused before anything is written.
  fs::create_directories(dir / "folder");
  EXPECT_THROW(write_file_atomic(dir / "folder", "x"), Error);
  Tensor t = Tensor::zeros(DType::F32, {2, 2});
  EXPECT_THROW(write_safetensors(dir / "folder", {{"t", t}}), Error);
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"f", "folder"}));
}

TEST(FolderLock, HeldUntilReleasedAndRefusedMeanwhile) {
  testing::ScratchDir dir("lock");
  {
    const FolderLock first(dir.path(), "try later");
    // flock locks belong to an open file: a second taker in this process is refused too.
    try {
      const FolderLock second(dir.path(), "try later");
      ADD_FAILURE() << "the second lock was granted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("(pid " + std::to_string(::getpid()) + ")"), std::string::npos) << m;
      EXPECT_NE(m.find("try later"), std::string::npos) << m;
    }
  }
  const FolderLock again(dir.path(), "try later");  // released with the first
}

}  // namespace
}  // namespace lathe
