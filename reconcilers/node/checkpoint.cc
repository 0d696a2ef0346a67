// The node agent's checkpoint actions: RUNNING → PAUSED / SUSPENDED (preflight, checkpoint or
// Data archive, snapshot completion, commit, status write, sandbox delete, worker release, in
// the order actor_reconciler.h's invariants give), and PAUSED → SUSPENDED (commit).
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/helper_preflight.h"
#include "snapshots/free_space.h"
#include "snapshots/writeback.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using api::ActorState;
using api::SnapshotTrigger;

constexpr char kSuccess[] = "success";
constexpr char kError[] = "error";

// The host's physical memory in bytes (INT64_MAX when it cannot be read: the runtime is asked).
int64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(pages) * page;
}

}  // namespace

// What a successful checkpoint hands to its completion.
struct ActorReconciler::Checkpointed {
  SnapshotTrigger trigger;
  api::SnapshotScope scope;
  std::string id;
  std::string image_dir;
  bool gpu = false;  // a CUDA checkpoint ran
  DeleteAt delete_at = DeleteAt::kAfterRelease;
  // The sandbox still lives after the save (-leave-running, or frozen for a Data archive): a
  // completion that fails leaves it running. `frozen`: stopped where it is (runsc pause) until
  // it is deleted, so that what it does after the save cannot diverge from the image.
  bool live = false;
  bool frozen = false;
  double took = 0;
  Durability durability = Durability::kSynced;
};

Status ActorReconciler::Preflight(Ctx& c) {
  CudaCheckpointCapability* cuda = c.driver->CudaCheckpoint();
  auto supports = cuda ? cuda->SupportsCudaCheckpoint() : Result<bool>(false);
  if (!supports.ok()) return supports.status();
  if (!*supports) {
    return Status(Code::kFailedPrecondition,
                  "this runsc has no -cuda-checkpoint-path: it cannot checkpoint a live CUDA context",
                  "runtime_lacks_cuda_checkpoint");
  }
  const std::string& path = c.a.spec.gpu.cuda_checkpoint_path;
  auto r = cuda->Exec(c.ref, {path, "--help"}, std::chrono::seconds(30));
  if (!r.ok()) return r.status();
  std::optional<HelperRun> loader;
  if (r->exit_code != 0) {
    // Is the private directory there? Its loader answers --help by itself.
    auto l = cuda->Exec(c.ref, {api::kCudaCheckpointPrivateLoader, "--help"}, std::chrono::seconds(30));
    if (!l.ok()) return l.status();
    loader = HelperRun{l->exit_code, l->err};
  }
  return JudgeHelperPreflight(path, HelperRun{r->exit_code, r->err}, loader);
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::PreflightOrKeepRunning(Ctx& c) {
  // No `runsc state` first: the checkpoint (or the freeze, or the preflight's exec) fails on a
  // sandbox that is not running, and the failure path asks the sandbox's state then.
  Status s = Preflight(c);
  if (s.ok()) {
    SetCondition(c, api::kConditionCudaCheckpointReady, true, api::kReasonPreflightPassed,
                 c.a.spec.gpu.cuda_checkpoint_path + " runs inside the container");
    return std::nullopt;
  }
  if (s.reason() == "container_stopped" || s.reason() == "not_found") {
    return ForceClean(c, api::kReasonSandboxDied,
                      "the sandbox is gone before the checkpoint: " + s.message());
  }
  SetCondition(c, api::kConditionCudaCheckpointReady, false,
               ConditionReason(s.reason().empty() ? "preflight_failed" : s.reason()), s.message());
  if (Status w = WriteStatus(c); !w.ok()) return w;
  Event(c, true, "PreflightFailed", s.message());
  spdlog::warn("gpu preflight failed actor={} error=\"{}\" action=keep_running", c.key, s.message());
  return ReconcileOutcome{options_.preflight_retry};
}

Result<std::vector<DataDir>> ActorReconciler::ResolveDataDirsOrKeepRunning(Ctx& c) {
  // Every declared directory must map to a host directory before anything starts; a dataDir
  // that cannot be kept is the spec's or the bundle's problem, and the actor runs on.
  // The bundle (its mounts included) may have changed since the start: it is confined again
  // before the agent reads its directories as root.
  auto confined = ConfineBundle(c.a.spec.bundle, c.a.metadata.namespace_, options_.bundle_roots);
  auto resolved = confined.ok() ? ResolveDataDirs(c.a.spec.bundle, c.a.spec.snapshots.data_dirs)
                                : Result<std::vector<DataDir>>(confined.status());
  if (resolved.ok()) return resolved;
  const std::string reason = ConditionReason(resolved.status().reason());
  retries_.NoteFailure(c.key, RetryOp::kCheckpoint, c.a.metadata.generation);
  SetCondition(c, api::kConditionCheckpointFailed, true, reason, resolved.status().message());
  SetCondition(c, api::kConditionProgressing, false, reason, "checkpoint refused; still running");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, true, "CheckpointFailed", resolved.status().message() + " (the actor keeps running)");
  spdlog::warn("data snapshot refused actor={} reason={} error=\"{}\" action=keep_running", c.key,
               resolved.status().reason(), resolved.status().message());
  return resolved.status();
}

Result<ReconcileOutcome> ActorReconciler::Checkpoint(Ctx& c, SnapshotTrigger trigger) {
  Checkpointed ck;
  ck.trigger = trigger;
  ck.scope = trigger == SnapshotTrigger::kPause ? c.a.spec.snapshots.on_pause : c.a.spec.snapshots.on_commit;
  const bool data = ck.scope == api::SnapshotScope::kData;
  // A Data snapshot holds no process state: no CUDA checkpoint, so no GPU preflight.
  ck.gpu = c.a.spec.gpu.count > 0 && !data;
  if (ck.gpu) {
    if (auto refused = PreflightOrKeepRunning(c)) return std::move(*refused);
  }
  std::vector<DataDir> data_dirs;
  if (data) {
    auto resolved = ResolveDataDirsOrKeepRunning(c);
    if (!resolved.ok()) return resolved.status();
    data_dirs = std::move(*resolved);
  }

  // A Full image is about the sandbox's memory: checked before anything is frozen. A Data
  // snapshot's archives are as large as its directories, which only reading them would tell;
  // a disk that fills under one fails the archive, and the sandbox is thawed (nothing lost).
  // A GPU image also holds the device memory the CUDA checkpoint first copies into host memory:
  // both the memory and the disk must hold it.
  if (!data) {
    const int64_t gpu = GpuImageBytes(c);
    if (auto refused = RefuseCheckpointWithoutHostMemory(c, gpu)) return std::move(*refused);
    if (auto refused = RefuseCheckpointWithoutSpace(c, gpu)) return std::move(*refused);
  }

  const bool pause = trigger == SnapshotTrigger::kPause;
  c.a.status.status = pause ? ActorState::kPausing : ActorState::kSuspending;
  c.a.status.transition_start_time.reset();
  SetCondition(c, api::kConditionProgressing, true, pause ? api::kReasonPausing : api::kReasonSuspending,
               "checkpointing");
  if (Status s = WriteStatus(c); !s.ok()) return s;

  ck.id = NewSnapshotId();
  auto dir = snapshots_.BeginLocal(c.a.metadata.namespace_, c.a.metadata.name, ck.id);
  if (!dir.ok()) return RefusedBeforeFreeze(c, dir.status(), api::kReasonSnapshotDirUnusable);
  ck.image_dir = *dir;
  CheckpointOptions co;
  co.image_dir = *dir;
  co.leave_running = c.a.spec.checkpoint_policy == api::CheckpointPolicy::kLeaveRunningThenStop;
  if (ck.gpu) co.cuda_checkpoint_path = c.a.spec.gpu.cuda_checkpoint_path;
  co.deadline = std::chrono::seconds(c.a.spec.timeouts.checkpoint_seconds);
  // A Pause's image stays on this node: its fsyncs need not hold up the PAUSED write (a crash
  // of the agent cannot lose the page cache; a reboot can, and then the restore verifies it).
  // A Suspend's must be durable where the store keeps it: on this disk only when the store
  // takes the local files themselves.
  ck.durability = pause ? options_.pause_durability : snapshots_.SuspendDurability();
  const auto start = clock_.Now();
  Status result;
  {
    // A snapshot fsynced before it is complete has its write-back started while runsc writes.
    std::optional<WritebackPump> writeback;
    if (!data && ck.durability == Durability::kSynced) writeback.emplace(*dir);
    result = data ? CheckpointData(c, data_dirs, *dir, co.deadline) : c.driver->Checkpoint(c.ref, co);
  }
  ck.took = Seconds(clock_.Now() - start);
  const std::string trigger_name = api::ToString(trigger);
  metrics_.ObserveDuration("checkpoint", trigger_name, ck.gpu, result.ok() ? kSuccess : kError, ck.took);
  metrics_.CountOperation("checkpoint", result.ok() ? kSuccess : kError,
                          result.ok() ? "" : api::MetricReason(FailureReason(result)));
  if (!result.ok()) {
    std::error_code ec;
    fs::remove_all(*dir, ec);
    return CheckpointFailed(c, result);
  }
  ck.delete_at = SandboxDeleteAfterCheckpoint(co.leave_running, data, c.a.spec.gpu.count > 0);
  ck.live = co.leave_running || data;
  ck.frozen = data;
  if (co.leave_running) {
    // Held still until the snapshot is complete and the sandbox deleted: a workload that ran on
    // would write to its data directories what the image will never know. Not frozen (an old
    // runtime, a race with its exit), it runs on meanwhile, as it did before it was asked.
    const Status frozen = c.driver->Freeze(c.ref);
    ck.frozen = frozen.ok();
    if (!frozen.ok()) spdlog::warn("freeze after -leave-running failed actor={} error=\"{}\"", c.key, frozen.message());
  }
  return CompleteCheckpoint(c, ck);
}

int64_t ActorReconciler::GpuImageBytes(Ctx& c) {
  if (c.a.spec.gpu.count <= 0) return 0;
  auto used = options_.gpu_memory_used(workers_.DevicesOf(c.a.status.worker_name));
  if (used.ok()) return *used;
  // Unknown (no nvidia-smi here): the margin must hold it, as it must for runtimes that do not
  // report their memory.
  spdlog::warn("gpu memory unknown actor={} error=\"{}\"", c.key, used.status().message());
  return 0;
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::RefuseCheckpointWithoutHostMemory(Ctx& c,
                                                                                       int64_t gpu) {
  if (gpu <= 0) return std::nullopt;
  auto available = options_.host_memory_available();
  if (!available.ok()) {
    spdlog::warn("host memory unknown actor={} error=\"{}\"", c.key, available.status().message());
    return std::nullopt;
  }
  const int64_t margin = options_.checkpoint_memory_margin;
  if (CheckpointFits(*available, gpu, margin)) return std::nullopt;
  const Status refused(Code::kFailedPrecondition,
                       "the host has " + std::to_string(*available) +
                           " bytes of memory available; the CUDA checkpoint copies the GPU memory in use (" +
                           std::to_string(gpu) + ") into it and needs " + std::to_string(margin) +
                           " more: not started",
                       "insufficient_host_memory");
  spdlog::warn("checkpoint refused actor={} reason=insufficient_host_memory available_bytes={} gpu_bytes={} "
               "margin_bytes={}",
               c.key, *available, gpu, margin);
  return RefusedBeforeFreeze(c, refused, api::kReasonInsufficientHostMemory);
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::RefuseCheckpointWithoutSpace(Ctx& c, int64_t gpu) {
  const std::string& root = snapshots_.local_root();
  std::error_code ec;
  fs::create_directories(root, ec);
  auto free = FreeBytes(root);
  if (!free.ok()) return std::nullopt;  // not askable: the checkpoint's own writes will tell
  const int64_t margin = options_.checkpoint_space_margin;
  // No sandbox's image outgrows the host's memory: with room for that, the runtime need not be
  // asked (one runsc call less on the pause's path).
  const int64_t host = HostMemoryBytes();
  if (host <= std::numeric_limits<int64_t>::max() - gpu && CheckpointFits(*free, host + gpu, margin)) {
    return std::nullopt;
  }
  // The image is about the size of the sandbox's memory (runsc writes its pages). Unknown, the
  // margin alone is asked for.
  auto usage = c.driver->MemoryUsage(c.ref);
  const int64_t expected = (usage.ok() ? *usage : 0) + gpu;
  if (CheckpointFits(*free, expected, margin)) return std::nullopt;
  const Status refused(Code::kFailedPrecondition,
                       "the snapshot's file system (" + root + ") has " + std::to_string(*free) +
                           " bytes free; the checkpoint needs " + std::to_string(expected + margin) + " (memory " +
                           (usage.ok() ? std::to_string(*usage) : std::string("unknown")) + " + GPU memory " +
                           std::to_string(gpu) + " + margin " + std::to_string(margin) + "): not started",
                       "insufficient_space");
  spdlog::warn("checkpoint refused actor={} reason=insufficient_space free_bytes={} expected_bytes={} "
               "gpu_bytes={} margin_bytes={}",
               c.key, *free, expected, gpu, margin);
  return RefusedBeforeFreeze(c, refused, api::kReasonInsufficientSpace);
}

Result<ReconcileOutcome> ActorReconciler::RefusedBeforeFreeze(Ctx& c, const Status& failure, const char* reason) {
  // Nothing was frozen yet: the actor runs on, and the checkpoint is retried with backoff.
  c.a.status.status = ActorState::kRunning;
  FailureVerdict v = JudgeFailure(c, RetryOp::kCheckpoint, failure);
  if (!v.host) v.reason = reason;
  const bool news = SetFailureCondition(c, api::kConditionCheckpointFailed, true, v, failure.message());
  SetCondition(c, api::kConditionProgressing, false, v.reason, "");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  if (news) Event(c, true, "CheckpointFailed", v.note + failure.message() + " (the actor keeps running)");
  if (v.gave_up) return ReconcileOutcome{};
  return failure;
}

Result<ReconcileOutcome> ActorReconciler::CheckpointFailed(Ctx& c, const Status& failure) {
  if (ClassifyCheckpointFailure(failure, c.driver->State(c.ref)) == CheckpointFailure::kSurvived) {
    // The workload survived (a refused save, -leave-running, an error before the save, a Data
    // archive that failed and was thawed, a full disk): it keeps running, retried with backoff
    // (a host error a bounded number of times).
    c.a.status.status = ActorState::kRunning;
    const FailureVerdict v = JudgeFailure(c, RetryOp::kCheckpoint, failure);
    const bool news = SetFailureCondition(c, api::kConditionCheckpointFailed, true, v, failure.message());
    SetCondition(c, api::kConditionProgressing, false, v.reason,
                 v.gave_up ? "checkpoint failed; still running; not retried until the spec changes"
                           : "checkpoint failed; still running");
    if (Status s = WriteStatus(c); !s.ok()) return s;
    if (news) Event(c, true, "CheckpointFailed", v.note + failure.message() + " (the actor keeps running)");
    if (v.gave_up) return ReconcileOutcome{};
    return failure;
  }
  // The sandbox is dead or suspect (timeout): never retry, clean up.
  return ForceClean(c, FailureReason(failure), "checkpoint failed: " + failure.message());
}

Status ActorReconciler::CheckpointData(Ctx& c, const std::vector<DataDir>& dirs,
                                       const std::string& image_dir, std::chrono::milliseconds deadline) {
  // Frozen, the workload cannot change its files while they are read: the archive is a
  // consistent copy. The sandbox is deleted once the snapshot is complete.
  if (Status s = c.driver->Freeze(c.ref); !s.ok()) return s;
  Status archived = ArchiveDataDirs(dirs, image_dir, deadline);
  if (!archived.ok()) {
    // Nothing was lost: the workload runs on, as if the pause had not been asked yet.
    if (Status t = c.driver->Thaw(c.ref); !t.ok()) {
      spdlog::error("thaw after a failed data archive failed actor={} error=\"{}\"", c.key, t.message());
    }
    spdlog::warn("data archive failed actor={} error=\"{}\" action=thaw_keep_running", c.key, archived.message());
  }
  return archived;
}

api::Snapshot ActorReconciler::CommitJustCompleted(const SnapshotManifest& m, api::Snapshot local,
                                                   Status* commit_failure) {
  const auto start = clock_.Now();
  auto committed = snapshots_.Commit(m.ns, m.name, m.id, /*just_completed=*/true);
  const double took = Seconds(clock_.Now() - start);
  // Labelled as its CommitFailed condition says (CompleteCheckpoint sets it).
  const std::string reason = committed.ok() ? "" : api::MetricReason(CommitFailedReason(committed.status().reason()));
  metrics_.ObserveDuration("commit", m.trigger, m.cuda_checkpointed, committed.ok() ? kSuccess : kError, took);
  metrics_.CountOperation("commit", committed.ok() ? kSuccess : kError, reason);
  if (!committed.ok()) {
    // Nothing is lost: the complete snapshot stays on this node and the actor rests PAUSED
    // until the store takes it (the commit is retried).
    *commit_failure = committed.status();
    return local;
  }
  return ToSnapshot(*committed, snapshots_.StorePath(m.ns, m.name, m.id), "");
}

void ActorReconciler::DeleteSandboxIfAt(Ctx& c, DeleteAt step, DeleteAt planned, bool* deleted) {
  if (step != planned) return;
  if (Status s = c.driver->Delete(c.ref); !s.ok()) {
    spdlog::warn("sandbox delete after checkpoint failed actor={} error=\"{}\"", c.key, s.message());
    return;
  }
  *deleted = true;
}

SnapshotGpu ActorReconciler::TakenOn(const Ctx& c) const {
  const std::string& worker = c.a.status.worker_name;
  const api::GpuIdentity g = workers_.GpuOf(worker);
  if (!g.Known()) return {};
  std::vector<std::string> devices = workers_.DevicesOf(worker);
  devices.resize(std::min(devices.size(), static_cast<size_t>(std::max(c.a.spec.gpu.count, 0))));
  return {g.model, g.driver_version, g.cuda_version, std::move(devices)};
}

Result<SnapshotManifest> ActorReconciler::CompleteSnapshot(Ctx& c, const Checkpointed& ck) {
  SnapshotManifest m;
  m.id = ck.id;
  m.ns = c.a.metadata.namespace_;
  m.name = c.a.metadata.name;
  m.owner_uid = c.a.metadata.uid;
  m.scope = api::ToString(ck.scope);
  m.trigger = api::ToString(ck.trigger);
  if (auto v = c.driver->Version(); v.ok()) m.runtime_version = *v;
  m.image_digest = c.a.status.image_digest;  // what a restore must run on (actor_image.cc)
  m.cuda_checkpointed = ck.gpu;
  if (ck.gpu) m.gpu = TakenOn(c);
  // The request as the spec has it now; which path each stage took is in the workload's log.
  m.gpu_fast_snapshot = ck.gpu && c.a.spec.gpu.fast_snapshot;
  m.taken_at = FormatMicroTime(clock_.WallNow());  // ordered within a second (snapshot_store.h)
  m.duration_seconds = ck.took;
  auto done = snapshots_.CompleteLocal(m, ck.durability);
  if (!done.ok()) {
    // Neither half may stay: the partial image, nor a renamed one whose last fsync failed.
    std::error_code ec;
    fs::remove_all(ck.image_dir, ec);
    WarnIfFailed(snapshots_.RemoveLocal(m.ns, m.name, m.id), "incomplete snapshot not removed", c.key);
    return done.status();
  }
  metrics_.ObserveSnapshot(m.trigger, m.scope, ck.gpu, static_cast<double>(done->total_bytes), ck.took);
  return done;
}

Result<ReconcileOutcome> ActorReconciler::SnapshotNotCompleted(Ctx& c, const Checkpointed& ck, const Status& failure) {
  const std::string what = "the checkpoint succeeded but the snapshot could not be completed: " + failure.message();
  // A Direct checkpoint stopped the sandbox as it saved: nothing is left to run on.
  if (!ck.live) return ForceClean(c, api::kReasonSnapshotIncomplete, what);
  if (ck.frozen) {
    if (Status t = c.driver->Thaw(c.ref); !t.ok()) {
      return ForceClean(c, api::kReasonSnapshotIncomplete, what + "; thaw failed: " + t.message());
    }
  }
  // The sandbox was kept alive for exactly this: the actor runs on, with its last good snapshot
  // (latestSnapshot untouched), and the checkpoint is retried with backoff (a host error — a
  // full disk — a bounded number of times).
  spdlog::warn("snapshot not completed actor={} error=\"{}\" action=keep_running", c.key, failure.message());
  return RefusedBeforeFreeze(c, Status(failure.code(), what, failure.reason()), api::kReasonSnapshotIncomplete);
}

Result<ReconcileOutcome> ActorReconciler::CompleteCheckpoint(Ctx& c, const Checkpointed& ck) {
  // The image is written; nothing is deleted before it is a complete snapshot (manifest written
  // and renamed; a Suspend's fsynced, and put into the store). A sandbox that still lives
  // (-leave-running; frozen for a Data archive) goes then, before the status says the actor
  // is at rest: a completion that fails (a full disk, an I/O error) leaves it running. One that
  // the checkpoint stopped holds nothing but runsc's state — and, for a GPU actor, possibly its
  // device until the sandbox is torn down (~1 s on an H200) —: it is deleted after the status
  // write, off the pause's path, and a GPU one before its worker is given back. A crash in
  // between leaves a sandbox of an actor at rest, which every later reconcile and restart
  // recovery remove.
  bool deleted = false;
  auto done = CompleteSnapshot(c, ck);
  if (!done.ok()) return SnapshotNotCompleted(c, ck, done.status());
  retries_.Clear(c.key, RetryOp::kCheckpoint);
  const SnapshotManifest& m = *done;
  api::Snapshot snap = ToSnapshot(m, snapshots_.LocalPath(m.ns, m.name, m.id), options_.node);
  Status commit_failure;
  const bool suspend = ck.trigger == SnapshotTrigger::kSuspend;
  if (suspend) snap = CommitJustCompleted(m, snap, &commit_failure);
  // Committed, or complete on this node when the store refused it (PAUSED): safe either way.
  DeleteSandboxIfAt(c, DeleteAt::kBeforeWrite, ck.delete_at, &deleted);
  const ActorState final_state = suspend && commit_failure.ok() ? ActorState::kSuspended : ActorState::kPaused;
  const char* final_reason = final_state == ActorState::kPaused ? api::kReasonPaused : api::kReasonSuspended;

  const std::string worker_name = c.a.status.worker_name;
  c.a.status.status = final_state;
  c.a.status.latest_snapshot = snap;
  c.a.status.worker_name.clear();
  c.a.status.sandbox_id.clear();
  SetCondition(c, api::kConditionProgressing, false, final_reason, "");
  SetCondition(c, api::kConditionReady, false, final_reason,
               "snapshot " + m.id + " (" + std::to_string(snap.size_bytes) + " bytes)");
  SetCondition(c, api::kConditionCheckpointFailed, false, api::kReasonCheckpointed, "");
  if (!commit_failure.ok()) {
    SetCondition(c, api::kConditionCommitFailed, true, CommitFailedReason(commit_failure.reason()),
                 commit_failure.message());
  } else {
    api::RemoveCondition(c.a.status.conditions, api::kConditionCommitFailed);
  }
  if (Status s = WriteStatus(c); !s.ok()) return s;
  spdlog::info("actor checkpointed actor={} trigger={} scope={} snapshot={} size_bytes={} duration_s={:.3f} status={}",
               c.key, m.trigger, m.scope, m.id, snap.size_bytes, ck.took, api::ToString(final_state));
  // The worker is given back after the write that ends the transition, off the pause's path:
  // the sandbox no longer runs (a Direct checkpoint stopped it; any other was deleted above).
  // A failed release is settled by the next reconcile's quorum read (the actor is at rest;
  // the error returned below makes one), a crash here by restart recovery; the queue runs no
  // other reconcile of this actor (a resume) before this one returns.
  DeleteSandboxIfAt(c, DeleteAt::kBeforeRelease, ck.delete_at, &deleted);
  const Status released = workers_.Release(worker_name, c.actor_ref);
  if (!released.ok()) retries_.SetUnsettled(c.key, true);

  // Off the pause's path: nothing below decides anything a crash could lose.
  DeleteSandboxIfAt(c, DeleteAt::kAfterRelease, ck.delete_at, &deleted);
  if (deleted) RemoveSandboxRoot(c.ref);
  // The local copy of a committed snapshot, and older node-local snapshots, are superseded.
  if (final_state == ActorState::kSuspended) {
    WarnIfFailed(snapshots_.RemoveLocal(m.ns, m.name, m.id), "committed snapshot's local copy not removed", c.key);
  }
  for (const auto& old : snapshots_.ListLocal(m.ns, m.name)) {
    if (old.id != m.id) WarnIfFailed(snapshots_.RemoveLocal(m.ns, m.name, old.id), "superseded snapshot not removed", c.key);
  }
  Event(c, false, final_reason,
        "snapshot " + m.id + " (" + m.scope + "): " + std::to_string(snap.size_bytes) + " bytes, checkpoint " +
            std::to_string(ck.took) + "s");
  if (!commit_failure.ok()) return Status(Code::kUnavailable, commit_failure.message(), "store_error");
  if (!released.ok()) return released;
  return ReconcileOutcome{};
}

Result<ReconcileOutcome> ActorReconciler::CommitPaused(Ctx& c) {
  const auto& snap = c.a.status.latest_snapshot;
  if (!snap || snap->node_name.empty()) {
    c.a.status.status = ActorState::kSuspended;
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return ReconcileOutcome{};
  }
  if (snap->node_name != options_.node) return ReconcileOutcome{};  // its node commits it
  // Host errors gave up on this generation: the snapshot stays here, PAUSED, until the spec changes.
  if (retries_.GaveUp(c.key, RetryOp::kCommit, c.a.metadata.generation)) return ReconcileOutcome{};
  const bool gpu = c.a.spec.gpu.count > 0;
  const auto start = clock_.Now();
  auto committed = snapshots_.Commit(c.a.metadata.namespace_, c.a.metadata.name, snap->id);
  metrics_.ObserveDuration("commit", "Suspend", gpu, committed.ok() ? kSuccess : kError,
                           Seconds(clock_.Now() - start));
  if (committed.ok()) metrics_.CountOperation("commit", kSuccess, "");
  if (!committed.ok()) {
    FailureVerdict v = JudgeFailure(c, RetryOp::kCommit, committed.status());
    // Refused credentials and a missing bucket are named (a person must fix them); any other
    // failure of the store is StoreUnavailable. Said by the condition alone, as it always was.
    if (!v.host) v.reason = CommitFailedReason(committed.status().reason());
    metrics_.CountOperation("commit", kError, api::MetricReason(v.reason));
    const bool news = SetFailureCondition(c, api::kConditionCommitFailed, true, v, committed.status().message()) && v.host;
    if (Status s = WriteStatus(c); !s.ok()) return s;
    if (news) Event(c, true, "CommitFailed", v.note + committed.status().message() + " (the snapshot stays on this node)");
    if (v.gave_up) return ReconcileOutcome{};
    return committed.status();
  }
  retries_.Clear(c.key, RetryOp::kCommit);
  const std::string id = snap->id;
  WarnIfFailed(snapshots_.RemoveLocal(c.a.metadata.namespace_, c.a.metadata.name, id),
               "committed snapshot's local copy not removed", c.key);
  c.a.status.latest_snapshot =
      ToSnapshot(*committed, snapshots_.StorePath(c.a.metadata.namespace_, c.a.metadata.name, id), "");
  c.a.status.status = ActorState::kSuspended;
  api::RemoveCondition(c.a.status.conditions, api::kConditionCommitFailed);
  SetCondition(c, api::kConditionReady, false, api::kReasonSuspended, "snapshot " + id + " committed");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, false, "Suspended", "paused snapshot " + id + " committed to the store");
  return ReconcileOutcome{};
}

}  // namespace stasis
