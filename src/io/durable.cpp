#include "io/durable.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

void write_all(int fd, std::string_view bytes, const fs::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(path.string(), ": cannot write: ", std::strerror(n < 0 ? errno : ENOSPC));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(dir.string(), ": cannot open folder to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail(dir.string(), ": cannot sync folder: ", std::strerror(err));
}

void fsync_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path.string(), ": cannot open to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail(path.string(), ": cannot sync: ", std::strerror(err));
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  AtomicFile out(path);
  out.write(bytes);
  out.commit();
}

AtomicFile::AtomicFile(const fs::path& path)
    : path_(path), tmp_(fs::path(path).concat(".tmp" + std::to_string(::getpid()))) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(path.string(), ": is a folder, not a file");
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path.string(), ": cannot create: ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  if (fd_ < 0) fail(path_.string(), ": write after commit");
  write_all(fd_, bytes, path_);
}

void AtomicFile::commit() {
  if (fd_ < 0) fail(path_.string(), ": committed twice");
  if (::fsync(fd_) != 0) fail(path_.string(), ": cannot sync: ", std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail(path_.string(), ": cannot write: ", std::strerror(errno));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail(path_.string(), ": cannot rename the finished file into place: ", std::strerror(errno));
  tmp_.clear();  // in place: nothing to remove any more
  fsync_dir(path_.parent_path());
}

FolderLock::FolderLock(const fs::path& dir, const std::string& busy_hint) {
  const fs::path file = dir / ".lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(file.string(), ": cannot open the folder's lock: ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    std::string pid(holder, n > 0 ? static_cast<size_t>(n) : 0);
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) fail(file.string(), ": cannot lock the folder: ", std::strerror(err));
    fail(dir.string(), ": another lathe process", pid.empty() ? "" : " (pid " + pid + ")",
         " is using this folder (it holds ", file.string(), "); ", busy_hint);
  }
  // The holder's pid, for the message above; a failure to write it does not matter.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

AppendLog::AppendLog(const fs::path& path) : path_(path) {
  const bool existed = fs::exists(path);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path.string(), ": cannot open for appending: ", std::strerror(errno));
  if (!existed) fsync_dir(path.parent_path());
}

AppendLog::~AppendLog() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendLog::append(std::string_view line) {
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  std::string text(line);
  text.push_back('\n');
  try {
    write_all(fd_, text, path_);
    if (::fsync(fd_) != 0) fail(path_.string(), ": cannot sync: ", std::strerror(errno));
  } catch (...) {
    // Cut a partial line off again, so the log holds whole lines only.
    if (before >= 0 && ::ftruncate(fd_, before) == 0) (void)::fsync(fd_);
    throw;
  }
}

std::vector<std::string> read_log_lines(const fs::path& path, bool repair) {
  std::vector<std::string> lines;
  std::ifstream in(path, std::ios::binary);
  if (!in) return lines;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    if (nl > start) lines.push_back(text.substr(start, nl - start));
  if (start < text.size() && repair) {
    // The last append was cut short (a kill mid-write, a full disk): drop it.
    fs::resize_file(path, start);
    fsync_file(path);
  }
  return lines;
}

}  // namespace lathe
