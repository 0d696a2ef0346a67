// The cluster controller's reconciler (one Actor key at a time): guarantees that no actor stays
// stuck and no worker stays held, even when a node agent is dead, and binds actors that want
// to run to a node with a free worker.
//
//  - Stuck (DetectStuck: deadline overrun, or the node's heartbeat expired while the actor
//    occupied it): free the worker first (a CAS on the Worker), then move the actor to
//    STATUS_SUSPENDED with its last good snapshot (STATUS_FAILED without one), condition
//    Stuck=True with the reason, an Event, stasis_forced_cleanups_total{reason}. The node agent,
//    when it returns, removes the leftover sandbox of an actor it finds at rest.
//  - Deletion: when the actor's node is lost (or it never had one), the finalizer is removed
//    here, after freeing the worker; the returning agent deletes what it finds of it.
//  - Binding: an unpinned actor that wants Running and has no node (or a lost one, or waits
//    for a worker on a full node) gets status.nodeName and the label stasis.dev/node: a paused
//    actor only to the node that holds its snapshot, others to the live node with the most
//    free workers. Workers are claimed by the node agent (CAS), so a worker is never
//    double-booked, also across a leader failover.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "api/actor.h"
#include "controller/clock.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "controller/reconciler.h"
#include "reconcilers/cluster_metrics.h"

namespace stasis {

struct ClusterReconcilerOptions {
  std::chrono::seconds grace{30};
  std::string lease_namespace = "stasis-system";
  // How often actors that could become stuck are looked at again.
  std::chrono::milliseconds recheck{std::chrono::seconds(5)};
};

class ClusterReconciler : public Reconciler {
 public:
  ClusterReconciler(ClusterReconcilerOptions options, KubeClient& client, const ObjectStore& actors,
                    const ObjectStore& workers, const ObjectStore& leases, ClusterMetrics& metrics,
                    EventRecorder* events, Clock& clock = RealClock::Get());
  Result<ReconcileOutcome> Reconcile(const Request& request) override;

  // nullopt when the node has never had a heartbeat Lease.
  std::optional<bool> NodeAlive(const std::string& node) const;
  // Recomputes stasis_actors{status} and stasis_actors_stuck{status} from the cache.
  void UpdateGauges();

 private:
  Result<ReconcileOutcome> ForceClean(api::Actor& a, const std::string& reason,
                                      const std::string& message);
  Result<ReconcileOutcome> Bind(api::Actor& a);
  Status FreeWorkersOf(const api::Actor& a);
  Status RemoveFinalizer(const api::Actor& a);
  api::Time Now() const;

  ClusterReconcilerOptions options_;
  KubeClient& client_;
  const ObjectStore& actors_;
  const ObjectStore& workers_;
  const ObjectStore& leases_;
  ClusterMetrics& metrics_;
  EventRecorder* events_;
  Clock& clock_;
};

}  // namespace stasis
