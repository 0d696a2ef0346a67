// The node agent's resume action: PAUSED / SUSPENDED / FAILED / never started → RUNNING. A
// worker is claimed and RESUMING written before the sandbox starts (or beside it, with the
// intent record on disk first: resume_overlap.cc); a failure gives the worker
// back and either fails the actor (a bundle or image that cannot work) or returns it to where
// it rested, retried with backoff.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "api/names.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/restore_readiness.h"
#include "runtimes/bundle_confinement.h"
#include "runtimes/gpu/gpu_bundle.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using api::ActorState;

// A snapshot check that failed, as a resume failure: missing, corrupt, another actor's or named
// by an id that is no snapshot id, it can never be restored (kFailedPrecondition fails the
// actor; the snapshot is kept for inspection); a store that cannot be read now is retried.
Status UnrestorableOrRetry(const Status& check) {
  const std::string& r = check.reason();
  const bool gone = r == snapshot_reason::kSnapshotNotFound || r == snapshot_reason::kSnapshotCorrupt ||
                    r == snapshot_reason::kSnapshotOwnerMismatch || r == snapshot_reason::kInvalidName;
  return Status(gone ? Code::kFailedPrecondition : Code::kUnavailable, check.message(), check.reason());
}

// The trigger of the snapshot a start restores (a clone's: its source snapshot's), for the
// restore metrics' label.
std::string RestoreTrigger(const api::Actor& a, const std::optional<CloneSnapshot>& clone) {
  return clone ? clone->trigger : api::ToString(a.status.latest_snapshot->trigger);
}

// What a start restores: the actor's own Full snapshot, or a clone's source snapshot.
std::string RestoreWhat(const api::Actor& a, const std::optional<CloneSnapshot>& clone) {
  if (clone) return "snapshot " + clone->snapshot_id + " of actor " + clone->source_name;
  return "snapshot " + a.status.latest_snapshot->id;
}

bool FromFullSnapshot(const api::Actor& a) {
  return a.status.latest_snapshot && a.status.latest_snapshot->scope == api::SnapshotScope::kFull;
}

// A Data snapshot: its directories are unpacked, then the sandbox boots from the bundle.
bool FromDataSnapshot(const api::Actor& a) {
  return a.status.latest_snapshot && a.status.latest_snapshot->scope == api::SnapshotScope::kData;
}

}  // namespace

std::optional<Result<ReconcileOutcome>> ActorReconciler::RefuseResume(Ctx& c) {
  if (api::AwaitsTemplate(c.a.spec)) {
    // The controller fills the spec in from the template once its golden snapshot exists; that
    // write is a new generation, which reconciles the actor again.
    SetCondition(c, api::kConditionReady, false, api::kReasonTemplatePending,
                 "waiting for the controller to fill the spec in from template " + c.a.spec.template_ref->name);
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return ReconcileOutcome{};
  }
  if (c.a.spec.runtime == api::Runtime::kMicrovm && c.a.spec.gpu.count > 0) {
    // A VFIO GPU in a micro-VM cannot be snapshotted by the VMM, and the in-guest step that
    // would make it possible is designed (docs/microvm.md) but not built: refuse before a
    // worker is claimed.
    c.a.status.status = ActorState::kFailed;
    SetCondition(c, api::kConditionReady, false, api::kReasonMicrovmGpuUnsupported,
                 "GPU micro-VM actors are not supported yet: QEMU cannot snapshot a VFIO GPU "
                 "and the in-guest cuda-checkpoint agent (docs/microvm.md) is not built; use "
                 "runtime gvisor for GPU actors");
    if (Status s = WriteStatus(c); !s.ok()) return s;
    Event(c, true, "ResumeFailed", "GPU micro-VM actors are not supported yet");
    return ReconcileOutcome{};
  }
  const auto& snap = c.a.status.latest_snapshot;
  if ((FromFullSnapshot(c.a) || FromDataSnapshot(c.a)) && !snap->node_name.empty() &&
      snap->node_name != options_.node) {
    SetCondition(c, api::kConditionReady, false, api::kReasonSnapshotOnOtherNode,
                 "the latest snapshot " + snap->id + " is on node " + snap->node_name +
                     "; this actor can only resume there");
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return ReconcileOutcome{};
  }
  return RefuseBundle(c);
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::RefuseBundle(Ctx& c) {
  // An actor from an image runs the bundle the agent itself writes (actor_image.cc).
  if (!c.a.spec.image.empty()) return std::nullopt;
  // Before a worker is claimed and before runsc or a Data restore touches anything: runsc's
  // gofer serves the bundle's mounts as root. A micro-VM bundle has no config.json: only its
  // directory is confined.
  const auto& ns = c.a.metadata.namespace_;
  auto confined = c.a.spec.runtime == api::Runtime::kMicrovm
                      ? ConfineBundleDir(c.a.spec.bundle, ns, options_.bundle_roots)
                      : ConfineBundle(c.a.spec.bundle, ns, options_.bundle_roots);
  if (confined.ok()) {
    c.bundle_root = *confined;
    return std::nullopt;
  }
  // A missing or unparsable config.json is runsc's BadBundle, reported by the start as before.
  if (confined.status().reason() != kBundleNotAllowed) return std::nullopt;
  // FAILED keeps latestSnapshot: a new generation (a bundle moved under a root) resumes from it.
  c.a.status.status = ActorState::kFailed;
  SetCondition(c, api::kConditionReady, false, api::kReasonBundleNotAllowed, confined.status().message());
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, true, api::kReasonBundleNotAllowed, confined.status().message());
  spdlog::warn("bundle refused actor={} bundle={} error=\"{}\"", c.key, c.a.spec.bundle, confined.status().message());
  return ReconcileOutcome{};
}

Result<ReconcileOutcome> ActorReconciler::ClaimFailed(Ctx& c, const Status& claim) {
  if (claim.reason() == "gpu_count_unavailable") {
    // No worker of this node can ever run it: say so, rather than wait for a free worker.
    c.a.status.status = ActorState::kFailed;
    SetCondition(c, api::kConditionReady, false, ConditionReason("gpu_count_unavailable"), claim.message());
    if (Status s = WriteStatus(c); !s.ok()) return s;
    Event(c, true, "ResumeFailed", claim.message());
    return ReconcileOutcome{};
  }
  SetCondition(c, api::kConditionReady, false, api::kReasonNoFreeWorker, claim.message());
  if (Status s = WriteStatus(c); !s.ok()) return s;
  return ReconcileOutcome{std::chrono::seconds(5)};
}

Result<ReconcileOutcome> ActorReconciler::RefuseStart(Ctx& c, const char* reason, const std::string& message,
                                                      bool retry) {
  // The actor stays where it rested (its snapshot kept) and no worker was claimed. The status
  // writes of each attempt re-enqueue the actor at once, so the wait must be the agent's own
  // (transition_retries.h).
  const int64_t generation = c.a.metadata.generation;
  if (retry) {
    retries_.NoteFailure(c.key, RetryOp::kResume, generation);
  } else {
    retries_.GiveUp(c.key, RetryOp::kResume, generation);
  }
  FailureVerdict v;
  v.reason = reason;
  if (SetFailureCondition(c, api::kConditionReady, false, v, message)) Event(c, true, reason, message);
  if (Status s = WriteStatus(c); !s.ok()) return s;
  if (!retry) return ReconcileOutcome{};
  return ReconcileOutcome{retries_.Wait(c.key, RetryOp::kResume, generation)};
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::ResolveClone(Ctx& c) {
  if (!c.a.spec.source || c.a.status.latest_snapshot) return std::nullopt;
  const std::string& ns = c.a.metadata.namespace_;
  const std::string& source_name = c.a.spec.source->actor_name;
  // The source's uid from a quorum read, its snapshots from the store's manifests: nothing is
  // taken from a status another agent may write.
  SourceObservation source;
  auto live = client_.Get(kActorType, ns, source_name);
  if (!live.ok() && live.status().code() != Code::kNotFound) return Result<ReconcileOutcome>(live.status());
  if (live.ok()) {
    source.exists = true;
    source.uid = (*live)["metadata"].value("uid", "");
    source.committed = snapshots_.ListCommitted(ns, source_name);
    if (!c.a.spec.source->snapshot_id.empty()) source.local = snapshots_.ListLocal(ns, source_name);
    std::map<std::string, std::string> labels;
    const nlohmann::json source_labels = (*live)["metadata"].value("labels", nlohmann::json::object());
    for (const auto& [k, v] : source_labels.items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
    c.start_kind = StartKind(true, labels, c.a.metadata.labels);
  }
  auto chosen = ChooseCloneSnapshot(c.a.spec, source);
  if (!chosen.ok()) {
    const std::string& r = chosen.status().reason();
    const char* reason = r == kSourceNotFound              ? api::kReasonSourceNotFound
                         : r == kSourceSnapshotUnavailable ? api::kReasonSourceSnapshotUnavailable
                                                           : api::kReasonSourceIncompatible;
    spdlog::warn("clone source not usable actor={} source={} reason={} error=\"{}\"", c.key, source_name, reason,
                 chosen.status().message());
    return RefuseStart(c, reason, chosen.status().message(), chosen.status().code() == Code::kUnavailable);
  }
  spdlog::info("clone source chosen actor={} source={} snapshot={} local={} image_digest={} cuda={}", c.key,
               source_name, chosen->snapshot_id, chosen->local, chosen->image_digest, chosen->cuda_checkpointed);
  c.clone = std::move(*chosen);
  return std::nullopt;
}

Status ActorReconciler::RunPostRestoreHook(Ctx& c, const std::string& snapshot_id, const char* restore) {
  const auto& hook = c.a.spec.hooks.post_restore;
  if (!hook) return OkStatus();
  ExecRequest request;
  request.argv = hook->command;
  request.env = PostRestoreHookEnv(c.a, snapshot_id, restore);
  request.deadline = std::chrono::seconds(hook->timeout_seconds);
  const auto start = clock_.Now();
  auto ran = c.driver->Exec(c.ref, request);
  const double took = Seconds(clock_.Now() - start);
  std::string failure;
  if (!ran.ok()) {
    failure = ran.status().reason() == "timeout"
                  ? "did not finish within " + std::to_string(hook->timeout_seconds) + "s"
                  : ran.status().message();
  } else if (ran->exit_code != 0) {
    std::string err = ran->err.size() > 512 ? ran->err.substr(ran->err.size() - 512) : ran->err;
    failure = "exited " + std::to_string(ran->exit_code) + (err.empty() ? "" : ": " + err);
  }
  spdlog::info("post-restore hook actor={} snapshot={} ok={} duration_s={:.3f}{}", c.key, snapshot_id,
               failure.empty(), took, failure.empty() ? "" : " error=\"" + failure + "\"");
  if (failure.empty()) return OkStatus();
  return Status(Code::kUnavailable, "the postRestore hook " + failure, "post_restore_hook_failed");
}

void ActorReconciler::SetResuming(Ctx& c, const std::string& worker_name) {
  const auto& snap = c.a.status.latest_snapshot;
  c.a.status.status = ActorState::kResuming;
  c.a.status.transition_start_time.reset();
  c.a.status.node_name = options_.node;
  c.a.status.worker_name = worker_name;
  c.a.status.sandbox_id = c.ref.id;
  // Written with RESUMING: an agent restarted mid-start knows which snapshot the sandbox holds.
  if (c.clone) c.a.status.cloned_from = api::ClonedFrom{c.clone->source_name, c.clone->source_uid, c.clone->snapshot_id};
  SetCondition(c, api::kConditionProgressing, true, api::kReasonResuming,
               FromFullSnapshot(c.a) || c.clone ? "restoring " + RestoreWhat(c.a, c.clone)
               : FromDataSnapshot(c.a) ? "restoring the data of snapshot " + snap->id + ", then booting from the bundle"
                                       : "booting from the bundle");
}

Result<ReconcileOutcome> ActorReconciler::Resume(Ctx& c) {
  const auto decided = clock_.Now();
  if (auto refused = RefuseResume(c)) return std::move(*refused);
  if (auto refused = ResolveClone(c)) return std::move(*refused);
  if (auto refused = PrepareImage(c)) return std::move(*refused);
  const ActorState resting = c.a.status.status;
  if (auto failed = FetchBeforeClaim(c, resting)) return std::move(*failed);
  const auto& snap = c.a.status.latest_snapshot;
  const bool from_snapshot = FromFullSnapshot(c.a) || c.clone, from_data = FromDataSnapshot(c.a);
  // Beside the start when the agent's view has a free worker (resume_overlap.cc), else first.
  const auto gpus = static_cast<size_t>(c.a.spec.gpu.count);
  const std::optional<api::Worker> reserved = options_.overlap_resume_writes ? workers_.Reserve(c.actor_ref, gpus)
                                                                            : std::nullopt;
  auto worker = reserved ? Result<api::Worker>(*reserved) : workers_.Claim(c.actor_ref, gpus);
  if (!worker.ok()) return ClaimFailed(c, worker.status());
  c.claimed = !reserved;
  SetResuming(c, worker->metadata.name);
  Status result;
  double took = 0;
  auto start = clock_.Now();
  if (reserved) {
    if (auto undone = StartBesideResumingWrite(c, *worker, result, took)) return std::move(*undone);
  } else {
    if (Status s = WriteStatus(c); !s.ok()) return s;
    start = clock_.Now();
    result = StartSandbox(c, *worker);
    took = Seconds(clock_.Now() - start);
  }
  // A CUDA snapshot's restore is not over when runsc returns (restore_readiness.h).
  const bool finishes_later = from_snapshot && result.ok() && RestoresCudaState(c.a, c.clone);
  const std::string trigger = from_snapshot || from_data ? RestoreTrigger(c.a, c.clone) : "";
  if (from_snapshot || from_data) {
    const bool gpu = c.a.spec.gpu.count > 0;
    metrics_.ObserveDuration("restore", trigger, gpu, result.ok() ? "success" : "error", took);
    // One that finishes later is counted when it has (FinishRestore).
    if (!finishes_later) {
      metrics_.CountOperation("restore", result.ok() ? "success" : "error",
                              result.ok() ? "" : api::MetricReason(FailureReason(result)));
    }
  }
  if (!result.ok()) return ResumeFailed(c, resting, result);
  retries_.Clear(c.key, RetryOp::kResume);
  c.a.status.status = ActorState::kRunning;
  if (c.image) c.a.status.image_digest = c.image->digest;
  SetCondition(c, api::kConditionProgressing, false, api::kReasonResumed, "");
  const std::string started = from_snapshot ? "restored " + RestoreWhat(c.a, c.clone)
                              : from_data   ? "booted from the bundle with the data of snapshot " + snap->id
                                            : "booted from the bundle";
  if (finishes_later) {
    SetCondition(c, api::kConditionRestored, false, api::kReasonRestoring,
                 "the sandbox runs; its CUDA state and device memory are still being restored");
    SetCondition(c, api::kConditionReady, false, api::kReasonRestoring,
                 started + "; usable once its CUDA state is restored");
  } else {
    SetCondition(c, api::kConditionReady, true, c.clone ? api::kReasonRestoredFromSource : api::kReasonRunning, started);
    if (from_snapshot) {
      SetCondition(c, api::kConditionRestored, true, api::kReasonRestoreComplete, started);
    } else {
      api::RemoveCondition(c.a.status.conditions, api::kConditionRestored);  // nothing restored in this run
    }
  }
  SetCondition(c, api::kConditionCheckpointFailed, false, api::kReasonClearedOnResume, "");
  if (c.a.spec.readiness_gate) {
    // Each run passes its gate anew (readiness_gate.h), from this RUNNING write on.
    SetCondition(c, api::kConditionReadinessGate, false, api::kReasonReadinessGatePending,
                 "waiting for the readiness gate's command to exit 0");
  }
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, false, "Resumed",
        (from_snapshot ? "restored " + RestoreWhat(c.a, c.clone)
         : from_data   ? "booted with the data of snapshot " + snap->id
                       : std::string("booted")) + " on worker " +
            c.a.status.worker_name + " in " + std::to_string(took) + "s");
  spdlog::info("actor resumed actor={} worker={} from_snapshot={} duration_s={:.3f}", c.key,
               c.a.status.worker_name, from_snapshot, took);
  if (resting == ActorState::kUnspecified) metrics_.ObserveStart(c.start_kind, Seconds(clock_.Now() - decided));
  if (finishes_later) return FinishRestore(c, RestoreStarted{start, trigger});
  if (c.a.spec.readiness_gate) return ReconcileOutcome{std::chrono::seconds(c.a.spec.readiness_gate->period_seconds)};
  return ReconcileOutcome{options_.liveness_period};
}

Status ActorReconciler::StartSandbox(Ctx& c, const api::Worker& worker) {
  // A leftover sandbox of an earlier life must not be in the way. After a pause or a suspend
  // its root is gone (the checkpoint's reconcile removed it), and the driver then asks runsc
  // nothing: a runsc process on the resume's path only when something may be left.
  if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
  std::error_code ec;
  fs::remove_all(c.ref.root, ec);
  fs::create_directories(c.ref.root, ec);
  std::ofstream(c.ref.root + kOwnerSuffix) << c.key;
  fs::create_directories(fs::path(c.ref.log_path).parent_path(), ec);

  const auto& snap = c.a.status.latest_snapshot;
  const bool from_snapshot = FromFullSnapshot(c.a) || c.clone;
  const auto deadline = std::chrono::seconds(c.a.spec.timeouts.restore_seconds);
  if (c.a.spec.gpu.count > 0) {
    const auto prepare_start = clock_.Now();
    auto bundle = PrepareGpuBundle(c, worker);
    if (!bundle.ok()) return bundle.status();
    c.ref.bundle = *bundle;
    spdlog::debug("gpu bundle prepared actor={} worker={} duration_ms={}", c.key, worker.metadata.name,
                  std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - prepare_start).count());
  }
  if (FromDataSnapshot(c.a)) {
    if (Status s = RestoreData(c, *snap, deadline); !s.ok()) return s;
  }
  if (!from_snapshot) return c.driver->Run(c.ref, deadline);
  // `source` holds a cached copy from eviction until the restore below has returned (runsc has
  // its files open by then).
  auto source = c.restore_source ? Result<SnapshotStore::RestoreSource>(std::move(*c.restore_source))
                                 : CheckRestoreSource(c);
  c.restore_source.reset();
  if (!source.ok()) return source.status();
  const std::string& id = c.clone ? c.clone->snapshot_id : snap->id;
  if (Status s = CheckSnapshotFits(c, source->manifest, worker); !s.ok()) return s;
  if (!c.clone && snap->location != source->dir) {
    spdlog::warn("snapshot location ignored actor={} snapshot={} location=\"{}\" restoring_from=\"{}\"", c.key,
                 snap->id, snap->location, source->dir);
  }
  RestoreOptions ro;
  ro.image_dir = source->dir;
  ro.deadline = deadline;
  if (Status s = c.driver->Restore(c.ref, ro); !s.ok()) return s;
  return RunPostRestoreHook(c, id, c.clone ? "clone" : "resume");
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::FetchBeforeClaim(Ctx& c, ActorState resting) {
  // From an object store this is the download; from a directory store, reading every byte to
  // verify it. Either can take seconds per GiB, and a worker claimed first (a GPU) would sit
  // idle through it; a snapshot that cannot be had would claim and free it for nothing.
  const bool committed =
      c.clone ? !c.clone->local : FromFullSnapshot(c.a) && c.a.status.latest_snapshot->node_name.empty();
  if (!committed) return std::nullopt;
  const auto start = clock_.Now();
  auto source = CheckRestoreSource(c);
  if (source.ok()) {
    c.restore_source = std::move(*source);
    return std::nullopt;
  }
  // Counted as the restore it is the first step of, as when it followed the claim.
  metrics_.ObserveDuration("restore", RestoreTrigger(c.a, c.clone), c.a.spec.gpu.count > 0, "error",
                           Seconds(clock_.Now() - start));
  metrics_.CountOperation("restore", "error", api::MetricReason(FailureReason(source.status())));
  return ResumeFailed(c, resting, source.status());
}

Result<SnapshotStore::RestoreSource> ActorReconciler::CheckRestoreSource(const Ctx& c) const {
  // The image directory comes from the actor's names and the snapshot's id, under this agent's
  // own roots — never from status.latestSnapshot.location, which every node agent may write. A
  // committed image is verified against its checksums first; a node-local one whose fsyncs were
  // deferred only if a reboot came between. A clone's source snapshot is the source's, under
  // its name and of its life.
  const auto& snap = c.a.status.latest_snapshot;
  const std::string& owner = c.clone ? c.clone->source_name : c.a.metadata.name;
  const std::string& owner_uid = c.clone ? c.clone->source_uid : c.a.metadata.uid;
  const std::string& id = c.clone ? c.clone->snapshot_id : snap->id;
  const bool committed = c.clone ? !c.clone->local : snap->node_name.empty();
  const auto check_start = clock_.Now();
  auto source = snapshots_.CheckForRestore(c.a.metadata.namespace_, owner, id, committed, owner_uid);
  if (!source.ok()) return UnrestorableOrRetry(source.status());
  spdlog::debug("snapshot checked for restore actor={} owner={} snapshot={} committed={} duration_ms={}", c.key,
                owner, id, committed,
                std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - check_start).count());
  return source;
}

Status ActorReconciler::CheckSnapshotFits(const Ctx& c, const SnapshotManifest& m, const api::Worker& worker) const {
  // The manifest, not the status every agent may write, says what the snapshot was taken on:
  // runsc restores onto the same root filesystem or not at all (an image's digest, or a bundle).
  const std::string running_on = c.image ? c.image->digest : "";
  if (m.image_digest != running_on) {
    auto what = [](const std::string& digest) { return digest.empty() ? std::string("a bundle") : "image " + digest; };
    return Status(Code::kFailedPrecondition,
                  "snapshot " + m.id + " was taken on " + what(m.image_digest) + "; this actor now runs on " +
                      what(running_on),
                  "snapshot_image_mismatch");
  }
  // A CUDA context comes back only on a GPU of the model and driver it was taken on
  // (api/gpu_identity.h). The binder places by the same rule; this holds for a pinned node.
  if (!m.cuda_checkpointed) return OkStatus();
  const std::string why = api::GpuMismatch(GpuTakenOn(m), workers_.GpuOf(worker.metadata.name));
  if (why.empty()) return OkStatus();
  return Status(Code::kFailedPrecondition, "snapshot " + m.id + ": " + why + " (worker " + worker.metadata.name + ")",
                "snapshot_gpu_mismatch");
}

Result<ReconcileOutcome> ActorReconciler::ResumeFailed(Ctx& c, ActorState resting, const Status& result) {
  WarnIfFailed(c.driver->Delete(c.ref), "sandbox of a failed resume not deleted", c.key);
  WarnIfFailed(workers_.Free(c.actor_ref), "worker of a failed resume not freed", c.key);
  const FailureVerdict v = JudgeFailure(c, RetryOp::kResume, result);
  // A bundle or image that cannot work, or a host error no retry can fix, fails the actor (its
  // snapshot is kept: a new generation resumes from it); anything else returns it to where it
  // rested, retried with backoff — a host error a bounded number of times.
  const bool permanent = v.host ? v.permanent : ResumeFailureIsPermanent(result);
  c.a.status.status = permanent ? ActorState::kFailed : resting;
  c.a.status.worker_name.clear();
  c.a.status.sandbox_id.clear();
  if (!c.a.status.latest_snapshot) c.a.status.cloned_from.reset();  // it did not start from it
  SetCondition(c, api::kConditionProgressing, false, v.reason, "resume failed");
  const std::string what = std::string(FromFullSnapshot(c.a) || c.clone ? "restore" : "start") + " failed: " + result.message();
  if (SetFailureCondition(c, api::kConditionReady, false, v, what)) {
    Event(c, true, "ResumeFailed", v.note + result.message());
  }
  spdlog::warn("resume failed actor={} reason={} permanent={} error=\"{}\"", c.key,
               v.reason, permanent, result.message());
  if (Status s = WriteStatus(c); !s.ok()) return s;
  if (permanent || v.gave_up) return ReconcileOutcome{};
  return result;  // transient: retried with backoff
}

Status ActorReconciler::RestoreData(Ctx& c, const api::Snapshot& snap, std::chrono::milliseconds deadline) {
  // Only what the manifest vouches for is unpacked over the actor's directories.
  const std::string& ns = c.a.metadata.namespace_;
  const std::string& name = c.a.metadata.name;
  auto source = snapshots_.CheckForRestore(ns, name, snap.id, /*committed=*/snap.node_name.empty(),
                                           c.a.metadata.uid, /*verify_local=*/true);
  if (!source.ok()) return UnrestorableOrRetry(source.status());
  return RestoreDataDirs(c.a.spec.bundle, source->dir, c.bundle_root, deadline);
}

std::string ActorReconciler::GpuBundleDir(const SandboxRef& ref) const {
  return options_.root + "/" + kGpuBundlesDir + "/" + ref.id;
}

Result<std::string> ActorReconciler::PrepareGpuBundle(const Ctx& c, const api::Worker& worker) {
  const auto count = static_cast<size_t>(c.a.spec.gpu.count);
  // The GPUs are this node's own discovery for the worker, never the Worker's spec in the API.
  const std::vector<std::string> devices = workers_.DevicesOf(worker.metadata.name);
  if (devices.size() < count) {
    // One worker is one GPU (--gpus); a multi-GPU actor needs a multi-GPU worker.
    return Status(Code::kInvalidArgument,
                  "the actor asks for " + std::to_string(count) + " GPU(s); worker " +
                      worker.metadata.name + " has " + std::to_string(devices.size()),
                  "gpu_count_unavailable");
  }
  // Read at every start: a spec regenerated after a driver upgrade must not need a restart.
  auto cdi = CdiRegistry::Load(options_.cdi_spec_dirs);
  GpuBundleRequest request;
  request.source_bundle = c.image ? ImageBundleDir(c.ref) : c.a.spec.bundle;
  request.out_dir = GpuBundleDir(c.ref);
  request.gpu_uuids.assign(devices.begin(), devices.begin() + count);
  request.gpu_kind = options_.gpu_cdi_kind;
  request.helper_device = options_.cuda_checkpoint_cdi_device;
  request.cuda_checkpoint_path = c.a.spec.gpu.cuda_checkpoint_path;
  request.helper_private_dir = api::kCudaCheckpointPrivateDir;
  // The library rides in with the helper's private directory (the CDI spec mounts it in every
  // GPU container); preloading it is the actor's choice.
  if (c.a.spec.gpu.fast_snapshot) request.preload_library = api::kFastSnapshotLibrary;
  auto written = cdi.ok() ? WriteGpuBundle(*cdi, request) : Result<std::string>(cdi.status());
  if (!written.ok() && written.status().reason() != "bad_bundle" &&
      written.status().reason() != "no_gpu_on_worker") {
    // The node's CDI specs are missing or broken: the node's problem, not the actor's. The
    // resume is retried with backoff, and the condition says what to fix.
    return Status(Code::kUnavailable, written.status().message(), "cdi_unavailable");
  }
  return written;
}

}  // namespace stasis
