// The object-store backend's download cache on this node, <cache>/<ns>/<name>/<id>/, kept
// under a size bound (--snapshot-cache-bytes): after a download adds to it, complete copies
// are evicted least recently used first (the decision: cache_eviction.h) until it fits.
//
// Everything in it is a copy of a snapshot whose manifest is in the store, so evicting one
// loses nothing: the next restore downloads it again. Node-local snapshots (<root>/snapshots,
// a Pause's or an uncommitted Suspend's only copy) live elsewhere and are never looked at.
//
// Invariants:
//  - a copy held (Hold: a download writing it, a restore reading it until runsc has it open)
//    is never evicted; the hold is checked again, under the lock Hold takes, just before the
//    removal, so a restore that starts during a pass either holds the copy first or finds it
//    gone and downloads it;
//  - only a directory whose name is a snapshot id and whose manifest names that very snapshot
//    is evicted; *.partial (a download in flight) and anything the scan cannot vouch for is
//    left, its bytes counted, and logged;
//  - recency survives a restart: a use sets the manifest's mtime (written here, explicitly:
//    atime is not kept on noatime mounts and relatime updates it at most daily).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "snapshots/cache_eviction.h"
#include "snapshots/transfer_observer.h"

namespace stasis {

class SnapshotCache {
 public:
  // bound_bytes <= 0: unbounded. observer (may be null): the cache's size and evictions.
  SnapshotCache(std::string root, int64_t bound_bytes, TransferObserver* observer);

  void set_bound_bytes(int64_t bytes) { bound_bytes_ = bytes; }
  int64_t bound_bytes() const { return bound_bytes_; }

  // Keeps <ns>/<name>/<id> from eviction until the returned handle (and its copies) is gone.
  std::shared_ptr<const void> Hold(const std::string& ns, const std::string& name, const std::string& id);
  // Records a use of the complete copy in `dir` (now, as its manifest's mtime).
  void Touch(const std::filesystem::path& dir) const;
  // Scans the cache, evicts least recently used copies that are not held until it fits the
  // bound, reports its size; returns how many were evicted. One pass at a time.
  int Enforce();

 private:
  struct Holds {
    std::mutex mu;
    std::map<std::string, int> count;  // "<ns>/<name>/<id>" → holders
  };
  struct Scanned {
    std::vector<CacheEntry> entries;
    std::vector<std::filesystem::path> dirs;  // entries[i]'s directory
  };
  Scanned Scan() const;
  // Removes entry `e` in `dir` unless it has come to be held since the scan.
  bool Evict(const CacheEntry& e, const std::filesystem::path& dir);

  std::string root_;
  std::atomic<int64_t> bound_bytes_;
  TransferObserver* observer_;
  std::shared_ptr<Holds> holds_ = std::make_shared<Holds>();  // outlives the cache while held
  std::mutex enforce_mu_;
};

}  // namespace stasis
