// Which snapshots a bounded download cache gives up, decided apart from the disk: the caller
// scans the cache (snapshot_cache.h) into entries, this picks the victims, the caller removes
// them. Pure, so its order and its refusals are tested in milliseconds.
//
// The policy: least recently used first, until what stays fits the bound. An entry in use
// (a restore reading it, a download writing it, or one whose state the scan could not vouch
// for) is never chosen, but its bytes count: the bound is on the disk, not on what may go.
// When what is in use alone exceeds the bound, everything else goes and the plan says the
// bound is not met; the next pass, after those holds end, tries again.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace stasis {

struct CacheEntry {
  std::string key;  // "<ns>/<name>/<id>": the tie-break between equal last uses, and the logs
  int64_t bytes = 0;
  std::chrono::system_clock::time_point last_use;
  bool in_use = false;  // never evicted
};

struct EvictionPlan {
  std::vector<size_t> evict;    // indexes into the entries, least recently used first
  int64_t total_bytes = 0;      // every entry, before
  int64_t remaining_bytes = 0;  // what stays
  bool bound_met = true;        // false: the entries in use alone exceed the bound
};

// bound_bytes <= 0: unbounded (nothing is evicted). A total equal to the bound fits.
EvictionPlan PlanCacheEviction(const std::vector<CacheEntry>& entries, int64_t bound_bytes);

}  // namespace stasis
