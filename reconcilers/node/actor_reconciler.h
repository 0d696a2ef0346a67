// The node agent's reconciler: drives each Actor bound to this node through the state machine
// of DESIGN.md §6 with a RuntimeDriver, keeping snapshots on disk (SnapshotStore), the node's
// Workers (NodeWorkers) and the Actor's status in step. What to do is decided by one pure
// function (transitions.h); this class reads, and carries the decision out: checkpoint.cc,
// resume.cc, recovery.cc and status_writer.cc hold the actions, actor_reconciler.cc the loop.
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
//  - An error of the host (host_errors.h) in a start, resume, checkpoint or commit is the
//    transition's condition with a Host* reason and a Warning Event (once per new reason or
//    message), retried with backoff at most host_error_attempts times per generation; a
//    permanent one fails a start or resume. It never costs a sandbox or a snapshot.
//  - Only a complete (renamed, with its manifest) snapshot becomes status.latestSnapshot; a
//    Pause snapshot's checksums and fsyncs may follow it in the background (snapshot_store.h).
//  - A checkpoint starts only if the snapshot's file system has room for the sandbox's memory
//    and a margin (CheckpointFits); a restore reads only the image directory derived from the
//    actor's names, of a manifest recording its uid, a committed one verified first
//    (SnapshotStore::CheckForRestore): nothing in the status is taken for a path.
//  - The worker is claimed before the sandbox starts and freed after it has stopped: a sandbox
//    that still lives (-leave-running, then frozen; or frozen for Data) is deleted only once
//    its snapshot is complete (a failed completion thaws it: RUNNING), before the
//    PAUSED/SUSPENDED write; the stopped sandbox of a Direct checkpoint after it, off the pause's path — a GPU
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

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/actor.h"
#include "base/clock.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "controller/reconciler.h"
#include "images/image_store.h"
#include "snapshots/data_dirs.h"
#include "reconcilers/node/host_memory.h"
#include "reconcilers/node/node_workers.h"
#include "runtimes/bundle_confinement.h"
#include "runtimes/gpu/gpu_discovery.h"
#include "runtimes/runtime_driver.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "reconcilers/node/stray_state.h"
#include "reconcilers/node/transition_retries.h"
#include "reconcilers/node/transitions.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

// Under --root: GPU actors' derived bundles, <root>/gpu-bundles/<sandbox id>/. Never the
// operators' bundle directory (the DaemonSet's /var/lib/stasis/bundles is <root>/bundles): only
// what the agent made there is removed.
inline constexpr char kGpuBundlesDir[] = "gpu-bundles";
// Under --root: the bundles of actors started from images (config.json only; the rootfs is the
// image's, in the image cache), <root>/image-bundles/<sandbox id>/.
inline constexpr char kImageBundlesDir[] = "image-bundles";

struct ActorReconcilerOptions {
  std::string node;
  std::string root;  // --root: run/, logs/, snapshots/ and gpu-bundles/ live under it
  // Where actors' bundles may be (--bundle-root): checked before any sandbox starts and before
  // a Data snapshot reads or writes the bundle's directories. Empty: every bundle is refused.
  BundleRoots bundle_roots;
  // How often a RUNNING actor's sandbox is checked for life.
  std::chrono::milliseconds liveness_period{std::chrono::seconds(10)};
  // How soon a GPU preflight that failed is tried again (the actor keeps running meanwhile).
  std::chrono::milliseconds preflight_retry{std::chrono::seconds(30)};
  // Backoff of a checkpoint that failed while the sandbox survived, and of a resume that failed
  // transiently: first retry after `retry_base`, doubling per failure up to `retry_max`.
  std::chrono::milliseconds retry_base{std::chrono::seconds(1)};
  std::chrono::milliseconds retry_max{std::chrono::minutes(5)};
  // Consecutive host errors (host_errors.h: an unwritable directory, a full disk) after which
  // a transition is no longer retried at that generation (--host-error-attempts); a new
  // generation tries again. A permanent host error (a path too long) is not retried at all.
  int host_error_attempts = 5;
  // When a Pause snapshot's files reach the disk, and a Full one's are hashed
  // (--pause-snapshot-sync): kDeferred, after the PAUSED write (snapshot_store.h says why
  // nothing is lost); kSynced, before it.
  Durability pause_durability = Durability::kDeferred;
  // A resume's Worker claim and RESUMING write beside its restore, the intent record on the
  // node's disk first (resume_overlap.cc; --resume-writes overlapped), or both before it (serial).
  bool overlap_resume_writes = true;
  // Free space a checkpoint must leave on the snapshot's file system beyond the image it is
  // expected to write (the sandbox's memory): CheckpointFits (transitions.h).
  int64_t checkpoint_space_margin = int64_t{64} << 20;
  // The device memory in use on a GPU actor's GPUs (by UUID) at checkpoint time, which a CUDA
  // checkpoint copies into the image: also part of what must fit. nvidia-smi by default.
  std::function<Result<int64_t>(const std::vector<std::string>& uuids)> gpu_memory_used =
      [](const std::vector<std::string>& uuids) { return GpuMemoryUsed(uuids); };
  // The host memory available (/proc/meminfo's MemAvailable by default): a GPU checkpoint copies
  // its device memory there first, and must leave checkpoint_memory_margin more.
  std::function<Result<int64_t>()> host_memory_available = [] { return MemAvailableBytes(); };
  int64_t checkpoint_memory_margin = int64_t{256} << 20;
  // GPU actors (docs/gpu.md): the CDI spec directories read at every GPU run or restore (a
  // later directory wins), the CDI kind of the node's GPUs (devices named by UUID), and the
  // project's cuda-checkpoint helper device.
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string gpu_cdi_kind = "nvidia.com/gpu";
  std::string cuda_checkpoint_cdi_device = "stasis.dev/cuda-checkpoint=helper";
  // Actors from images (spec.image): the node's image cache, or nullptr (such actors are
  // refused with BadImage); and the digests the node's actors and snapshots use, which the
  // cache never evicts (asked after each pull).
  images::ImageStore* image_store = nullptr;
  std::function<std::set<std::string>()> images_in_use;
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

  // Reads (the informer's copy, a quorum read when that cannot decide), decides
  // (transitions.h) and acts, one step at a time.
  Result<ReconcileOutcome> Reconcile(const Request& request) override;

  // Restart recovery, after the actor cache has synced: deletes sandboxes and local snapshots
  // of actors that no longer exist or are no longer bound here, and frees workers held by
  // actors that should not hold one. Partial snapshot directories are removed first.
  [[nodiscard]] Status RecoverAtStartup();

  // Whether this node is draining (api/node_drain.h), from the agent's Node informer: while it
  // is, every actor here is decided as if it asked for Suspended (transitions.h). The caller
  // requeues the node's actors when it changes. Returns the value it had.
  bool SetNodeDraining(bool draining) { return draining_.exchange(draining); }

  // Where an actor's runtime state lives on this node: under `recorded_id` (status.sandboxID)
  // when the actor has one, else under SandboxIdFor(ns, name) (sandbox_id.h).
  SandboxRef SandboxFor(const std::string& ns, const std::string& name,
                        const std::string& recorded_id = "") const;

 private:
  struct Ctx;  // one reconcile's working copy of the actor and what was observed of it

  // actor_reconciler.cc: read → decide → act.
  Result<ReconcileOutcome> ReconcileSteps(const Request& request);
  bool OwnedHere(const api::Actor& a) const;
  RuntimeDriver* DriverFor(api::Runtime runtime) const;
  Ctx NewCtx(const api::Actor& a, const Request& request, ActorSource source);
  // `a` through the resume intent record beside `ref`'s root when it still applies
  // (resume_intent.h): true when it did. root_exists: whether that root exists.
  static bool ThroughIntent(const SandboxRef& ref, bool root_exists, api::Actor& a);
  // A quorum read replaces c's actor and observations; false: nothing to act on (gone, or
  // unreadable until it changes). `unsettled`: the actor may hold a worker it should not.
  [[nodiscard]] Result<bool> ReadQuorum(Ctx& c, const Request& request, bool unsettled);
  [[nodiscard]] Status Observe(Ctx& c, Step step);
  [[nodiscard]] Status Prepare(Ctx& c, Step step);
  Result<ReconcileOutcome> Act(Ctx& c, const Decision& d);
  // An Event and a log line when the drain chose the step (ChosenByDrain, transitions.h).
  void ReportDrain(Ctx& c, const Decision& d);
  Result<ReconcileOutcome> RemoveOrphan(const Request& request);
  // The quorum read before anything of an actor missing from the cache is removed
  // (stray_state.h); `live` gets the actor when it exists.
  StrayLookup LookUpStray(const std::string& ns, const std::string& name, nlohmann::json* live);
  // A Warning Event (LocalStateKept) and a log line: the actor left this node with state here.
  void ReportKeptState(const std::string& key, const nlohmann::json& live);
  SandboxRef SandboxWithId(const std::string& id) const;
  // Removes the sandbox's runsc root, its owner file and its GPU bundle directory.
  void RemoveSandboxFiles(const SandboxRef& ref);
  // The sandbox's runsc root and the owner file beside it, once runsc has deleted the sandbox.
  static void RemoveSandboxRoot(const SandboxRef& ref);
  // Deletes ref's sandbox with every driver (for a sandbox whose actor, and runtime, is gone).
  [[nodiscard]] Status DeleteAnyRuntime(const SandboxRef& ref);
  Result<ReconcileOutcome> Delete(Ctx& c);
  Result<ReconcileOutcome> FailActor(Ctx& c, const std::string& reason, const std::string& message);
  Result<ReconcileOutcome> RestNeverStarted(Ctx& c);
  Result<ReconcileOutcome> WatchLiveness(Ctx& c);
  Result<ReconcileOutcome> WriteObservedGeneration(Ctx& c);

  // checkpoint.cc: RUNNING → PAUSED / SUSPENDED, and PAUSED → SUSPENDED.
  Result<ReconcileOutcome> Checkpoint(Ctx& c, api::SnapshotTrigger trigger);
  // A GPU actor's preflight, before anything is frozen: nullopt when it passed.
  std::optional<Result<ReconcileOutcome>> PreflightOrKeepRunning(Ctx& c);
  [[nodiscard]] Status Preflight(Ctx& c);
  // A Data snapshot's directories, resolved before anything starts; the failure is final here.
  Result<std::vector<DataDir>> ResolveDataDirsOrKeepRunning(Ctx& c);
  // A Data snapshot's checkpoint: freeze the sandbox, archive its data directories into
  // `image_dir`; on a failed archive thaw it (the actor runs on) and return the failure.
  [[nodiscard]] Status CheckpointData(Ctx& c, const std::vector<DataDir>& dirs,
                                      const std::string& image_dir, std::chrono::milliseconds deadline);
  Result<ReconcileOutcome> CheckpointFailed(Ctx& c, const Status& failure);
  // A checkpoint refused or failed with nothing frozen (the snapshot's directory could not be
  // made, no room for it) or thawed again: RUNNING, CheckpointFailed=True with `reason` (or a
  // Host* one), retried with backoff.
  Result<ReconcileOutcome> RefusedBeforeFreeze(Ctx& c, const Status& failure, const char* reason);
  // The free-space check before a checkpoint (CheckpointFits): nullopt when it may go ahead.
  // The device memory in use on a GPU actor's GPUs (0 for others, or when unknown).
  int64_t GpuImageBytes(Ctx& c);
  std::optional<Result<ReconcileOutcome>> RefuseCheckpointWithoutSpace(Ctx& c, int64_t gpu_bytes);
  std::optional<Result<ReconcileOutcome>> RefuseCheckpointWithoutHostMemory(Ctx& c, int64_t gpu_bytes);
  struct Checkpointed;  // what a successful checkpoint hands to its completion
  Result<ReconcileOutcome> CompleteCheckpoint(Ctx& c, const Checkpointed& ck);
  // Writes the snapshot's manifest (completion); removes the image when that fails.
  Result<SnapshotManifest> CompleteSnapshot(Ctx& c, const Checkpointed& ck);
  // The GPU a CUDA checkpoint of this actor is taken on (its worker's, from this node's
  // discovery); empty when the identity is not known.
  SnapshotGpu TakenOn(const Ctx& c) const;
  // OK when the snapshot can be restored for this actor on this worker: the root filesystem it
  // was taken on, and for a CUDA checkpoint the GPU model and driver. kFailedPrecondition
  // (snapshot_image_mismatch, snapshot_gpu_mismatch) otherwise.
  Status CheckSnapshotFits(const Ctx& c, const SnapshotManifest& m, const api::Worker& worker) const;
  // The completion failed: a sandbox still alive is thawed and runs on; a stopped one is cleaned.
  Result<ReconcileOutcome> SnapshotNotCompleted(Ctx& c, const Checkpointed& ck, const Status& failure);
  // Commits a just-completed Suspend snapshot; on failure it stays local (commit_failure set).
  api::Snapshot CommitJustCompleted(const SnapshotManifest& m, api::Snapshot local,
                                    Status* commit_failure);
  // Deletes the checkpointed sandbox when `step` is the one planned for it.
  void DeleteSandboxIfAt(Ctx& c, DeleteAt step, DeleteAt planned, bool* deleted);
  Result<ReconcileOutcome> CommitPaused(Ctx& c);

  // resume.cc: PAUSED / SUSPENDED / FAILED / never started → RUNNING.
  Result<ReconcileOutcome> Resume(Ctx& c);
  // Refusals that need no worker; nullopt when the resume may go ahead.
  std::optional<Result<ReconcileOutcome>> RefuseResume(Ctx& c);
  // Confines spec.bundle (bundle_confinement.h); sets c.bundle_root, or fails the actor with
  // BundleNotAllowed (its snapshot kept). nullopt when the resume may go ahead.
  std::optional<Result<ReconcileOutcome>> RefuseBundle(Ctx& c);
  Result<ReconcileOutcome> ClaimFailed(Ctx& c, const Status& claim);
  // A clone without a snapshot of its own: reads its source (a quorum read, the store's
  // manifests) and chooses the snapshot it restores (clone_source.h) into c.clone, before a
  // worker is claimed; nullopt when the resume may go ahead.
  std::optional<Result<ReconcileOutcome>> ResolveClone(Ctx& c);
  // A start refused before a worker is claimed (an image, a clone's source): the actor rests
  // where it was with Ready=False `reason` and a Warning Event; retried with the resume's
  // backoff when `retry`, else at the next generation.
  Result<ReconcileOutcome> RefuseStart(Ctx& c, const char* reason, const std::string& message, bool retry);
  // Runs spec.hooks.postRestore in the restored sandbox (post_restore_hook_failed when it
  // fails, exits non-zero or outlives its deadline); restore: "clone" | "resume".
  [[nodiscard]] Status RunPostRestoreHook(Ctx& c, const std::string& snapshot_id, const char* restore);
  // After an agent restart that found a restored sandbox running: the hook again, if it has one.
  [[nodiscard]] Status RerunPostRestoreHook(Ctx& c);
  // A committed snapshot (the store's copy) that the start restores is fetched into the cache
  // and checked before a worker is claimed; a failure fails the resume with nothing claimed.
  std::optional<Result<ReconcileOutcome>> FetchBeforeClaim(Ctx& c, api::ActorState resting);
  // The image directory the start restores, from the actor's names (or its clone source's),
  // checked (snapshot_store.h: CheckForRestore); a failure as UnrestorableOrRetry says.
  Result<SnapshotStore::RestoreSource> CheckRestoreSource(const Ctx& c) const;
  // c.a's status as the RESUMING write states it: this node, the worker, the sandbox, and for a
  // clone the snapshot of its source it restores.
  void SetResuming(Ctx& c, const std::string& worker_name);
  // Restores or boots the claimed sandbox (the status says RESUMING).
  [[nodiscard]] Status StartSandbox(Ctx& c, const api::Worker& worker);
  // resume_overlap.cc: StartSandbox while the claim of the reserved `worker` and RESUMING are
  // written on another thread, the intent record (resume_intent.h) on disk first. The start's
  // own status and seconds in `result` and `took`; nullopt when both writes landed, else what
  // the resume returns (the start undone).
  std::optional<Result<ReconcileOutcome>> StartBesideResumingWrite(Ctx& c, const api::Worker& worker, Status& result,
                                                                   double& took);
  // Deletes a sandbox whose RESUMING write (or worker claim) failed and gives back the worker
  // when its claim had landed.
  void UndoStart(Ctx& c, const api::Worker& worker, bool claimed, const Status& started);
  Result<ReconcileOutcome> ResumeFailed(Ctx& c, api::ActorState resting, const Status& result);
  // Verifies a Data snapshot against its manifest and unpacks its directories (data_dirs.h).
  [[nodiscard]] Status RestoreData(Ctx& c, const api::Snapshot& snap, std::chrono::milliseconds deadline);
  // Writes the runtime bundle of a GPU actor for the worker it claimed (gpu_bundle.h); the
  // directory is <root>/gpu-bundles/<sandbox id>.
  Result<std::string> PrepareGpuBundle(const Ctx& c, const api::Worker& worker);
  std::string GpuBundleDir(const SandboxRef& ref) const;

  // finish_restore.cc: a CUDA snapshot's restore, after `runsc restore` returned and RUNNING
  // was written with Restored=False (restore_readiness.h): waits for the runtime to finish it,
  // then writes Restored=True and Ready=True; a restore that fails there is a failed resume.
  struct RestoreStarted {  // when this agent ran the restore itself (not after a restart)
    Clock::TimePoint at;
    std::string trigger;  // of the snapshot restored: the restore_usable histogram's label
  };
  Result<ReconcileOutcome> FinishRestore(Ctx& c, const std::optional<RestoreStarted>& started);

  // actor_image.cc: an actor from an image — the image made present and its bundle written
  // before a worker is claimed; nullopt when the resume may go ahead (or there is no image).
  std::optional<Result<ReconcileOutcome>> PrepareImage(Ctx& c);
  // The registry credentials of the actor's imagePullSecrets (unreadable ones noted in c).
  std::vector<images::RegistryAuth> PullSecretAuths(Ctx& c);
  [[nodiscard]] Status WriteImageBundle(Ctx& c, const images::LocalImage& image);
  std::string ImageBundleDir(const SandboxRef& ref) const;
  // A pull or bundle that failed: a condition and an Event; retried with backoff when `retry`.
  Result<ReconcileOutcome> RefuseImage(Ctx& c, const char* reason, const std::string& message, bool retry);

  // recovery.cc: *ING statuses left by an agent that died, dead sandboxes, restart recovery.
  Result<ReconcileOutcome> RecoverResumed(Ctx& c);
  Result<ReconcileOutcome> RestartResume(Ctx& c);
  Result<ReconcileOutcome> RecoverCheckpointInterrupted(Ctx& c);
  // Rests the actor on a complete snapshot its interrupted checkpoint left (sandbox deleted,
  // worker freed); the caller sets the conditions and writes.
  [[nodiscard]] Status AdoptSnapshot(Ctx& c, api::Snapshot snapshot, api::ActorState resting);
  Result<ReconcileOutcome> AdoptLocalSnapshot(Ctx& c);
  Result<ReconcileOutcome> AdoptCommittedSnapshot(Ctx& c);
  [[nodiscard]] Status ListSnapshots(Ctx& c);
  [[nodiscard]] Status RemoveLeftoverSandbox(Ctx& c);
  // The sandbox is gone or suspect: remove it, free the worker, SUSPENDED or FAILED; counted in
  // stasis_forced_cleanups_total under the condition reason's metric spelling.
  Result<ReconcileOutcome> ForceClean(Ctx& c, const std::string& condition_reason,
                                      const std::string& message);
  void RemoveLeftoverSandboxes();
  void RemoveSnapshotsOfDeletedActors();

  // host_failures.cc: a failed transition's reason and its retries, host errors bounded.
  struct FailureVerdict;
  FailureVerdict JudgeFailure(Ctx& c, RetryOp op, const Status& failure);
  // The condition reason of a failed transition: a Host* reason for an error of the node, else
  // the failure class CamelCased. Its MetricReason is the failure's metric label.
  std::string FailureReason(const Status& failure) const;
  // A reconcile cut short by an exception of the host: a Warning Event on the actor.
  void ReportHostException(const Request& request, const Status& failure);
  // Sets the failure's condition (its message with the verdict's note); returns whether it is
  // news worth a Warning Event: always for the runtime's failures, for a host error only when
  // the condition's reason or message changed (a retry that fails the same way says nothing).
  bool SetFailureCondition(Ctx& c, const char* type, bool status, const FailureVerdict& v,
                           const std::string& message);

  // status_writer.cc: the Actor's status, finalizer, conditions and Events.
  [[nodiscard]] Status WriteStatus(Ctx& c);
  [[nodiscard]] Status SetFinalizer(Ctx& c, bool present);
  [[nodiscard]] Status Adopt(Ctx& c, const nlohmann::json& written);
  void SetCondition(Ctx& c, const std::string& type, bool status, const std::string& reason,
                    const std::string& message);
  void Event(Ctx& c, bool warning, const std::string& reason, const std::string& message);
  api::Snapshot ToSnapshot(const SnapshotManifest& m, const std::string& location,
                           const std::string& node) const;

  ActorReconcilerOptions options_;
  KubeClient& client_;
  ActorLookup actors_;
  RuntimeDrivers drivers_;
  SnapshotStore& snapshots_;
  NodeWorkers& workers_;
  SnapshotMetrics& metrics_;
  EventRecorder* events_;
  Clock& clock_;
  TransitionRetries retries_;
  std::atomic<bool> draining_{false};
};

}  // namespace stasis
