// The node agent's state machine as pure functions: what it has observed of one actor (the
// actor object, what the runtime says of its sandbox, what is on disk) in, the next step out.
// Nothing here reads a clock, the API, the runtime or the disk; actor_reconciler.cc gathers
// the observations, asks Decide, and carries the step out (read → decide → act), the way the
// kubelet's computePodActions decides and SyncPod acts.
//
// Decide is called in a loop: a step is either an observation it still needs (read the actor
// from the API server, ask the runtime for the sandbox's state, list the snapshots on disk), a
// preparation after which it decides again (add the finalizer, remove a leftover sandbox, thaw
// a frozen one, settle a worker), or the one action of this reconcile. Observations are asked
// for only where the answer changes the step: a pause decided on the informer's copy asks the
// runtime nothing (the checkpoint itself fails on a sandbox that is not running).
//
// Invariants (tested in tests/unit/transitions_test.cc for every status × desired state ×
// sandbox state × snapshot on disk):
//  - every (status, desired state) pair ends in an action or in "nothing to do" at rest;
//  - an *ING status seen at a quorum read is recovered from the sandbox and the snapshots,
//    never left as it is;
//  - the informer's copy decides only "nothing to do", "still running" and the start of a pause,
//    suspend or resume; everything else is decided on a quorum read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "api/actor.h"
#include "base/status.h"
#include "runtimes/runtime_driver.h"

namespace stasis {

// Where the actor object came from: the informer's cache, or a quorum read.
enum class ActorSource { kCache, kQuorum };

// Everything Decide looks at. The optional fields are observations that cost a subprocess or
// a directory walk: nullopt means "not asked yet", and Decide asks for them only when needed.
struct Observation {
  ActorSource source = ActorSource::kCache;
  // The actor object.
  api::ActorState status = api::ActorState::kUnspecified;
  api::DesiredState desired = api::DesiredState::kRunning;
  bool owned_here = true;           // pinned to this node, or bound to it
  bool being_deleted = false;       // deletionTimestamp set
  bool has_finalizer = true;        // the agent's finalizer is on it
  bool generation_observed = true;  // status.observedGeneration == metadata.generation
  bool transition_start_known = false;  // status.transitionStartTime is set
  // RUNNING, and the restore's last part (a CUDA snapshot's, after `runsc restore` returned)
  // was not seen to finish: Restored=False Restoring (restore_readiness.h).
  bool restore_pending = false;
  // This node.
  bool driver_available = true;     // the node runs spec.runtime
  bool sandbox_root_exists = false;  // <root>/run/<sandbox id> is on disk
  bool checkpoint_backoff = false;  // a checkpoint the sandbox survived waits out its backoff
  bool resume_backoff = false;      // a transiently failed resume waits out its backoff
  bool unsettled_worker = false;    // may hold a worker it should not (actor_reconciler.h)
  bool thaw_failed = false;         // a frozen sandbox was thawed this reconcile and stayed frozen
  // This node is draining (api/node_drain.h): every actor here is decided as if it asked for
  // Suspended, so that it rests in the store, from where the binder sends it elsewhere.
  bool node_draining = false;
  // Observed on demand.
  std::optional<bool> spec_valid;  // api::ValidateActor found nothing (costs a schema walk)
  std::optional<SandboxState> sandbox;
  // A complete snapshot on this node newer than status.latestSnapshot (a checkpoint finished
  // before the agent died).
  std::optional<bool> newer_local_snapshot;
  // A committed snapshot this suspend took (newer than latestSnapshot, trigger Suspend, taken
  // after transitionStartTime): the commit finished, the status write did not.
  std::optional<bool> committed_by_transition;
};

enum class Step {
  // Observations: gather, then decide again.
  kReadQuorum,     // the cache cannot decide: read the actor from the API server
  kValidateSpec,   // validate the spec against the schema and cross-field rules
  kProbeSandbox,   // ask the runtime for the sandbox's state
  kListSnapshots,  // list this actor's local and committed snapshots
  // Preparations: act, then decide again.
  kFreeUnsettledWorker,    // at rest yet maybe holding a worker: free it
  kForgetUnsettledWorker,  // running or transitioning: the worker it holds is its own
  kAddFinalizer,
  kRemoveLeftoverSandbox,  // at rest, yet a sandbox is left (a forced cleanup while away)
  kThawFrozenSandbox,      // frozen for a Data archive when the agent died, no snapshot made
  // Actions: the last step of a reconcile.
  kNothing,                 // not ours, or at rest as wanted
  kWriteObservedGeneration,  // at rest as wanted; only the new generation to acknowledge
  kWatchLiveness,           // running as wanted: check again after the liveness period
  kFinishRestore,           // RUNNING, restore pending: wait until usable, then Ready (any desired state)
  kDelete,                  // deletion requested: remove everything, drop the finalizer
  kFailInvalidSpec,
  kFailRuntimeUnavailable,
  kRestNeverStarted,        // never ran and not wanted running: SUSPENDED with nothing
  kCheckpoint,              // RUNNING → PAUSED / SUSPENDED (Decision::trigger says which)
  kWaitCheckpointBackoff,
  kResume,                  // PAUSED / SUSPENDED / FAILED / never started → RUNNING
  kWaitResumeBackoff,
  kCommitPaused,            // PAUSED → SUSPENDED: commit the node-local snapshot
  kForceCleanDeadSandbox,   // the sandbox died: clean up, SUSPENDED on the last snapshot or FAILED
  kRecoverResumed,          // RESUMING, and the sandbox runs: the restore had finished
  kRestartResume,           // RESUMING, and it does not: start the resume again
  kRecoverCheckpointInterrupted,  // PAUSING/SUSPENDING, and the workload still runs
  kAdoptLocalSnapshot,      // PAUSING/SUSPENDING: the checkpoint had completed; PAUSED on it
  kAdoptCommittedSnapshot,  // SUSPENDING: the commit had completed; SUSPENDED on it
};

const char* ToString(Step step);

struct Decision {
  Step step = Step::kNothing;
  api::SnapshotTrigger trigger = api::SnapshotTrigger::kPause;  // kCheckpoint only
  bool operator==(const Decision&) const = default;
};

// True for the steps after which Decide is asked again.
bool IsObservation(Step step);
bool IsPreparation(Step step);

Decision Decide(const Observation& o);

// Whether the drain, not the actor's own desired state, made Decide suspend or commit it: the
// user is then told why (an Event NodeDraining).
bool ChosenByDrain(const Observation& o, const Decision& d);

// The status an actor rests in when it is not running: where a resume starts from. PAUSED when
// its latest snapshot is a Pause kept on a node, SUSPENDED for a committed one, FAILED without.
api::ActorState RestingState(const api::Actor& a);

// A checkpoint that failed: whether the workload survived it (RUNNING, retried with backoff)
// or the sandbox is dead or suspect (force-cleaned, never retried). A deadline is suspect even
// if the sandbox still answers: its checkpoint may still hold it frozen.
enum class CheckpointFailure { kSurvived, kSandboxLost };
CheckpointFailure ClassifyCheckpointFailure(const Status& failure, const Result<SandboxState>& after);

// A resume that failed: a bundle or image that cannot work (kInvalidArgument,
// kFailedPrecondition) fails the actor; anything else returns it to where it rested, retried.
bool ResumeFailureIsPermanent(const Status& failure);

// When a successful checkpoint's sandbox is deleted (actor_reconciler.h's invariants say why):
// when it still lives (-leave-running, or frozen for a Data archive), only once its snapshot is
// complete (and, for a Suspend, committed or known uncommittable), before the status write — so
// that a completion that fails (a full disk, an I/O error) leaves it running; for a stopped GPU
// sandbox after the write and before the worker is given back; for a stopped CPU sandbox after
// that.
enum class DeleteAt { kBeforeWrite, kBeforeRelease, kAfterRelease };
DeleteAt SandboxDeleteAfterCheckpoint(bool leave_running, bool data_scope, bool gpu);

// Whether a checkpoint fits on the snapshot's file system: `free_bytes` there must hold the
// image it is expected to write (`expected_bytes`: the sandbox's memory, 0 when unknown) and
// `margin_bytes` more (the manifest, the runtime's own files, what else writes there). Refused,
// nothing is frozen: the actor runs on (CheckpointFailed=True InsufficientSpace).
bool CheckpointFits(int64_t free_bytes, int64_t expected_bytes, int64_t margin_bytes);

// "nvproxy_live_clients" → "NvproxyLiveClients": runtime failure classes as condition reasons.
std::string ConditionReason(const std::string& failure_class);

// The CommitFailed reason for a commit that failed with `failure_class`: the store refused the
// credentials or has no such bucket (a person must fix it), else StoreUnavailable.
const char* CommitFailedReason(const std::string& failure_class);

}  // namespace stasis
