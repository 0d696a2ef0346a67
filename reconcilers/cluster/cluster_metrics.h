// The cluster controller's metrics (DESIGN.md §7): stasis_actors{status},
// stasis_actors_stuck{status}, its share of stasis_forced_cleanups_total{reason},
// stasis_snapshot_store_deletions_total{reason} (retention and garbage collection), and the
// warm pools' stasis_warm_pool_ready{namespace,template} and
// stasis_warm_pool_claims_total{namespace,template,result}.
#pragma once

#include <map>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "snapshots/object_store_gc.h"

namespace stasis {

// stasis_snapshot_store_deletions_total's reasons: a snapshot retention deleted, and garbage
// collection's (object_store_gc.h's kGc*). Causes of a deletion, not an actor's failure: no
// condition carries them (docs/metrics.md).
inline constexpr char kDeletionRetention[] = "retention";

class ClusterMetrics {
 public:
  explicit ClusterMetrics(prometheus::Registry& registry);
  // reason: api::MetricReason of the Stuck condition's reason, or api::kMetricReasonDeleted.
  void CountForcedCleanup(const std::string& reason);
  // Snapshots (or uploads) deleted from the store, `n` at once; reason: kDeletionRetention or a kGc*.
  void CountSnapshotDeletions(const std::string& reason, int n);
  // Every status of the enum is set (0 where none), so dashboards see stable series.
  void SetActors(const std::map<std::string, int>& by_status,
                 const std::map<std::string, int>& stuck_by_status);
  // A template's ready pool members; its claim counters exist from then on, at zero.
  void SetWarmPool(const std::string& ns, const std::string& template_name, int ready);
  // An actor of a template with spec.warm > 0 filled in: from a member (hit) or the golden (miss).
  void CountWarmClaim(const std::string& ns, const std::string& template_name, bool hit);
  // The template is gone: its series go too.
  void ForgetTemplate(const std::string& ns, const std::string& template_name);

 private:
  prometheus::Family<prometheus::Counter>& forced_cleanups_;
  prometheus::Family<prometheus::Counter>& deletions_;
  prometheus::Family<prometheus::Gauge>& actors_;
  prometheus::Family<prometheus::Gauge>& stuck_;
  prometheus::Family<prometheus::Gauge>& pool_ready_;
  prometheus::Family<prometheus::Counter>& pool_claims_;
};

}  // namespace stasis
