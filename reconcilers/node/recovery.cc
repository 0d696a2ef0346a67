// The node agent's recovery actions: an *ING status left by an agent that died mid-step,
// recovered from the sandbox's state and the snapshots on disk (transitions.h decides which);
// a sandbox that died (ForceClean); and restart recovery over the whole node.
#include <spdlog/spdlog.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "api/json_mapping.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/restore_readiness.h"
#include "reconcilers/node/resume_intent.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using api::ActorState;

constexpr char kAfterRestart[] = "recovered after an agent restart";

// Whose sandbox `id` is: its owner file, or the "<ns>_<name>" an older agent named it by
// (namespaces hold no '_'); "" when neither says.
std::string ActorKeyOfSandbox(const fs::path& run, const std::string& id) {
  std::ifstream owner(run / (id + kOwnerSuffix));
  std::string key;
  if (owner && std::getline(owner, key) && key.find('/') != std::string::npos) return key;
  const auto sep = id.find('_');
  return sep == std::string::npos ? "" : id.substr(0, sep) + "/" + id.substr(sep + 1);
}


}  // namespace

Result<ReconcileOutcome> ActorReconciler::RecoverResumed(Ctx& c) {
  // Read through a resume's intent record: its claim may not have landed, or may have been
  // freed at start-up before the record was read. The sandbox runs on that worker's devices,
  // so it is that worker or none: taken by another actor, the start is made again.
  if (c.through_intent) {
    Status held = workers_.ClaimNamed(c.a.status.worker_name, c.actor_ref);
    if (held.code() == Code::kAborted || held.code() == Code::kNotFound) return RestartResume(c);
    if (!held.ok()) return held;
  }
  // The sandbox was restored, but the agent may have died before or during the postRestore
  // hook: it runs again before RUNNING, so that no restore runs without its identity (a hook
  // must be idempotent, docs/api.md).
  if (Status s = RerunPostRestoreHook(c); !s.ok()) {
    // Where it rests, as for a start cut short (RestartResume): never FAILED for a retryable hook.
    const ActorState resting = RestingState(c.a);
    return ResumeFailed(c, resting == ActorState::kFailed ? ActorState::kUnspecified : resting, s);
  }
  c.a.status.status = ActorState::kRunning;
  SetCondition(c, api::kConditionProgressing, false, api::kReasonResumed, kAfterRestart);
  // A restore's CUDA state may still be coming back: asked, never assumed.
  if (MayStillBeRestoring(c.a)) {
    SetCondition(c, api::kConditionRestored, false, api::kReasonRestoring, kAfterRestart);
    SetCondition(c, api::kConditionReady, false, api::kReasonRestoring, kAfterRestart);
    if (Status s = WriteStatus(c); !s.ok()) return s;
    if (c.through_intent) RemoveIntent(IntentPath(c.ref.root));
    return FinishRestore(c, std::nullopt);
  }
  SetCondition(c, api::kConditionReady, true, api::kReasonRunning, kAfterRestart);
  if (Status s = WriteStatus(c); !s.ok()) return s;
  if (c.through_intent) RemoveIntent(IntentPath(c.ref.root));  // the API speaks for it now
  return ReconcileOutcome{options_.liveness_period};
}

Status ActorReconciler::RerunPostRestoreHook(Ctx& c) {
  if (!c.a.spec.hooks.post_restore) return OkStatus();
  const auto& snap = c.a.status.latest_snapshot;
  if (snap && snap->scope == api::SnapshotScope::kFull) return RunPostRestoreHook(c, snap->id, "resume");
  // A clone's first start: the RESUMING write recorded which snapshot of its source it restores.
  if (!snap && c.a.spec.source && c.a.status.cloned_from) {
    return RunPostRestoreHook(c, c.a.status.cloned_from->snapshot_id, "clone");
  }
  return OkStatus();  // booted (or restored only data): no restore to follow
}

Result<ReconcileOutcome> ActorReconciler::RestartResume(Ctx& c) {
  // The restore never finished: start it again from the snapshot it was restoring.
  WarnIfFailed(c.driver->Delete(c.ref), "sandbox of an interrupted resume not deleted", c.key);
  c.a.status.status = RestingState(c.a);
  if (c.a.status.status == ActorState::kFailed) c.a.status.status = ActorState::kUnspecified;
  return Resume(c);
}

Result<ReconcileOutcome> ActorReconciler::RecoverCheckpointInterrupted(Ctx& c) {
  // The checkpoint was cut short (or ran with -leave-running): the workload lives on.
  c.a.status.status = ActorState::kRunning;
  SetCondition(c, api::kConditionProgressing, false, api::kReasonCheckpointInterrupted,
               "the node agent restarted during the checkpoint; the actor kept running");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  return ReconcileOutcome{std::chrono::milliseconds(1)};  // the checkpoint starts again
}

Status ActorReconciler::AdoptSnapshot(Ctx& c, api::Snapshot snapshot, ActorState resting) {
  // The sandbox is gone and its snapshot is complete: the actor rests on it, nothing is lost.
  const Status deleted = c.driver->Delete(c.ref);
  WarnIfFailed(deleted, "sandbox of an adopted snapshot not deleted", c.key);
  if (deleted.ok()) RemoveSandboxRoot(c.ref);
  if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
  c.a.status.latest_snapshot = std::move(snapshot);
  c.a.status.status = resting;
  c.a.status.worker_name.clear();
  c.a.status.sandbox_id.clear();
  return OkStatus();
}

Result<ReconcileOutcome> ActorReconciler::AdoptLocalSnapshot(Ctx& c) {
  // The checkpoint had finished before the agent died.
  const SnapshotManifest& m = *c.newer_local;
  if (Status s = AdoptSnapshot(c, ToSnapshot(m, snapshots_.LocalPath(m.ns, m.name, m.id), options_.node),
                               ActorState::kPaused);
      !s.ok()) {
    return s;
  }
  SetCondition(c, api::kConditionProgressing, false, api::kReasonRecovered, "adopted complete snapshot " + m.id);
  SetCondition(c, api::kConditionReady, false, api::kReasonPaused, "snapshot " + m.id);
  if (Status s = WriteStatus(c); !s.ok()) return s;
  // A suspend continues with the commit on the next pass.
  return ReconcileOutcome{std::chrono::milliseconds(1)};
}

Result<ReconcileOutcome> ActorReconciler::AdoptCommittedSnapshot(Ctx& c) {
  // A suspend that committed its snapshot and was then cut short by an API error (freeing the
  // worker, writing the status: an API server restarting answers 503/429 for a while).
  const SnapshotManifest& m = *c.committed_by_transition;
  if (Status s = AdoptSnapshot(c, ToSnapshot(m, snapshots_.StorePath(m.ns, m.name, m.id), ""),
                               ActorState::kSuspended);
      !s.ok()) {
    return s;
  }
  SetCondition(c, api::kConditionProgressing, false, api::kReasonRecovered, "adopted committed snapshot " + m.id);
  SetCondition(c, api::kConditionReady, false, api::kReasonSuspended, "snapshot " + m.id + " committed");
  SetCondition(c, api::kConditionCheckpointFailed, false, api::kReasonCheckpointed, "");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  spdlog::info("interrupted suspend recovered actor={} snapshot={} status=STATUS_SUSPENDED", c.key, m.id);
  return ReconcileOutcome{};
}

Status ActorReconciler::ListSnapshots(Ctx& c) {
  const std::string& ns = c.a.metadata.namespace_;
  const std::string& name = c.a.metadata.name;
  const std::string latest = c.a.status.latest_snapshot ? c.a.status.latest_snapshot->id : "";
  // Snapshot ids sort by the time they were taken (NewSnapshotId).
  auto local = snapshots_.ListLocal(ns, name);
  c.newer_local.reset();
  if (!local.empty() && local.back().id > latest) c.newer_local = local.back();
  c.observed.newer_local_snapshot = c.newer_local.has_value();
  c.committed_by_transition.reset();
  if (c.a.status.status == ActorState::kSuspending && c.a.status.transition_start_time) {
    auto committed = snapshots_.ListCommitted(ns, name);
    if (!committed.empty()) {
      const SnapshotManifest& m = committed.back();
      auto taken = ParseTime(m.taken_at);
      if (m.id > latest && m.trigger == "Suspend" && taken.ok() && *taken >= *c.a.status.transition_start_time) {
        c.committed_by_transition = m;
      }
    }
  }
  c.observed.committed_by_transition = c.committed_by_transition.has_value();
  return OkStatus();
}

Status ActorReconciler::RemoveLeftoverSandbox(Ctx& c) {
  // At rest, yet a sandbox is left: the cluster controller force-cleaned this actor while
  // this agent was away or stuck. Remove what it could not reach.
  auto state = c.driver->State(c.ref);
  if (state.ok() && *state != SandboxState::kNotFound) {
    spdlog::info("leftover sandbox removed actor={} status={} sandbox={}", c.key,
                 api::ToString(c.a.status.status), ToString(*state));
    if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
  }
  RemoveSandboxRoot(c.ref);
  return OkStatus();
}

Result<ReconcileOutcome> ActorReconciler::ForceClean(Ctx& c, const std::string& condition_reason,
                                                     const std::string& message) {
  const std::string reason = api::MetricReason(condition_reason);
  if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
  RemoveSandboxRoot(c.ref);
  if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
  metrics_.CountForcedCleanup(reason);
  const ActorState was = c.a.status.status;
  c.a.status.status = c.a.status.latest_snapshot ? RestingState(c.a) : ActorState::kFailed;
  if (c.a.status.status == ActorState::kPaused) c.a.status.status = ActorState::kSuspended;
  c.a.status.worker_name.clear();
  c.a.status.sandbox_id.clear();
  SetCondition(c, api::kConditionCheckpointFailed, was != ActorState::kRunning, condition_reason, message);
  SetCondition(c, api::kConditionProgressing, false, condition_reason, "cleaned up");
  if (AwaitsRestore(c.a)) SetCondition(c, api::kConditionRestored, false, condition_reason, message);
  SetCondition(c, api::kConditionReady, false, condition_reason,
               message + (c.a.status.latest_snapshot
                              ? "; kept snapshot " + c.a.status.latest_snapshot->id
                              : "; no snapshot to resume from"));
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, true, "ForcedCleanup", message);
  spdlog::warn("actor force-cleaned actor={} reason={} was={} now={} message=\"{}\"", c.key, reason,
               api::ToString(was), api::ToString(c.a.status.status), message);
  return ReconcileOutcome{};
}

Status ActorReconciler::RecoverAtStartup() {
  auto removed = snapshots_.RemovePartials();
  if (removed.ok() && *removed > 0) spdlog::info("removed partial snapshots count={}", *removed);
  // Paused snapshots completed without checksums by an agent that stopped before computing them.
  if (int pending = snapshots_.ResumePendingChecksums(); pending > 0) {
    spdlog::info("pending snapshot checksums queued count={}", pending);
  }
  RemoveLeftoverSandboxes();
  RemoveSnapshotsOfDeletedActors();
  // Workers held by actors that do not exist, are not ours, or are at rest.
  return workers_.FreeUnless([&](const api::ActorRef& ref) {
    ObjectPtr obj = actors_(ref.Key());
    if (!obj) return false;
    auto a = api::ActorFromJson(*obj);
    if (!a.ok() || !OwnedHere(*a)) return false;
    const SandboxRef sandbox = SandboxFor(ref.namespace_, ref.name, a->status.sandbox_id);
    std::error_code ec;
    ThroughIntent(sandbox, fs::exists(sandbox.root, ec), *a);
    return a->status.status == ActorState::kRunning || api::IsTransitioning(a->status.status);
  });
}

void ActorReconciler::RemoveLeftoverSandboxes() {
  // Sandboxes whose actor is gone or not ours any more, and owner files whose sandbox is gone.
  std::error_code ec;
  const fs::path run = options_.root + "/run";
  if (!fs::exists(run, ec)) return;
  for (const auto& entry : fs::directory_iterator(run, ec)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_directory(ec)) {
      // An owner file or a resume's intent record (resume_intent.h) beside no sandbox root.
      for (const std::string& suffix : {std::string(kOwnerSuffix), std::string(kIntentSuffix), kIntentSuffix + std::string(".tmp")}) {
        const bool beside = file.size() > suffix.size() && file.ends_with(suffix);
        if (beside && !fs::exists(run / file.substr(0, file.size() - suffix.size()), ec)) fs::remove(entry.path(), ec);
      }
      continue;
    }
    const std::string key = ActorKeyOfSandbox(run, file);
    if (key.empty()) continue;  // not a sandbox of this agent's making
    ObjectPtr obj = actors_(key);
    if (obj) {
      auto a = api::ActorFromJson(*obj);
      if (a.ok() && OwnedHere(*a)) continue;
    }
    // Not ours in the cache: removed only when a quorum read finds it gone (stray_state.h).
    const auto slash = key.find('/');
    const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
    json live;
    const StrayAction action = DecideStray(LookUpStray(ns, name, &live), /*has_local_state=*/true);
    if (action == StrayAction::kKeepAndReport) ReportKeptState(key, live);
    if (action != StrayAction::kRemove) {
      spdlog::info("leftover sandbox kept actor={} sandbox={} action={}", key, file, ToString(action));
      continue;
    }
    const SandboxRef ref = SandboxWithId(file);
    WarnIfFailed(DeleteAnyRuntime(ref), "leftover sandbox not deleted", key);
    RemoveSandboxFiles(ref);
    WarnIfFailed(snapshots_.RemoveAllLocal(ns, name), "local snapshots of a leftover sandbox not removed", key);
    spdlog::info("leftover sandbox removed actor={} sandbox={}", key, file);
  }
}

void ActorReconciler::RemoveSnapshotsOfDeletedActors() {
  // Node-local snapshots of actors deleted while this agent was away and that left no sandbox
  // (a PAUSED actor's snapshot, the emptied directory of a SUSPENDED one). The cache holds only
  // the actors bound here, so an actor missing from it is asked for: one bound elsewhere may
  // still come back to its paused snapshot here.
  for (const auto& [ns, name] : snapshots_.LocalActors()) {
    if (actors_(ns + "/" + name)) continue;
    auto live = client_.Get(kActorType, ns, name);
    if (live.ok() || live.status().code() != Code::kNotFound) continue;
    if (Status s = snapshots_.RemoveAllLocal(ns, name); !s.ok()) {
      spdlog::warn("local snapshots of a deleted actor not removed actor={}/{} error=\"{}\"", ns, name,
                   s.message());
      continue;
    }
    spdlog::info("local snapshots of a deleted actor removed actor={}/{}", ns, name);
  }
}

}  // namespace stasis
