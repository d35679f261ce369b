// The progress bar of `lathe pull`: one line on stderr, redrawn four times a second by its
// own thread while downloads run; nothing at all when disabled (stderr not a terminal).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace lathe::hub {

class Progress {
 public:
  Progress(std::string name, bool enabled);
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // More files to come: their bytes and their count.
  void expect(int64_t bytes, int files);
  void add(int64_t bytes) { done_ += bytes; }  // negative when a restart dropped bytes
  void file_done() { ++files_done_; }
  // Draws the last state, ends the line and stops the thread.
  void finish();

 private:
  void draw(bool last);

  std::string name_;
  bool enabled_;
  std::atomic<int64_t> done_{0}, total_{0};
  std::atomic<int> files_done_{0}, files_total_{0};
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace lathe::hub
