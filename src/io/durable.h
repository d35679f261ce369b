// Writing files so that a crash, a kill or a full disk never leaves a half-written file in
// place: whole files go to a temporary name, are fsync'd, then renamed over the target; logs
// are appended a line at a time and fsync'd before the append is reported done.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// Replaces `path` with `bytes` atomically: a reader sees the old file or the new one, never
// a mix. Throws lathe::Error naming the file (the old file is kept) when anything fails.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// A file written in pieces under a temporary name beside `path` (PATH.tmpPID) and renamed
// over `path` by commit(). Until then `path` is untouched; destroying an uncommitted
// AtomicFile (an exception, a failed write) removes the temporary file, so no failure path
// leaves one behind. Throws lathe::Error naming `path`.
class AtomicFile {
 public:
  explicit AtomicFile(const std::filesystem::path& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);
  // fsyncs, renames into place and makes the rename durable.
  void commit();

 private:
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
};

// An advisory lock on a folder (flock on DIR/.lock, created when missing), held while the
// object lives; the kernel releases it when the process dies, however it dies. The lock
// file holds the holder's process id, for the message a second taker gets.
class FolderLock {
 public:
  // Throws lathe::Error naming the folder, the holder's process id and `busy_hint` when
  // another process holds the lock.
  FolderLock(const std::filesystem::path& dir, const std::string& busy_hint);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// Makes a rename or a file creation in `dir` durable.
void fsync_dir(const std::filesystem::path& dir);

// fsyncs an existing file by path (e.g. one a library wrote and closed).
void fsync_file(const std::filesystem::path& path);

// An append-only log of lines. Each append writes one whole line and fsyncs it.
class AppendLog {
 public:
  explicit AppendLog(const std::filesystem::path& path);
  ~AppendLog();
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;

  // Appends `line` and a newline; throws lathe::Error (nothing half-written is left: a
  // partial write is cut off again) when the write or the fsync fails.
  void append(std::string_view line);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// The complete lines of a log; a last line without its newline (the write was cut short)
// is dropped and, when `repair` is set, cut off the file so later appends start clean.
std::vector<std::string> read_log_lines(const std::filesystem::path& path, bool repair);

}  // namespace lathe
