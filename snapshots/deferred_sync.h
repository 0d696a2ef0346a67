// Writes back to disk, in one background thread, the files of a snapshot whose directory is
// already complete: the fsyncs a pause would otherwise wait for (~10–25 ms of a small pause on
// this kind of disk, ~0.4 ms/MB at size) — and, first, whatever else the job must do before
// them (the snapshot's checksums: ~0.85 ms/MB here).
//
// Why that is safe is SnapshotStore's business (snapshot_store.h: a snapshot completed this
// way records the boot it was written in, and one of an earlier boot is verified before use);
// this class only keeps order and says what failed:
//  - a job's `first` step runs before its fsyncs; kNotFound from it ends the job quietly (its
//    snapshot was removed before its turn), any other error is a failure;
//  - a job's paths are synced in the order given (files, then their directories);
//  - a path that no longer exists is skipped (its snapshot was removed before its turn);
//  - a job that failed is remembered by its key until Forget(key).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace stasis {

class DeferredSync {
 public:
  DeferredSync();
  // Syncs everything still queued, then stops: a clean shutdown leaves nothing unsynced.
  ~DeferredSync();
  DeferredSync(const DeferredSync&) = delete;
  DeferredSync& operator=(const DeferredSync&) = delete;

  // `key` names the job (a snapshot directory); `first` (may be empty) runs, then `paths` are
  // fsynced in order.
  void Enqueue(std::string key, std::vector<std::string> paths, std::function<Status()> first = nullptr);
  // Waits until every job queued so far is done; false on timeout.
  bool Flush(std::chrono::milliseconds timeout);
  // Whether a job of `key` failed (its `first` step, or an fsync: its bytes may be only in the
  // page cache).
  bool Failed(const std::string& key) const;
  void Forget(const std::string& key);

  uint64_t synced_jobs() const;

 private:
  struct Job {
    std::string key;
    std::vector<std::string> paths;
    std::function<Status()> first;
  };
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;       // the thread waits for jobs
  std::condition_variable idle_cv_;  // Flush waits for an empty queue
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::set<std::string> failed_;
  uint64_t synced_jobs_ = 0;
  std::thread thread_;
};

}  // namespace stasis
