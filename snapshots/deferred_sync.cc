#include "snapshots/deferred_sync.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stasis {
namespace {

constexpr int kNice = 10;

// 0, ENOENT (gone before its turn: nothing to keep), or the errno of the failure.
int SyncPath(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : errno;
  const int r = fsync(fd);
  const int err = r == 0 ? 0 : errno;
  close(fd);
  return err;
}

}  // namespace

DeferredSync::DeferredSync() : thread_([this] { Loop(); }) {}

DeferredSync::~DeferredSync() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DeferredSync::Enqueue(std::string key, std::vector<std::string> paths, std::function<Status()> first) {
  {
    std::lock_guard lock(mu_);
    failed_.erase(key);
    queue_.push_back(Job{std::move(key), std::move(paths), std::move(first)});
  }
  cv_.notify_one();
}

bool DeferredSync::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !busy_; });
}

bool DeferredSync::Failed(const std::string& key) const {
  std::lock_guard lock(mu_);
  return failed_.count(key) > 0;
}

void DeferredSync::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failed_.erase(key);
}

uint64_t DeferredSync::synced_jobs() const {
  std::lock_guard lock(mu_);
  return synced_jobs_;
}

void DeferredSync::Loop() {
  // Background work: on a small node it shares the CPU with the next checkpoint (runsc's own
  // writer, the hashing here), and should yield to it. Linux applies a nice value per thread.
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kNice) != 0) {
    spdlog::debug("component=snapshots op=deferred_sync nice={} error=\"{}\"", kNice, std::strerror(errno));
  }
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    // Stopping drains the queue first: what was promised to disk goes there.
    if (queue_.empty()) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    std::string failed_path, error;
    bool removed = false;
    if (job.first) {
      Status s = job.first();
      removed = s.code() == Code::kNotFound;
      if (!s.ok() && !removed) error = s.message();
    }
    for (const auto& path : job.paths) {
      if (removed || !error.empty()) break;
      if (int e = SyncPath(path); e != 0) {
        failed_path = path;
        error = std::strerror(e);
        break;
      }
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (!error.empty()) {
      spdlog::error("component=snapshots op=deferred_sync dir={} path={} result=error error=\"{}\" duration_ms={}",
                    job.key, failed_path, error, ms);
    } else if (removed) {
      spdlog::debug("component=snapshots op=deferred_sync dir={} result=removed duration_ms={}", job.key, ms);
    } else {
      spdlog::debug("component=snapshots op=deferred_sync dir={} files={} result=ok duration_ms={}",
                    job.key, job.paths.size(), ms);
    }
    lock.lock();
    if (!error.empty()) failed_.insert(job.key);
    ++synced_jobs_;
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace stasis
