#include "io/hub_progress.h"

#include <algorithm>
#include <cstdio>

namespace lathe::hub {

Progress::Progress(std::string name, bool enabled)
    : name_(std::move(name)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {
  if (name_.size() > 40) name_ = name_.substr(0, 37) + "...";
  if (!enabled_) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; }))
      draw(false);
  });
}

Progress::~Progress() {
  finish();
}

void Progress::expect(int64_t bytes, int files) {
  total_ += bytes;
  files_total_ += files;
}

void Progress::finish() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  draw(true);
}

void Progress::draw(bool last) {
  const double done = static_cast<double>(std::max<int64_t>(0, done_.load()));
  const double total = static_cast<double>(std::max<int64_t>(1, total_.load()));
  const double fraction = std::min(1.0, done / total);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  const double mib = 1024.0 * 1024.0;
  std::fprintf(stderr, "\r%s [%s] %3d%% %.1f/%.1f MiB %.1f MiB/s %d/%d files%s", name_.c_str(),
               bar.c_str(), static_cast<int>(fraction * 100), done / mib, total / mib,
               seconds > 0 ? done / mib / seconds : 0.0, files_done_.load(), files_total_.load(),
               last ? "\n" : "   ");
  std::fflush(stderr);
}

}  // namespace lathe::hub
