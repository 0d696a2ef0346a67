#include "reconcilers/cluster/cluster_metrics.h"

#include "api/conditions.h"

namespace stasis {
namespace {
constexpr const char* kStatuses[] = {"STATUS_UNSPECIFIED", "STATUS_RESUMING", "STATUS_RUNNING",
                                     "STATUS_SUSPENDING",  "STATUS_SUSPENDED", "STATUS_PAUSING",
                                     "STATUS_PAUSED",      "STATUS_FAILED"};
}  // namespace

ClusterMetrics::ClusterMetrics(prometheus::Registry& registry)
    : forced_cleanups_(prometheus::BuildCounter()
                           .Name("stasis_forced_cleanups_total")
                           .Help("Actors cleaned up by force: sandbox removed, worker freed")
                           .Register(registry)),
      deletions_(prometheus::BuildCounter()
                     .Name("stasis_snapshot_store_deletions_total")
                     .Help("Committed snapshots and uploads deleted from the snapshot store, by retention or garbage collection")
                     .Register(registry)),
      actors_(prometheus::BuildGauge().Name("stasis_actors").Help("Actors by status").Register(registry)),
      stuck_(prometheus::BuildGauge()
                 .Name("stasis_actors_stuck")
                 .Help("Actors stuck in a status past its deadline or on a lost node")
                 .Register(registry)),
      pool_ready_(prometheus::BuildGauge()
                      .Name("stasis_warm_pool_ready")
                      .Help("Warm-pool actors of a template paused and unclaimed")
                      .Register(registry)),
      pool_claims_(prometheus::BuildCounter()
                       .Name("stasis_warm_pool_claims_total")
                       .Help("Actors of a template with a warm pool filled in: from a member (hit) or the golden (miss)")
                       .Register(registry)) {
  // The Stuck reasons (stuck_detector.h) in their metric spelling, and an actor deleted while its
  // node is lost (no condition: the actor is gone).
  for (const char* r : {api::kReasonDeadlineExceeded, api::kReasonNodeLost}) {
    forced_cleanups_.Add({{"reason", api::MetricReason(r)}});
  }
  forced_cleanups_.Add({{"reason", api::kMetricReasonDeleted}});
  for (const char* r : {kDeletionRetention, kGcIncomplete, kGcActorGone, kGcOwnerReplaced, kGcMultipartUpload}) {
    deletions_.Add({{"reason", r}});
  }
  SetActors({}, {});
}

void ClusterMetrics::CountForcedCleanup(const std::string& reason) {
  forced_cleanups_.Add({{"reason", reason}}).Increment();
}

void ClusterMetrics::CountSnapshotDeletions(const std::string& reason, int n) {
  if (n > 0) deletions_.Add({{"reason", reason}}).Increment(n);
}

void ClusterMetrics::SetActors(const std::map<std::string, int>& by_status,
                               const std::map<std::string, int>& stuck_by_status) {
  for (const char* s : kStatuses) {
    auto a = by_status.find(s);
    actors_.Add({{"status", s}}).Set(a == by_status.end() ? 0 : a->second);
    auto b = stuck_by_status.find(s);
    stuck_.Add({{"status", s}}).Set(b == stuck_by_status.end() ? 0 : b->second);
  }
}

void ClusterMetrics::SetWarmPool(const std::string& ns, const std::string& template_name, int ready) {
  pool_ready_.Add({{"namespace", ns}, {"template", template_name}}).Set(ready);
  for (const char* result : {"hit", "miss"}) {
    pool_claims_.Add({{"namespace", ns}, {"template", template_name}, {"result", result}});
  }
}

void ClusterMetrics::CountWarmClaim(const std::string& ns, const std::string& template_name, bool hit) {
  pool_claims_.Add({{"namespace", ns}, {"template", template_name}, {"result", hit ? "hit" : "miss"}}).Increment();
}

void ClusterMetrics::ForgetTemplate(const std::string& ns, const std::string& template_name) {
  pool_ready_.Remove(&pool_ready_.Add({{"namespace", ns}, {"template", template_name}}));
  for (const char* result : {"hit", "miss"}) {
    pool_claims_.Remove(&pool_claims_.Add({{"namespace", ns}, {"template", template_name}, {"result", result}}));
  }
}

}  // namespace stasis
