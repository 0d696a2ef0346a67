// The cluster controller's reconciler (one Actor key at a time): guarantees that no actor stays
// stuck and no worker stays held, even when a node agent is dead, and binds actors that want
// to run to a node with a free worker.
//
//  - Stuck (DetectStuck: deadline overrun, or the node's heartbeat expired while the actor
//    occupied it): free the worker first (a CAS on the Worker), then move the actor to
//    STATUS_SUSPENDED with its last good snapshot (STATUS_FAILED without one), condition
//    Stuck=True with the reason, an Event, stasis_forced_cleanups_total{reason} (the reason in
//    snake_case: api::MetricReason). The node agent, when it returns, removes the leftover
//    sandbox of an actor it finds at rest.
//  - Deletion: when the actor's node is lost (or it never had one), the finalizer is removed
//    here, after freeing the worker; the returning agent deletes what it finds of it.
//  - Binding: an unpinned actor that wants Running and has no node (or a lost one, or waits
//    for a worker on a full node) gets status.nodeName and the label stasis.dev/node: a paused
//    actor only to the node that holds its snapshot, others to the live node with the most
//    free workers (Place, placement.h), decided on the cache and written with the cached
//    resourceVersion as the precondition (a conflict: again soon). Workers are claimed by the
//    node agent (CAS), so a worker is never double-booked, also across a leader failover. An
//    actor with no live node that it cannot place gets Ready=False (NoFreeWorker or
//    Unschedulable, the candidates counted) and a FailedBinding Event once per new message; a
//    binding replaces that condition (Ready=False Bound) and is an Event Bound.
//  - Drain: a cordoned or draining node (api/node_drain.h) takes no new actors; an actor at
//    rest on a draining node that wants Running (its agent suspended it) is bound elsewhere.
//  - Retention (with the snapshot store mounted or an object store, and --retain N): once per
//    new latestSnapshot of an actor that is not in a transition, its committed snapshots
//    beyond the newest N and older than --retain-min-age are deleted (SnapshotRetention: never
//    latestSnapshot); one held back by its age is looked at again when it comes of age. A deletion the
//    controller completes also removes the actor's committed snapshots, as the agent would.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/actor.h"
#include "api/node_drain.h"
#include "api/worker.h"
#include "base/clock.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "controller/parse_memo.h"
#include "controller/reconciler.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "reconcilers/cluster/lease_expiry.h"
#include "reconcilers/cluster/placement.h"
#include "reconcilers/cluster/snapshot_retention.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

struct ClusterReconcilerOptions {
  std::chrono::seconds grace{30};
  std::string lease_namespace = "stasis-system";
  // How often actors that could become stuck are looked at again.
  std::chrono::milliseconds recheck{std::chrono::seconds(5)};
  // Committed snapshots kept per actor; nullopt = keep every one. Needs a snapshot store.
  std::optional<int> retain;
  // A committed snapshot younger than this (by its takenAt) is never deleted by retention.
  std::chrono::seconds retain_min_age{0};
  // How soon retention that failed (an unreachable store) is tried again for an actor at rest.
  std::chrono::milliseconds retention_retry{std::chrono::minutes(1)};
};

// Whether Bind may act on this actor: it wants Running, is not pinned, and is at rest (not
// running, not in a transition, not failed).
bool IsBindCandidate(const api::Actor& a);
// An actor-store index holding the bind candidates under kBindCandidate, so that a worker
// event requeues the actors waiting for one instead of every actor.
inline constexpr char kBindCandidateIndex[] = "bind-candidate";
inline constexpr char kBindCandidate[] = "yes";
IndexFunc IndexBindCandidates();
// An actor-store index holding, under kPromised, the actors bound to a node that will claim a
// worker there (wanting Running, holding none, not running): placement counts them against the
// node's free workers. The rest of a fleet — at rest, or running on its worker — never matters
// to a placement, and is never parsed for one.
inline constexpr char kPromisedIndex[] = "promised-a-worker";
inline constexpr char kPromised[] = "yes";
IndexFunc IndexPromised();
// The indexes the cluster reconciler reads from the actors' store (bind candidates, promised
// actors), by name: added to the informer (or, in tests, the store) before it starts.
std::vector<std::pair<std::string, IndexFunc>> ClusterActorIndexes();

class ClusterReconciler : public Reconciler {
 public:
  // store: the snapshot store as mounted where the controller runs, or nullptr when it is not
  // (then there is no retention, and committed snapshots of actors whose deletion the
  // controller completes stay in the store).
  ClusterReconciler(ClusterReconcilerOptions options, KubeClient& client, const ObjectStore& actors,
                    const ObjectStore& workers, const ObjectStore& leases, ClusterMetrics& metrics,
                    EventRecorder* events, Clock& clock = RealClock::Get(),
                    SnapshotStore* store = nullptr);
  Result<ReconcileOutcome> Reconcile(const Request& request) override;

  // nullopt when the node has never had a heartbeat Lease. From the cache: may be stale.
  // Alive until no renewal has been observed for the Lease's duration (lease_expiry.h): the
  // node's renewTime is never compared with this controller's clock.
  std::optional<bool> NodeAlive(const std::string& node) const;
  // The Lease informer's events: each renewal is observed when it arrives.
  void LeaseSeen(const ObjectPtr& lease);
  void LeaseGone(const ObjectPtr& lease);
  // Called when this replica starts leading: no node counts as lost before this replica has
  // had a whole lease duration to see it renew (after an API-server outage long enough to cost
  // the leader its lease, every heartbeat looks expired until the agents reach the server).
  void StartedLeading();
  // Recomputes stasis_actors{status} and stasis_actors_stuck{status} from the cache.
  void UpdateGauges();
  // The cache of v1 Nodes: a cordoned node takes no new actors, and the actors of a draining
  // one are bound elsewhere once its agent has suspended them (api/node_drain.h). Without it
  // (or for a node without a Node object) every node takes actors and none drains.
  void UseNodes(const ObjectStore& nodes) { nodes_ = &nodes; }
  api::NodeDrain DrainOf(const std::string& node) const;

 private:
  // What the cached copy decides, so that most reconciles make no quorum read: kDone with the
  // outcome when there is nothing to write (a recheck at most); kBind when the actor is to be
  // bound, with nothing Reconcile does first (finish a deletion, clean it up as stuck, prune
  // its snapshots): bound from the cache, its resourceVersion the write's precondition;
  // kReadLive when another write may be due, decided again on a quorum read. A stale cache
  // cannot hide work: the newer version's watch event queues the key again.
  struct CachedDecision {
    enum Next { kDone, kBind, kReadLive } next;
    ReconcileOutcome outcome;  // kDone's
  };
  CachedDecision DecideFromCache(const api::Actor& cached);
  // Whether retention has still to run for this actor's latestSnapshot.
  bool PrunePending(const api::Actor& a);
  // reason: the Stuck condition's (a StuckVerdict's).
  Result<ReconcileOutcome> ForceClean(api::Actor& a, const std::string& reason,
                                      const std::string& message);
  Result<ReconcileOutcome> Bind(api::Actor a);
  // What Place needs to place `a`, from the cache; `avoid`: a node whose agent found no free
  // worker.
  PlacementInput PlacementInputFor(const api::Actor& a, const std::string& avoid) const;
  // Ready=False with the placement's reason, and a FailedBinding Event when its message is new.
  Result<ReconcileOutcome> ReportUnplaced(api::Actor& a, const Placement& p);
  Result<ReconcileOutcome> BindTo(const api::Actor& a, const Placement& p);
  // Whether a node the cache says is lost really is: its Lease read from the API server (the
  // cache lags an outage by the informer's reconnect backoff) has expired, and this replica
  // has been leading for at least that lease's duration.
  bool NodeLossConfirmed(const std::string& node);
  Status FreeWorkersOf(const api::Actor& a);
  Status RemoveFinalizer(const api::Actor& a);
  void RemoveCommittedSnapshots(const api::Actor& a);
  // Retention for one actor, at most once per latestSnapshot id; false when it failed.
  // *recheck: when to look again because a snapshot was kept only for its age.
  bool MaybePrune(const api::Actor& a, std::optional<std::chrono::milliseconds>* recheck);
  Time Now() const;

  ClusterReconcilerOptions options_;
  KubeClient& client_;
  const ObjectStore& actors_;
  const ObjectStore& workers_;
  const ObjectStore& leases_;
  ClusterMetrics& metrics_;
  EventRecorder* events_;
  Clock& clock_;
  SnapshotStore* store_;
  const ObjectStore* nodes_ = nullptr;
  // Parses that placement reuses while the cache holds the same objects: every bind needs every
  // Worker and the promised actors, and parsing them all again each time made binding O(fleet).
  mutable ParseMemo<api::Worker> workers_parsed_;
  mutable ParseMemo<api::Actor> promised_parsed_;
  std::atomic<Clock::TimePoint> leading_since_;
  // When each node's Lease was last seen to change (NodeAlive is const: observing is not a
  // change of the reconciler's decisions, only of what it has seen).
  mutable LeaseTracker lease_tracker_;
  std::optional<SnapshotRetention> retention_;
  // Actor key → the latestSnapshot id retention last ran for (a key is reconciled by one
  // worker at a time, but different keys concurrently).
  std::mutex pruned_mu_;
  std::unordered_map<std::string, std::string> pruned_for_;
};

}  // namespace stasis
