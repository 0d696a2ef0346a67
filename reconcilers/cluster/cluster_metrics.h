// The cluster controller's metrics (DESIGN.md §7): stasis_actors{status},
// stasis_actors_stuck{status}, and its share of stasis_forced_cleanups_total{reason}.
#pragma once

#include <map>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace stasis {

class ClusterMetrics {
 public:
  explicit ClusterMetrics(prometheus::Registry& registry);
  void CountForcedCleanup(const std::string& reason);
  // Every status of the enum is set (0 where none), so dashboards see stable series.
  void SetActors(const std::map<std::string, int>& by_status,
                 const std::map<std::string, int>& stuck_by_status);

 private:
  prometheus::Family<prometheus::Counter>& forced_cleanups_;
  prometheus::Family<prometheus::Gauge>& actors_;
  prometheus::Family<prometheus::Gauge>& stuck_;
};

}  // namespace stasis
