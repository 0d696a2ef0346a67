#include "snapshots/writeback.h"

#include <fcntl.h>
#include <unistd.h>

namespace stasis {

namespace fs = std::filesystem;

WritebackPump::WritebackPump(fs::path dir, std::chrono::milliseconds interval)
    : dir_(std::move(dir)), interval_(interval), thread_([this] { Loop(); }) {}

WritebackPump::~WritebackPump() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int64_t WritebackPump::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

int64_t WritebackPump::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void WritebackPump::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const bool stop = cv_.wait_for(lock, interval_, [this] { return stopping_; });
    lock.unlock();
    Pass();
    lock.lock();
    if (stop) return;
  }
}

void WritebackPump::Pass() {
  int64_t requested = 0;
  std::error_code ec;
  // Failures are ignored: a file that went away, a directory not there yet; the fsyncs later
  // are what report errors.
  for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const int fd = open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    if (sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0) ++requested;
    close(fd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++passes_;
  requests_ += requested;
}

}  // namespace stasis
