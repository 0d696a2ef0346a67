#include "snapshots/cache_eviction.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace stasis {

EvictionPlan PlanCacheEviction(const std::vector<CacheEntry>& entries, int64_t bound_bytes) {
  EvictionPlan plan;
  for (const auto& e : entries) plan.total_bytes += e.bytes;
  plan.remaining_bytes = plan.total_bytes;
  if (bound_bytes <= 0 || plan.total_bytes <= bound_bytes) return plan;
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Oldest use first; the key breaks ties so that a pass is the same on every run.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(entries[a].last_use, entries[a].key) < std::tie(entries[b].last_use, entries[b].key);
  });
  for (size_t i : order) {
    if (plan.remaining_bytes <= bound_bytes) break;
    if (entries[i].in_use) continue;
    plan.evict.push_back(i);
    plan.remaining_bytes -= entries[i].bytes;
  }
  plan.bound_met = plan.remaining_bytes <= bound_bytes;
  return plan;
}

}  // namespace stasis
