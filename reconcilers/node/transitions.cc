#include "reconcilers/node/transitions.h"

#include <algorithm>
#include <cctype>

#include "api/conditions.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using api::ActorState;
using api::DesiredState;
using api::SnapshotTrigger;

Decision Do(Step step) { return Decision{step, SnapshotTrigger::kPause}; }

Decision CheckpointFor(DesiredState desired) {
  return Decision{Step::kCheckpoint,
                  desired == DesiredState::kPaused ? SnapshotTrigger::kPause : SnapshotTrigger::kSuspend};
}

bool AtRestAsWanted(const Observation& o) {
  return (o.status == ActorState::kPaused && o.desired == DesiredState::kPaused) ||
         (o.status == ActorState::kSuspended && o.desired == DesiredState::kSuspended) ||
         o.status == ActorState::kFailed;  // left only by a new generation
}

Decision ResumeOrWait(const Observation& o) {
  return Do(o.resume_backoff ? Step::kWaitResumeBackoff : Step::kResume);
}

// The informer's copy decides what needs no read: an actor at rest as wanted with nothing left
// on disk, a sandbox running as wanted, and the start of a transition (its first status write
// carries the cached resourceVersion, so a stale copy costs a 409 and a quorum read, never a
// wrong transition). Everything else is read.
Decision DecideFromCache(const Observation& o) {
  if (o.unsettled_worker || !o.owned_here || o.being_deleted || !o.has_finalizer) {
    return Do(Step::kReadQuorum);
  }
  // A restore still finishing is decided on a read: the cache may not have its end yet.
  if (o.status == ActorState::kRunning && o.restore_pending) return Do(Step::kReadQuorum);
  if (o.generation_observed && o.status == ActorState::kRunning && o.desired == DesiredState::kRunning) {
    if (!o.driver_available) return Do(Step::kReadQuorum);
    if (!o.sandbox) return Do(Step::kProbeSandbox);
    // A sandbox found dead is cleaned on the quorum-read path.
    return Do(*o.sandbox == SandboxState::kRunning ? Step::kWatchLiveness : Step::kReadQuorum);
  }
  if (o.generation_observed && AtRestAsWanted(o) && !o.sandbox_root_exists) return Do(Step::kNothing);
  if (!o.spec_valid) return Do(Step::kValidateSpec);
  if (!*o.spec_valid || !o.driver_available) return Do(Step::kReadQuorum);
  if (o.status == ActorState::kRunning && o.desired != DesiredState::kRunning && !o.checkpoint_backoff) {
    return CheckpointFor(o.desired);
  }
  if ((o.status == ActorState::kPaused || o.status == ActorState::kSuspended) &&
      o.desired == DesiredState::kRunning && !o.sandbox_root_exists) {
    return ResumeOrWait(o);
  }
  return Do(Step::kReadQuorum);
}

// An *ING status at a quorum read: an earlier agent died mid-step (every *ING is replaced
// before a reconcile returns). Recovered from the sandbox's state and the snapshots on disk.
Decision DecideRecovery(const Observation& o) {
  if (!o.sandbox) return Do(Step::kProbeSandbox);
  const SandboxState sandbox = *o.sandbox;
  if (o.status == ActorState::kResuming) {
    if (sandbox == SandboxState::kRunning) return Do(Step::kRecoverResumed);
    return o.resume_backoff ? Do(Step::kWaitResumeBackoff) : Do(Step::kRestartResume);
  }
  // PAUSING / SUSPENDING. Frozen for a Data archive: a complete snapshot is adopted (the sandbox
  // is deleted then); without one the workload is thawed and runs on.
  if (sandbox == SandboxState::kPaused && !o.thaw_failed) {
    if (!o.newer_local_snapshot) return Do(Step::kListSnapshots);
    if (!*o.newer_local_snapshot) return Do(Step::kThawFrozenSandbox);
  }
  // The checkpoint was cut short (or ran with -leave-running): the workload lives on.
  if (sandbox == SandboxState::kRunning) return Do(Step::kRecoverCheckpointInterrupted);
  if (!o.newer_local_snapshot) return Do(Step::kListSnapshots);
  if (*o.newer_local_snapshot) return Do(Step::kAdoptLocalSnapshot);
  // A suspend that committed and was then cut short by an API error left its snapshot only in
  // the store: adopted if this transition took it, never an older orphan.
  if (o.status == ActorState::kSuspending && o.transition_start_known) {
    if (!o.committed_by_transition) return Do(Step::kListSnapshots);
    if (*o.committed_by_transition) return Do(Step::kAdoptCommittedSnapshot);
  }
  return Do(Step::kForceCleanDeadSandbox);
}

// Running or at rest, on a quorum read: the (status, desired state) table.
Decision DecideTransition(const Observation& o) {
  const DesiredState desired = o.desired;
  switch (o.status) {
    case ActorState::kRunning:
      // A checkpoint waits until the restore has finished: the CUDA state is toggled back first.
      if (o.restore_pending) {
        if (!o.sandbox) return Do(Step::kProbeSandbox);
        return Do(*o.sandbox == SandboxState::kRunning ? Step::kFinishRestore : Step::kForceCleanDeadSandbox);
      }
      if (desired == DesiredState::kRunning) {
        if (!o.sandbox) return Do(Step::kProbeSandbox);
        return Do(*o.sandbox == SandboxState::kRunning ? Step::kWatchLiveness : Step::kForceCleanDeadSandbox);
      }
      return o.checkpoint_backoff ? Do(Step::kWaitCheckpointBackoff) : CheckpointFor(desired);
    case ActorState::kPaused:
      if (desired == DesiredState::kRunning) return ResumeOrWait(o);
      if (desired == DesiredState::kSuspended) return Do(Step::kCommitPaused);
      break;
    case ActorState::kSuspended:
      if (desired == DesiredState::kRunning) return ResumeOrWait(o);
      break;
    case ActorState::kUnspecified:
      return desired == DesiredState::kRunning ? ResumeOrWait(o) : Do(Step::kRestNeverStarted);
    case ActorState::kFailed:
      // FAILED is left only by a spec change (a new generation) that asks for Running.
      if (desired == DesiredState::kRunning && !o.generation_observed) return ResumeOrWait(o);
      break;
    default:
      break;
  }
  return Do(o.generation_observed ? Step::kNothing : Step::kWriteObservedGeneration);
}

Decision DecideOnQuorum(const Observation& o) {
  if (o.unsettled_worker) {
    // An actor at rest holds no worker: give back what a stale resume claimed or a failed
    // release kept (a resume below claims again). A running or transitioning one keeps its own.
    return Do(api::IsResting(o.status) ? Step::kFreeUnsettledWorker : Step::kForgetUnsettledWorker);
  }
  if (!o.owned_here) return Do(Step::kNothing);
  if (o.being_deleted) return Do(Step::kDelete);
  if (!o.has_finalizer) return Do(Step::kAddFinalizer);
  if (!o.spec_valid) return Do(Step::kValidateSpec);
  if (!*o.spec_valid) {
    // A running actor keeps running on the spec it started with; any other fails until fixed.
    return Do(o.status == ActorState::kRunning ? Step::kNothing : Step::kFailInvalidSpec);
  }
  if (!o.driver_available) {
    return Do(o.status == ActorState::kFailed ? Step::kNothing : Step::kFailRuntimeUnavailable);
  }
  if (api::IsTransitioning(o.status)) return DecideRecovery(o);
  if (o.status != ActorState::kRunning && o.sandbox_root_exists) return Do(Step::kRemoveLeftoverSandbox);
  return DecideTransition(o);
}

}  // namespace

const char* ToString(Step step) {
  switch (step) {
    case Step::kReadQuorum: return "read_quorum";
    case Step::kValidateSpec: return "validate_spec";
    case Step::kProbeSandbox: return "probe_sandbox";
    case Step::kListSnapshots: return "list_snapshots";
    case Step::kFreeUnsettledWorker: return "free_unsettled_worker";
    case Step::kForgetUnsettledWorker: return "forget_unsettled_worker";
    case Step::kAddFinalizer: return "add_finalizer";
    case Step::kRemoveLeftoverSandbox: return "remove_leftover_sandbox";
    case Step::kThawFrozenSandbox: return "thaw_frozen_sandbox";
    case Step::kNothing: return "nothing";
    case Step::kWriteObservedGeneration: return "write_observed_generation";
    case Step::kWatchLiveness: return "watch_liveness";
    case Step::kFinishRestore: return "finish_restore";
    case Step::kDelete: return "delete";
    case Step::kFailInvalidSpec: return "fail_invalid_spec";
    case Step::kFailRuntimeUnavailable: return "fail_runtime_unavailable";
    case Step::kRestNeverStarted: return "rest_never_started";
    case Step::kCheckpoint: return "checkpoint";
    case Step::kWaitCheckpointBackoff: return "wait_checkpoint_backoff";
    case Step::kResume: return "resume";
    case Step::kWaitResumeBackoff: return "wait_resume_backoff";
    case Step::kCommitPaused: return "commit_paused";
    case Step::kForceCleanDeadSandbox: return "force_clean_dead_sandbox";
    case Step::kRecoverResumed: return "recover_resumed";
    case Step::kRestartResume: return "restart_resume";
    case Step::kRecoverCheckpointInterrupted: return "recover_checkpoint_interrupted";
    case Step::kAdoptLocalSnapshot: return "adopt_local_snapshot";
    case Step::kAdoptCommittedSnapshot: return "adopt_committed_snapshot";
  }
  return "unknown";
}

bool IsObservation(Step step) {
  return step == Step::kReadQuorum || step == Step::kValidateSpec || step == Step::kProbeSandbox ||
         step == Step::kListSnapshots;
}

bool IsPreparation(Step step) {
  return step == Step::kFreeUnsettledWorker || step == Step::kForgetUnsettledWorker ||
         step == Step::kAddFinalizer || step == Step::kRemoveLeftoverSandbox ||
         step == Step::kThawFrozenSandbox;
}

Decision Decide(const Observation& observed) {
  Observation o = observed;
  if (o.node_draining) o.desired = DesiredState::kSuspended;
  return o.source == ActorSource::kCache ? DecideFromCache(o) : DecideOnQuorum(o);
}

bool ChosenByDrain(const Observation& o, const Decision& d) {
  return o.node_draining && o.desired != DesiredState::kSuspended &&
         (d.step == Step::kCheckpoint || d.step == Step::kCommitPaused);
}

ActorState RestingState(const api::Actor& a) {
  if (!a.status.latest_snapshot) return ActorState::kFailed;
  return a.status.latest_snapshot->trigger == SnapshotTrigger::kPause &&
                 !a.status.latest_snapshot->node_name.empty()
             ? ActorState::kPaused
             : ActorState::kSuspended;
}

CheckpointFailure ClassifyCheckpointFailure(const Status& failure, const Result<SandboxState>& after) {
  const bool running = after.ok() && *after == SandboxState::kRunning;
  return running && failure.code() != Code::kDeadlineExceeded ? CheckpointFailure::kSurvived
                                                              : CheckpointFailure::kSandboxLost;
}

bool ResumeFailureIsPermanent(const Status& failure) {
  return failure.code() == Code::kInvalidArgument || failure.code() == Code::kFailedPrecondition;
}

DeleteAt SandboxDeleteAfterCheckpoint(bool leave_running, bool data_scope, bool gpu) {
  if (leave_running || data_scope) return DeleteAt::kBeforeWrite;
  return gpu ? DeleteAt::kBeforeRelease : DeleteAt::kAfterRelease;
}

bool CheckpointFits(int64_t free_bytes, int64_t expected_bytes, int64_t margin_bytes) {
  if (free_bytes < 0) return false;
  const int64_t expected = std::max<int64_t>(expected_bytes, 0);
  const int64_t margin = std::max<int64_t>(margin_bytes, 0);
  // Subtractions only: sizes near INT64_MAX must not overflow into a yes.
  return free_bytes >= margin && free_bytes - margin >= expected;
}

std::string ConditionReason(const std::string& failure_class) {
  std::string out;
  bool upper = true;
  for (char ch : failure_class) {
    if (ch == '_' || ch == '-' || ch == ' ') {
      upper = true;
      continue;
    }
    out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch);
    upper = false;
  }
  return out.empty() ? "Unknown" : out;
}

const char* CommitFailedReason(const std::string& failure_class) {
  if (failure_class == snapshot_reason::kStoreAuthFailed) return api::kReasonStoreAuthFailed;
  if (failure_class == snapshot_reason::kStoreBucketMissing) return api::kReasonStoreBucketMissing;
  return api::kReasonStoreUnavailable;
}

}  // namespace stasis
