// The node agent's reconciler: drives each Actor bound to this node through the state machine
// of DESIGN.md §6 with a RuntimeDriver, keeping snapshots on disk (SnapshotStore), the node's
// Workers (NodeWorkers) and the Actor's status in step.
//
// Invariants it keeps:
//  - Every *ING status is written, with transitionStartTime, before the step it announces, and
//    replaced before Reconcile returns (the driver calls carry the actor's deadlines), so an
//    *ING status seen at the start of a reconcile means an earlier agent died mid-step; it is
//    recovered from the sandbox's state and the snapshot directories, never left as it is.
//  - A checkpoint that leaves the sandbox dead is never retried: the sandbox is force-deleted,
//    the partial image removed, the worker freed, and the actor goes to STATUS_SUSPENDED with
//    its previous snapshot (STATUS_FAILED without one), with a condition quoting the runtime.
//  - A checkpoint that fails while the sandbox lives leaves the actor RUNNING (CheckpointFailed).
//  - A GPU preflight failure never checkpoints and never stops the actor.
//  - Only a complete (renamed, with its manifest) snapshot becomes status.latestSnapshot; a
//    Pause snapshot's checksums and fsyncs may follow it in the background (snapshot_store.h).
//  - The worker is claimed before the sandbox starts and freed after it has stopped: a sandbox
//    that still runs (-leave-running) or is frozen (Data) is deleted before the PAUSED/SUSPENDED
//    write; the stopped sandbox of a Direct checkpoint after it, off the pause's path — a GPU
//    one before the worker is given back (it may hold the device until torn down), a CPU one
//    after (what either leaves on a crash, the next reconcile deletes). The worker is given
//    back right after that write, also off the path: a worker an actor at rest still holds (the
//    release failed, or the agent died) is freed by the next quorum read or restart recovery.
//  - A Data snapshot (scope Data) archives the declared dataDirs of the frozen sandbox
//    (data_dirs.h); a failed archive thaws it and the actor runs on. Its resume unpacks them and
//    boots fresh from the bundle.
//  - Decisions are made on a quorum read of the actor, or — a pause or resume started from the
//    informer's copy — on the cache with its resourceVersion as the first write's precondition,
//    so a stale copy costs a 409 and a quorum read, never a wrong transition.
//  - Status is written as a merge patch carrying the resourceVersion read: a concurrent writer
//    (the cluster controller's forced cleanup) makes it fail with 409 rather than be overwritten.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "api/actor.h"
#include "base/clock.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "controller/reconciler.h"
#include "snapshots/data_dirs.h"
#include "reconcilers/node/node_workers.h"
#include "runtimes/runtime_driver.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

struct ActorReconcilerOptions {
  std::string node;
  std::string root;  // --root: run/, logs/ and snapshots/ live under it
  // How often a RUNNING actor's sandbox is checked for life.
  std::chrono::milliseconds liveness_period{std::chrono::seconds(10)};
  // How soon a GPU preflight that failed is tried again (the actor keeps running meanwhile).
  std::chrono::milliseconds preflight_retry{std::chrono::seconds(30)};
  // Backoff of a checkpoint that failed while the sandbox survived, and of a resume that failed
  // transiently: first retry after `retry_base`, doubling per failure up to `retry_max`.
  std::chrono::milliseconds retry_base{std::chrono::seconds(1)};
  std::chrono::milliseconds retry_max{std::chrono::minutes(5)};
  // When a Pause snapshot's files reach the disk, and a Full one's are hashed
  // (--pause-snapshot-sync): kDeferred, after the PAUSED write (snapshot_store.h says why
  // nothing is lost); kSynced, before it.
  Durability pause_durability = Durability::kDeferred;
  // GPU actors (docs/gpu.md): the CDI spec directories read at every GPU run or restore (a
  // later directory wins), the CDI kind of the node's GPUs (devices named by UUID), and the
  // project's cuda-checkpoint helper device.
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string gpu_cdi_kind = "nvidia.com/gpu";
  std::string cuda_checkpoint_cdi_device = "stasis.dev/cuda-checkpoint=helper";
};

// The drivers of the runtimes this node runs (spec.runtime); nullptr where it runs none.
struct RuntimeDrivers {
  RuntimeDriver* gvisor = nullptr;
  RuntimeDriver* microvm = nullptr;
};

// Finds an actor by key in the agent's caches (it watches its actors through two field
// selectors, spec.nodeName and status.nodeName, so there are two stores to look in).
using ActorLookup = std::function<ObjectPtr(const std::string& key)>;

class ActorReconciler : public Reconciler {
 public:
  ActorReconciler(ActorReconcilerOptions options, KubeClient& client, ActorLookup actors,
                  RuntimeDriver& driver, SnapshotStore& snapshots, NodeWorkers& workers,
                  SnapshotMetrics& metrics, EventRecorder* events, Clock& clock = RealClock::Get());
  ActorReconciler(ActorReconcilerOptions options, KubeClient& client, ActorLookup actors,
                  RuntimeDrivers drivers, SnapshotStore& snapshots, NodeWorkers& workers,
                  SnapshotMetrics& metrics, EventRecorder* events, Clock& clock = RealClock::Get());

  Result<ReconcileOutcome> Reconcile(const Request& request) override;

  // Restart recovery, after the actor cache has synced: deletes sandboxes and local snapshots
  // of actors that no longer exist or are no longer bound here, and frees workers held by
  // actors that should not hold one. Partial snapshot directories are removed first.
  Status RecoverAtStartup();

  // Where an actor's runtime state lives on this node.
  SandboxRef SandboxFor(const std::string& ns, const std::string& name) const;

 private:
  struct Ctx;  // one reconcile's working copy of the actor

  bool OwnedHere(const api::Actor& a) const;
  // The outcome of a reconcile that needs no read: the cached actor, its spec observed, is at
  // rest here with nothing left on disk, or runs as wanted with its sandbox running. Otherwise
  // nullopt: decide on a quorum read.
  std::optional<ReconcileOutcome> NothingToDo(const api::Actor& a, const Request& request);
  // A transition the cached actor asks for — RUNNING to Paused/Suspended, PAUSED/SUSPENDED to
  // Running — started without a quorum read: the first status write carries the cached
  // resourceVersion, so it is the quorum check. nullopt when the cache cannot decide, or when
  // that first write met a conflict (the cache was stale; nothing was written): decide on a
  // quorum read. `claimed`: a worker was claimed before the conflict.
  std::optional<Result<ReconcileOutcome>> StartFromCache(const api::Actor& a,
                                                         const Request& request, bool* claimed);
  RuntimeDriver* DriverFor(api::Runtime runtime) const;
  // Deletes ref's sandbox with every driver (for a sandbox whose actor, and runtime, is gone).
  Status DeleteAnyRuntime(const SandboxRef& ref);
  Result<ReconcileOutcome> Delete(Ctx& c);
  Result<ReconcileOutcome> Resume(Ctx& c);
  Result<ReconcileOutcome> Checkpoint(Ctx& c, api::SnapshotTrigger trigger);
  // A Data snapshot's checkpoint: freeze the sandbox, archive its data directories into
  // `image_dir`; on a failed archive thaw it (the actor runs on) and return the failure.
  Status CheckpointData(Ctx& c, const std::vector<DataDir>& dirs, const std::string& image_dir,
                        std::chrono::milliseconds deadline);
  Result<ReconcileOutcome> CommitPaused(Ctx& c);
  // Verifies a Data snapshot against its manifest and unpacks its directories (data_dirs.h).
  Status RestoreData(Ctx& c, const api::Snapshot& snap, std::chrono::milliseconds deadline);
  Result<ReconcileOutcome> RecoverInterrupted(Ctx& c);
  Result<ReconcileOutcome> CheckAlive(Ctx& c);
  // The sandbox is gone or suspect: remove it, free the worker, SUSPENDED or FAILED.
  Result<ReconcileOutcome> ForceClean(Ctx& c, const std::string& reason,
                                      const std::string& condition_reason,
                                      const std::string& message);
  Status Preflight(Ctx& c);
  // Writes the runtime bundle of a GPU actor for the worker it claimed (gpu_bundle.h); the
  // directory is <root>/bundles/<sandbox id>.
  Result<std::string> PrepareGpuBundle(const Ctx& c, const api::Worker& worker);
  std::string GpuBundleDir(const SandboxRef& ref) const;
  Status WriteStatus(Ctx& c);
  Status SetFinalizer(Ctx& c, bool present);
  Status Adopt(Ctx& c, const nlohmann::json& written);
  void SetCondition(Ctx& c, const std::string& type, bool status, const std::string& reason,
                    const std::string& message);
  void Event(Ctx& c, bool warning, const std::string& reason, const std::string& message);
  api::Snapshot ToSnapshot(const SnapshotManifest& m, const std::string& location,
                           const std::string& node) const;

  // Transitions that failed while the actor could stay where it was — a checkpoint the sandbox
  // survived (still RUNNING), a resume that failed transiently (still PAUSED/SUSPENDED) — per
  // operation and actor key: the retry waits until `not_before`. The work queue's own backoff
  // cannot do this: each attempt writes status, and those watch events re-enqueue the key at
  // once. Reset by a new generation (the user changed the spec) and by a success.
  enum class RetryOp { kCheckpoint, kResume };
  struct Retry {
    int64_t generation = 0;
    int failures = 0;
    Clock::TimePoint not_before;
  };
  // How long this operation on this actor must still wait (zero: go ahead).
  std::chrono::milliseconds RetryWait(const Ctx& c, RetryOp op);
  void NoteFailure(const Ctx& c, RetryOp op);
  void ClearRetry(const Ctx& c, RetryOp op);
  std::mutex retry_mu_;
  std::unordered_map<std::string, Retry> retries_;  // by RetryKey
  // Actor keys that may hold a worker they should not: a resume started from a stale cache
  // claimed one before its refused first write, or the release after a PAUSED/SUSPENDED write
  // failed. Settled (the worker freed if the actor is at rest) by the next quorum read; until
  // then the actor is never decided from the cache. Guarded by retry_mu_.
  std::set<std::string> unsettled_workers_;
  bool Unsettled(const std::string& key);
  void SetUnsettled(const std::string& key, bool unsettled);

  ActorReconcilerOptions options_;
  KubeClient& client_;
  ActorLookup actors_;
  RuntimeDrivers drivers_;
  SnapshotStore& snapshots_;
  NodeWorkers& workers_;
  SnapshotMetrics& metrics_;
  EventRecorder* events_;
  Clock& clock_;
};

// "nvproxy_live_clients" → "NvproxyLiveClients": runtime failure classes as condition reasons.
std::string ConditionReason(const std::string& failure_class);

}  // namespace stasis
