#include "reconcilers/node/actor_reconciler.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "api/json_mapping.h"
#include "api/validation.h"
#include "reconcilers/api_resources.h"
#include "snapshots/data_dirs.h"
#include "runtimes/gpu/gpu_bundle.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using api::ActorState;
using api::DesiredState;
using api::SnapshotTrigger;

double Seconds(Clock::TimePoint::duration d) { return std::chrono::duration<double>(d).count(); }

// A snapshot check that failed, as a resume failure: missing or corrupt, the snapshot can never
// be restored (kFailedPrecondition fails the actor); a store that cannot be read now is retried.
Status UnrestorableOrRetry(const Status& check) {
  const bool gone = check.reason() == "snapshot_not_found" || check.reason() == "snapshot_corrupt";
  return Status(gone ? Code::kFailedPrecondition : Code::kUnavailable, check.message(), check.reason());
}

// The status an actor rests in when it is not running: where a resume starts from.
ActorState RestingState(const api::Actor& a) {
  if (!a.status.latest_snapshot) return ActorState::kFailed;
  return a.status.latest_snapshot->trigger == SnapshotTrigger::kPause &&
                 !a.status.latest_snapshot->node_name.empty()
             ? ActorState::kPaused
             : ActorState::kSuspended;
}

}  // namespace

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

struct ActorReconciler::Ctx {
  api::Actor before;  // as last read or written
  api::Actor a;       // the working copy; WriteStatus sends the difference
  SandboxRef ref;
  api::ActorRef actor_ref;
  std::string key;
  RuntimeDriver* driver = nullptr;  // the driver of spec.runtime
  bool wrote = false;    // an API write of this reconcile succeeded
  bool claimed = false;  // Resume claimed a worker
};

ActorReconciler::ActorReconciler(ActorReconcilerOptions options, KubeClient& client,
                                 ActorLookup actors, RuntimeDriver& driver,
                                 SnapshotStore& snapshots, NodeWorkers& workers,
                                 SnapshotMetrics& metrics, EventRecorder* events, Clock& clock)
    : ActorReconciler(std::move(options), client, std::move(actors), RuntimeDrivers{&driver, nullptr},
                      snapshots, workers, metrics, events, clock) {}

ActorReconciler::ActorReconciler(ActorReconcilerOptions options, KubeClient& client,
                                 ActorLookup actors, RuntimeDrivers drivers,
                                 SnapshotStore& snapshots, NodeWorkers& workers,
                                 SnapshotMetrics& metrics, EventRecorder* events, Clock& clock)
    : options_(std::move(options)), client_(client), actors_(std::move(actors)), drivers_(drivers),
      snapshots_(snapshots), workers_(workers), metrics_(metrics), events_(events), clock_(clock) {}

RuntimeDriver* ActorReconciler::DriverFor(api::Runtime runtime) const {
  return runtime == api::Runtime::kMicrovm ? drivers_.microvm : drivers_.gvisor;
}

Status ActorReconciler::DeleteAnyRuntime(const SandboxRef& ref) {
  // Which runtime ran it is not known here (its actor is gone); each driver deletes only what
  // it finds and succeeds on nothing.
  for (RuntimeDriver* d : {drivers_.gvisor, drivers_.microvm}) {
    if (!d) continue;
    if (Status s = d->Delete(ref); !s.ok()) return s;
  }
  return OkStatus();
}

SandboxRef ActorReconciler::SandboxFor(const std::string& ns, const std::string& name) const {
  // Namespaces cannot contain '_', so "<ns>_<name>" is unique and a valid runsc container id.
  const std::string id = ns + "_" + name;
  SandboxRef ref;
  ref.id = id;
  ref.root = options_.root + "/run/" + id;
  ref.log_path = options_.root + "/logs/" + id + ".log";
  return ref;
}

bool ActorReconciler::OwnedHere(const api::Actor& a) const {
  if (!a.spec.node_name.empty()) return a.spec.node_name == options_.node;
  return a.status.node_name == options_.node;
}

void ActorReconciler::SetCondition(Ctx& c, const std::string& type, bool status,
                                   const std::string& reason, const std::string& message) {
  api::Condition cond;
  cond.type = type;
  cond.status = status ? api::ConditionStatus::kTrue : api::ConditionStatus::kFalse;
  cond.observed_generation = c.a.metadata.generation;
  cond.reason = reason;
  cond.message = api::TruncateMessage(message, 4096);
  api::SetCondition(c.a.status.conditions, cond,
                    std::chrono::floor<std::chrono::seconds>(clock_.WallNow()));
}

void ActorReconciler::Event(Ctx& c, bool warning, const std::string& reason,
                            const std::string& message) {
  if (!events_) return;
  ObjectReference ref;
  ref.api_version = api::kApiVersion;
  ref.kind = api::kActorKind;
  ref.namespace_ = c.a.metadata.namespace_;
  ref.name = c.a.metadata.name;
  ref.uid = c.a.metadata.uid;
  ref.resource_version = c.a.metadata.resource_version;
  events_->Event(ref, warning ? EventType::kWarning : EventType::kNormal, reason, message);
}

Status ActorReconciler::WriteStatus(Ctx& c) {
  c.a.status.observed_generation = c.a.metadata.generation;
  if (api::IsTransitioning(c.a.status.status)) {
    if (!c.a.status.transition_start_time) {
      c.a.status.transition_start_time = std::chrono::floor<std::chrono::seconds>(clock_.WallNow());
    }
  } else {
    c.a.status.transition_start_time.reset();
  }
  auto patch = api::ActorStatusMergePatch(c.before, c.a);
  if (!patch) return OkStatus();
  (*patch)["metadata"]["resourceVersion"] = c.before.metadata.resource_version;
  auto r = client_.Patch(kActorType, c.a.metadata.namespace_, c.a.metadata.name,
                         PatchType::kMerge, *patch, "status");
  if (!r.ok()) {
    // A conflict is routine (a stale cache, a concurrent spec change): decided again on a read.
    spdlog::log(r.status().code() == Code::kAborted ? spdlog::level::debug : spdlog::level::warn,
                "status write failed actor={} status={} error=\"{}\"", c.key,
                api::ToString(c.a.status.status), r.status().ToString());
    return r.status();
  }
  return Adopt(c, *r);
}

Status ActorReconciler::Adopt(Ctx& c, const json& written) {
  // What the API server returned is the new baseline: the next write's diff and
  // resourceVersion precondition start from it.
  auto fresh = api::ActorFromJson(written);
  if (!fresh.ok()) return fresh.status();
  c.before = *fresh;
  c.a = *fresh;
  c.wrote = true;
  return OkStatus();
}

Status ActorReconciler::SetFinalizer(Ctx& c, bool present) {
  api::Actor after = c.a;
  bool changed = present ? after.metadata.AddFinalizer(api::kActorFinalizer)
                         : after.metadata.RemoveFinalizer(api::kActorFinalizer);
  if (!changed) return OkStatus();
  json patch = {{"metadata",
                 {{"finalizers", after.metadata.finalizers},
                  {"resourceVersion", c.a.metadata.resource_version}}}};
  auto r = client_.Patch(kActorType, c.a.metadata.namespace_, c.a.metadata.name,
                         PatchType::kMerge, patch);
  if (!r.ok()) {
    // Gone already: the finalizer was the last thing holding it.
    if (!present && r.status().code() == Code::kNotFound) return OkStatus();
    return r.status();
  }
  return Adopt(c, *r);
}

api::Snapshot ActorReconciler::ToSnapshot(const SnapshotManifest& m, const std::string& location,
                                          const std::string& node) const {
  api::Snapshot s;
  s.id = m.id;
  s.trigger = m.trigger == "Suspend" ? SnapshotTrigger::kSuspend : SnapshotTrigger::kPause;
  s.scope = m.scope == "Data" ? api::SnapshotScope::kData : api::SnapshotScope::kFull;
  s.location = location;
  s.node_name = node;
  s.size_bytes = m.total_bytes;
  s.duration_seconds = m.duration_seconds;
  s.cuda_checkpointed = m.cuda_checkpointed;
  s.runsc_version = m.runtime_version;
  if (auto t = ParseTime(m.taken_at); t.ok()) s.taken_at = *t;
  return s;
}

std::optional<ReconcileOutcome> ActorReconciler::NothingToDo(const api::Actor& a,
                                                            const Request& request) {
  if (!OwnedHere(a) || a.metadata.IsBeingDeleted() ||
      !a.metadata.HasFinalizer(api::kActorFinalizer) ||
      a.status.observed_generation != a.metadata.generation) {
    return std::nullopt;
  }
  const DesiredState desired = a.spec.desired_state;
  const SandboxRef ref = SandboxFor(request.ns, request.name);
  if (a.status.status == ActorState::kRunning && desired == DesiredState::kRunning) {
    // Running as wanted: the liveness check needs only the runtime; a sandbox found dead is
    // cleaned on the quorum-read path below.
    RuntimeDriver* driver = DriverFor(a.spec.runtime);
    if (!driver) return std::nullopt;
    SandboxRef r = ref;
    r.bundle = a.spec.bundle;
    auto state = driver->State(r);
    if (!state.ok() || *state != SandboxState::kRunning) return std::nullopt;
    return ReconcileOutcome{options_.liveness_period};
  }
  const bool at_rest = (a.status.status == ActorState::kPaused && desired == DesiredState::kPaused) ||
                       (a.status.status == ActorState::kSuspended && desired == DesiredState::kSuspended) ||
                       a.status.status == ActorState::kFailed;  // left only by a new generation
  // A sandbox root left behind (a forced cleanup while this agent was away) is work to do.
  if (!at_rest || fs::exists(ref.root)) return std::nullopt;
  return ReconcileOutcome{};
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::StartFromCache(const api::Actor& a,
                                                                        const Request& request,
                                                                        bool* claimed) {
  if (!OwnedHere(a) || a.metadata.IsBeingDeleted() ||
      !a.metadata.HasFinalizer(api::kActorFinalizer) || !api::ValidateActor(a).empty()) {
    return std::nullopt;
  }
  Ctx c{a, a, SandboxFor(request.ns, request.name), api::ActorRef{request.ns, request.name},
        request.Key()};
  c.ref.bundle = c.a.spec.bundle;
  c.driver = DriverFor(c.a.spec.runtime);
  if (!c.driver) return std::nullopt;
  const DesiredState desired = c.a.spec.desired_state;
  const ActorState status = c.a.status.status;
  Result<ReconcileOutcome> r = ReconcileOutcome{};
  if (status == ActorState::kRunning && desired != DesiredState::kRunning &&
      RetryWait(c, RetryOp::kCheckpoint).count() == 0) {
    r = Checkpoint(c, desired == DesiredState::kPaused ? SnapshotTrigger::kPause : SnapshotTrigger::kSuspend);
  } else if ((status == ActorState::kPaused || status == ActorState::kSuspended) &&
             desired == DesiredState::kRunning && !fs::exists(c.ref.root)) {
    r = Resume(c);
  } else {
    return std::nullopt;
  }
  if (r.ok() || r.status().code() != Code::kAborted || c.wrote) return r;
  *claimed = c.claimed;
  spdlog::debug("cached actor was stale actor={} status={} action=quorum_read", c.key, api::ToString(status));
  return std::nullopt;
}

Result<ReconcileOutcome> ActorReconciler::Reconcile(const Request& request) {
  const std::string key = request.Key();
  ObjectPtr obj = actors_(key);
  if (!obj) {
    // Gone from the API (or never ours): nothing of it may remain on this node.
    SandboxRef ref = SandboxFor(request.ns, request.name);
    if (fs::exists(ref.root)) {
      if (Status s = DeleteAnyRuntime(ref); !s.ok()) return s;
      std::error_code ec;
      fs::remove_all(ref.root, ec);
      fs::remove_all(GpuBundleDir(ref), ec);
      snapshots_.RemoveAllLocal(request.ns, request.name);
      spdlog::info("orphan sandbox removed actor={}", key);
    }
    if (Status s = workers_.Free(api::ActorRef{request.ns, request.name}); !s.ok()) return s;
    SetUnsettled(key, false);
    return ReconcileOutcome{};
  }
  bool unsettled = Unsettled(key);
  // An actor the cache shows at rest with nothing to do is left without a read: if the cache
  // is stale, the newer version's watch event is on its way and reconciles it again. (This is
  // most reconciles: the echo of this agent's own status write, and every actor at start-up.)
  // A transition's start needs no read either (StartFromCache). A worker to settle needs one.
  if (!unsettled) {
    if (auto cached = api::ActorFromJson(*obj); cached.ok()) {  // parsed once for both
      if (auto done = NothingToDo(*cached, request)) return *done;
      if (auto started = StartFromCache(*cached, request, &unsettled)) return std::move(*started);
    }
  }
  // Settled after the read below — or, if it fails, after the read of a later reconcile.
  if (unsettled) SetUnsettled(key, true);
  // Everything else is decided on a quorum read. A watch event may lag our own last write, and
  // acting on a stale status (an *ING this agent has already finished, a RUNNING already
  // paused) would repeat or undo a transition.
  auto live = client_.Get(kActorType, request.ns, request.name);
  if (!live.ok()) {
    // NotFound: its DELETED event follows, and the reconcile of a deleted actor frees its worker.
    if (live.status().code() == Code::kNotFound) return ReconcileOutcome{};
    return live.status();
  }
  auto parsed = api::ActorFromJson(*live);
  if (!parsed.ok()) {
    spdlog::error("actor unreadable actor={} error=\"{}\"", key, parsed.status().ToString());
    return ReconcileOutcome{};  // nothing to act on until it changes
  }
  if (unsettled) {
    // An actor at rest holds no worker: give back what a stale resume claimed or a failed
    // release kept (the path below claims again if it still must resume). A running or
    // transitioning actor keeps the worker it holds.
    if (parsed->status.status != ActorState::kRunning && !api::IsTransitioning(parsed->status.status)) {
      if (Status s = workers_.Free(api::ActorRef{request.ns, request.name}); !s.ok()) return s;
    }
    SetUnsettled(key, false);
  }
  Ctx c{*parsed, *parsed, SandboxFor(request.ns, request.name),
        api::ActorRef{request.ns, request.name}, key};
  c.ref.bundle = c.a.spec.bundle;
  if (!OwnedHere(c.a)) return ReconcileOutcome{};
  c.driver = DriverFor(c.a.spec.runtime);
  // An actor of a runtime this node does not run never started here: nothing of it to delete
  // but what any driver would find.
  if (c.a.metadata.IsBeingDeleted()) {
    if (!c.driver) c.driver = drivers_.gvisor;
    return Delete(c);
  }
  if (Status s = SetFinalizer(c, true); !s.ok()) return s;

  if (auto errors = api::ValidateActor(c.a); !errors.empty()) {
    std::string msg;
    for (const auto& e : errors) msg += (msg.empty() ? "" : "; ") + e.ToString();
    if (c.a.status.status != ActorState::kRunning) {
      c.a.status.status = ActorState::kFailed;
      SetCondition(c, "Ready", false, "InvalidSpec", msg);
      if (Status s = WriteStatus(c); !s.ok()) return s;
    }
    return ReconcileOutcome{};
  }

  if (!c.driver) {
    if (c.a.status.status != ActorState::kFailed) {
      c.a.status.status = ActorState::kFailed;
      SetCondition(c, "Ready", false, "RuntimeUnavailable",
                   std::string("this node agent has no driver for runtime ") +
                       api::ToString(c.a.spec.runtime));
      if (Status s = WriteStatus(c); !s.ok()) return s;
    }
    return ReconcileOutcome{};
  }
  if (api::IsTransitioning(c.a.status.status)) return RecoverInterrupted(c);
  if (c.a.status.status != ActorState::kRunning && fs::exists(c.ref.root)) {
    // At rest, yet a sandbox is left: the cluster controller force-cleaned this actor while
    // this agent was away or stuck. Remove what it could not reach.
    auto state = c.driver->State(c.ref);
    if (state.ok() && *state != SandboxState::kNotFound) {
      spdlog::info("leftover sandbox removed actor={} status={} sandbox={}", c.key,
                   api::ToString(c.a.status.status), ToString(*state));
      if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
    }
    std::error_code ec;
    fs::remove_all(c.ref.root, ec);
  }

  const DesiredState desired = c.a.spec.desired_state;
  switch (c.a.status.status) {
    case ActorState::kRunning:
      if (desired == DesiredState::kRunning) return CheckAlive(c);
      // A checkpoint that failed moments ago (the actor survived it) waits out its backoff.
      if (auto wait = RetryWait(c, RetryOp::kCheckpoint); wait.count() > 0) return ReconcileOutcome{wait};
      return Checkpoint(c, desired == DesiredState::kPaused ? SnapshotTrigger::kPause
                                                            : SnapshotTrigger::kSuspend);
    case ActorState::kPaused:
      if (desired == DesiredState::kRunning) return Resume(c);
      if (desired == DesiredState::kSuspended) return CommitPaused(c);
      break;
    case ActorState::kSuspended:
      if (desired == DesiredState::kRunning) return Resume(c);
      break;
    case ActorState::kUnspecified:
      if (desired == DesiredState::kRunning) return Resume(c);
      // Never ran and is not wanted running: at rest, with nothing to resume from.
      c.a.status.status = ActorState::kSuspended;
      c.a.status.node_name = options_.node;
      SetCondition(c, "Ready", false, "NeverStarted", "the actor has not run yet");
      if (Status s = WriteStatus(c); !s.ok()) return s;
      break;
    case ActorState::kFailed:
      // FAILED is left only by a spec change (a new generation) that asks for Running.
      if (desired == DesiredState::kRunning &&
          c.a.status.observed_generation != c.a.metadata.generation) {
        return Resume(c);
      }
      if (c.a.status.observed_generation != c.a.metadata.generation) {
        if (Status s = WriteStatus(c); !s.ok()) return s;
      }
      break;
    default:
      break;
  }
  if (c.a.status.observed_generation != c.a.metadata.generation) {
    if (Status s = WriteStatus(c); !s.ok()) return s;
  }
  return ReconcileOutcome{};
}

namespace {
std::string RetryKey(int op, const std::string& actor_key) { return std::to_string(op) + " " + actor_key; }
}  // namespace

std::chrono::milliseconds ActorReconciler::RetryWait(const Ctx& c, RetryOp op) {
  std::lock_guard lock(retry_mu_);
  auto it = retries_.find(RetryKey(static_cast<int>(op), c.key));
  if (it == retries_.end()) return std::chrono::milliseconds(0);
  if (it->second.generation != c.a.metadata.generation) {
    retries_.erase(it);  // the spec changed since: try at once
    return std::chrono::milliseconds(0);
  }
  const auto left = it->second.not_before - clock_.Now();
  if (left <= Clock::TimePoint::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

void ActorReconciler::NoteFailure(const Ctx& c, RetryOp op) {
  std::lock_guard lock(retry_mu_);
  Retry& r = retries_[RetryKey(static_cast<int>(op), c.key)];
  if (r.generation != c.a.metadata.generation) r = Retry{c.a.metadata.generation, 0, {}};
  auto delay = options_.retry_base * (1LL << std::min(r.failures, 20));
  if (delay > options_.retry_max) delay = options_.retry_max;
  ++r.failures;
  r.not_before = clock_.Now() + delay;
}

void ActorReconciler::ClearRetry(const Ctx& c, RetryOp op) {
  std::lock_guard lock(retry_mu_);
  retries_.erase(RetryKey(static_cast<int>(op), c.key));
}

bool ActorReconciler::Unsettled(const std::string& key) {
  std::lock_guard lock(retry_mu_);
  return unsettled_workers_.count(key) > 0;
}

void ActorReconciler::SetUnsettled(const std::string& key, bool unsettled) {
  std::lock_guard lock(retry_mu_);
  if (unsettled) {
    unsettled_workers_.insert(key);
  } else {
    unsettled_workers_.erase(key);
  }
}

Result<ReconcileOutcome> ActorReconciler::CheckAlive(Ctx& c) {
  auto state = c.driver->State(c.ref);
  if (!state.ok()) return state.status();
  if (*state == SandboxState::kRunning) {
    if (c.a.status.observed_generation != c.a.metadata.generation) {
      if (Status s = WriteStatus(c); !s.ok()) return s;
    }
    return ReconcileOutcome{options_.liveness_period};
  }
  return ForceClean(c, "sandbox_died", "SandboxDied",
                    std::string("the sandbox is ") + ToString(*state) + " while the actor should run");
}

Result<ReconcileOutcome> ActorReconciler::Resume(Ctx& c) {
  // A resume that failed moments ago (transiently: the actor rests where it was) waits out its
  // backoff rather than claiming and freeing a worker in a loop.
  if (auto wait = RetryWait(c, RetryOp::kResume); wait.count() > 0) return ReconcileOutcome{wait};
  const ActorState resting = c.a.status.status;
  if (c.a.spec.runtime == api::Runtime::kMicrovm && c.a.spec.gpu.count > 0) {
    // A VFIO GPU in a micro-VM cannot be snapshotted by the VMM, and the in-guest step that
    // would make it possible is designed (docs/microvm.md) but not built: refuse before a
    // worker is claimed.
    c.a.status.status = ActorState::kFailed;
    SetCondition(c, "Ready", false, "MicrovmGpuUnsupported",
                 "GPU micro-VM actors are not supported yet: QEMU cannot snapshot a VFIO GPU "
                 "and the in-guest cuda-checkpoint agent (docs/microvm.md) is not built; use "
                 "runtime gvisor for GPU actors");
    if (Status s = WriteStatus(c); !s.ok()) return s;
    Event(c, true, "ResumeFailed", "GPU micro-VM actors are not supported yet");
    return ReconcileOutcome{};
  }
  const auto& snap = c.a.status.latest_snapshot;
  const bool from_snapshot = snap && snap->scope == api::SnapshotScope::kFull;
  // A Data snapshot: its directories are unpacked, then the sandbox boots from the bundle.
  const bool from_data = snap && snap->scope == api::SnapshotScope::kData;
  if ((from_snapshot || from_data) && !snap->node_name.empty() && snap->node_name != options_.node) {
    SetCondition(c, "Ready", false, "SnapshotOnOtherNode",
                 "the latest snapshot " + snap->id + " is on node " + snap->node_name +
                     "; this actor can only resume there");
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return ReconcileOutcome{};
  }

  auto worker = workers_.Claim(c.actor_ref, static_cast<size_t>(c.a.spec.gpu.count));
  if (!worker.ok() && worker.status().reason() == "gpu_count_unavailable") {
    // No worker of this node can ever run it: say so, rather than wait for a free worker.
    c.a.status.status = ActorState::kFailed;
    SetCondition(c, "Ready", false, ConditionReason("gpu_count_unavailable"), worker.status().message());
    if (Status s = WriteStatus(c); !s.ok()) return s;
    Event(c, true, "ResumeFailed", worker.status().message());
    return ReconcileOutcome{};
  }
  if (worker.ok()) c.claimed = true;
  if (!worker.ok()) {
    SetCondition(c, "Ready", false, "NoFreeWorker", worker.status().message());
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return ReconcileOutcome{std::chrono::seconds(5)};
  }
  c.a.status.status = ActorState::kResuming;
  c.a.status.transition_start_time.reset();
  c.a.status.node_name = options_.node;
  c.a.status.worker_name = worker->metadata.name;
  c.a.status.sandbox_id = c.ref.id;
  SetCondition(c, "Progressing", true, "Resuming",
               from_snapshot ? "restoring snapshot " + snap->id
               : from_data   ? "restoring the data of snapshot " + snap->id + ", then booting from the bundle"
                             : "booting from the bundle");
  if (Status s = WriteStatus(c); !s.ok()) return s;

  // A leftover sandbox of an earlier life must not be in the way.
  if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
  std::error_code ec;
  fs::remove_all(c.ref.root, ec);
  fs::create_directories(c.ref.root, ec);
  fs::create_directories(fs::path(c.ref.log_path).parent_path(), ec);

  const auto start = clock_.Now();
  const auto deadline = std::chrono::seconds(c.a.spec.timeouts.restore_seconds);
  const bool gpu = c.a.spec.gpu.count > 0;
  Status result;
  if (gpu) {
    auto bundle = PrepareGpuBundle(c, *worker);
    if (bundle.ok()) {
      c.ref.bundle = *bundle;
    } else {
      result = bundle.status();
    }
  }
  if (result.ok() && from_data) result = RestoreData(c, *snap, deadline);
  if (result.ok() && from_snapshot && !snap->node_name.empty()) {
    // A node-local image whose fsyncs were deferred is read in full only if a reboot came between.
    if (auto checked = snapshots_.CheckLocalForRestore(c.a.metadata.namespace_, c.a.metadata.name, snap->id);
        !checked.ok()) {
      result = UnrestorableOrRetry(checked.status());
    }
  }
  if (result.ok() && from_snapshot) {
    RestoreOptions ro;
    ro.image_dir = snap->location;
    ro.deadline = deadline;
    result = c.driver->Restore(c.ref, ro);
  } else if (result.ok()) {
    result = c.driver->Run(c.ref, deadline);
  }
  const double took = Seconds(clock_.Now() - start);
  if (from_snapshot || from_data) {
    metrics_.ObserveDuration("restore", api::ToString(snap->trigger), gpu,
                             result.ok() ? "success" : "error", took);
    metrics_.CountOperation("restore", result.ok() ? "success" : "error", result.reason());
  }
  if (!result.ok()) {
    c.driver->Delete(c.ref);
    workers_.Free(c.actor_ref);
    const bool permanent = result.code() == Code::kInvalidArgument ||
                           result.code() == Code::kFailedPrecondition;
    // A bundle or image that cannot work fails the actor; anything else returns it to where it
    // rested, and the resume is retried with backoff.
    c.a.status.status = permanent ? ActorState::kFailed : resting;
    c.a.status.worker_name.clear();
    c.a.status.sandbox_id.clear();
    const std::string reason = ConditionReason(result.reason().empty() ? "runtime_error" : result.reason());
    SetCondition(c, "Progressing", false, reason, "resume failed");
    SetCondition(c, "Ready", false, reason,
                 std::string(from_snapshot ? "restore" : "start") + " failed: " + result.message());
    Event(c, true, "ResumeFailed", result.message());
    spdlog::warn("resume failed actor={} reason={} permanent={} error=\"{}\"", c.key,
                 result.reason(), permanent, result.message());
    if (!permanent) NoteFailure(c, RetryOp::kResume);
    if (Status s = WriteStatus(c); !s.ok()) return s;
    if (permanent) return ReconcileOutcome{};
    return result;  // transient: retried with backoff
  }
  ClearRetry(c, RetryOp::kResume);
  c.a.status.status = ActorState::kRunning;
  SetCondition(c, "Progressing", false, "Resumed", "");
  SetCondition(c, "Ready", true, "Running",
               from_snapshot ? "restored from snapshot " + snap->id
               : from_data   ? "booted from the bundle with the data of snapshot " + snap->id
                             : "booted from the bundle");
  SetCondition(c, "CheckpointFailed", false, "Resumed", "");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, false, "Resumed",
        (from_snapshot ? "restored snapshot " + snap->id
         : from_data   ? "booted with the data of snapshot " + snap->id
                       : std::string("booted")) + " on worker " +
            c.a.status.worker_name + " in " + std::to_string(took) + "s");
  spdlog::info("actor resumed actor={} worker={} from_snapshot={} duration_s={:.3f}", c.key,
               c.a.status.worker_name, from_snapshot, took);
  return ReconcileOutcome{options_.liveness_period};
}

Status ActorReconciler::RestoreData(Ctx& c, const api::Snapshot& snap, std::chrono::milliseconds deadline) {
  // Only what the manifest vouches for is unpacked over the actor's directories.
  auto verified = snap.node_name.empty()
                      ? snapshots_.VerifyCommitted(c.a.metadata.namespace_, c.a.metadata.name, snap.id)
                      : snapshots_.VerifyLocal(c.a.metadata.namespace_, c.a.metadata.name, snap.id);
  if (!verified.ok()) return UnrestorableOrRetry(verified.status());
  const std::string image = snap.node_name.empty()
                                ? snapshots_.StorePath(c.a.metadata.namespace_, c.a.metadata.name, snap.id)
                                : snapshots_.LocalPath(c.a.metadata.namespace_, c.a.metadata.name, snap.id);
  return RestoreDataDirs(c.a.spec.bundle, image, deadline);
}

std::string ActorReconciler::GpuBundleDir(const SandboxRef& ref) const {
  return options_.root + "/bundles/" + ref.id;
}

Result<std::string> ActorReconciler::PrepareGpuBundle(const Ctx& c, const api::Worker& worker) {
  const auto count = static_cast<size_t>(c.a.spec.gpu.count);
  if (worker.spec.devices.size() < count) {
    // One worker is one GPU (--gpus); a multi-GPU actor needs a multi-GPU worker.
    return Status(Code::kInvalidArgument,
                  "the actor asks for " + std::to_string(count) + " GPU(s); worker " +
                      worker.metadata.name + " has " + std::to_string(worker.spec.devices.size()),
                  "gpu_count_unavailable");
  }
  // Read at every start: a spec regenerated after a driver upgrade must not need a restart.
  auto cdi = CdiRegistry::Load(options_.cdi_spec_dirs);
  GpuBundleRequest request;
  request.source_bundle = c.a.spec.bundle;
  request.out_dir = GpuBundleDir(c.ref);
  request.gpu_uuids.assign(worker.spec.devices.begin(), worker.spec.devices.begin() + count);
  request.gpu_kind = options_.gpu_cdi_kind;
  request.helper_device = options_.cuda_checkpoint_cdi_device;
  request.cuda_checkpoint_path = c.a.spec.gpu.cuda_checkpoint_path;
  auto written = cdi.ok() ? WriteGpuBundle(*cdi, request) : Result<std::string>(cdi.status());
  if (!written.ok() && written.status().reason() != "bad_bundle" &&
      written.status().reason() != "no_gpu_on_worker") {
    // The node's CDI specs are missing or broken: the node's problem, not the actor's. The
    // resume is retried with backoff, and the condition says what to fix.
    return Status(Code::kUnavailable, written.status().message(), "cdi_unavailable");
  }
  return written;
}

Status ActorReconciler::Preflight(Ctx& c) {
  auto supports = c.driver->SupportsCudaCheckpoint();
  if (!supports.ok()) return supports.status();
  if (!*supports) {
    return Status(Code::kFailedPrecondition,
                  "this runsc has no -cuda-checkpoint-path: it cannot checkpoint a live CUDA context",
                  "runtime_lacks_cuda_checkpoint");
  }
  const std::string& path = c.a.spec.gpu.cuda_checkpoint_path;
  auto r = c.driver->Exec(c.ref, {path, "--help"}, std::chrono::seconds(30));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    std::string err = r->err;
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return Status(Code::kFailedPrecondition,
                  "the cuda-checkpoint binary " + path +
                      " does not run inside the container (exit " + std::to_string(r->exit_code) +
                      (err.empty() ? "" : ": " + err) + ")",
                  "cuda_checkpoint_missing");
  }
  return OkStatus();
}

Result<ReconcileOutcome> ActorReconciler::Checkpoint(Ctx& c, SnapshotTrigger trigger) {
  const std::string trigger_name = api::ToString(trigger);
  const api::SnapshotScope scope =
      trigger == SnapshotTrigger::kPause ? c.a.spec.snapshots.on_pause : c.a.spec.snapshots.on_commit;
  const bool data = scope == api::SnapshotScope::kData;
  // A Data snapshot holds no process state: no CUDA checkpoint, so no GPU preflight.
  const bool gpu = c.a.spec.gpu.count > 0 && !data;
  // No `runsc state` first: the checkpoint (or the freeze, or the preflight's exec) fails on a
  // sandbox that is not running, and the failure path asks the sandbox's state then.
  if (gpu) {
    if (Status s = Preflight(c); !s.ok()) {
      if (s.reason() == "container_stopped" || s.reason() == "not_found") {
        return ForceClean(c, "sandbox_died", "SandboxDied",
                          "the sandbox is gone before the checkpoint: " + s.message());
      }
      SetCondition(c, "CudaCheckpointReady", false, ConditionReason(s.reason().empty() ? "preflight_failed" : s.reason()),
                   s.message());
      if (Status w = WriteStatus(c); !w.ok()) return w;
      Event(c, true, "PreflightFailed", s.message());
      spdlog::warn("gpu preflight failed actor={} error=\"{}\" action=keep_running", c.key, s.message());
      return ReconcileOutcome{options_.preflight_retry};
    }
    SetCondition(c, "CudaCheckpointReady", true, "PreflightPassed",
                 c.a.spec.gpu.cuda_checkpoint_path + " runs inside the container");
  }
  // Data: every declared directory must map to a host directory before anything starts; a
  // dataDir that cannot be kept is the spec's or the bundle's problem, and the actor runs on.
  std::vector<DataDir> data_dirs;
  if (data) {
    auto resolved = ResolveDataDirs(c.a.spec.bundle, c.a.spec.snapshots.data_dirs);
    if (!resolved.ok()) {
      const std::string reason = ConditionReason(resolved.status().reason());
      NoteFailure(c, RetryOp::kCheckpoint);
      SetCondition(c, "CheckpointFailed", true, reason, resolved.status().message());
      SetCondition(c, "Progressing", false, reason, "checkpoint refused; still running");
      if (Status s = WriteStatus(c); !s.ok()) return s;
      Event(c, true, "CheckpointFailed", resolved.status().message() + " (the actor keeps running)");
      spdlog::warn("data snapshot refused actor={} reason={} error=\"{}\" action=keep_running", c.key,
                   resolved.status().reason(), resolved.status().message());
      return resolved.status();
    }
    data_dirs = std::move(*resolved);
  }

  c.a.status.status = trigger == SnapshotTrigger::kPause ? ActorState::kPausing : ActorState::kSuspending;
  c.a.status.transition_start_time.reset();
  SetCondition(c, "Progressing", true, trigger == SnapshotTrigger::kPause ? "Pausing" : "Suspending",
               "checkpointing");
  if (Status s = WriteStatus(c); !s.ok()) return s;

  const std::string id = NewSnapshotId();
  auto dir = snapshots_.BeginLocal(c.a.metadata.namespace_, c.a.metadata.name, id);
  if (!dir.ok()) {
    c.a.status.status = ActorState::kRunning;
    SetCondition(c, "CheckpointFailed", true, "SnapshotDirUnusable", dir.status().message());
    SetCondition(c, "Progressing", false, "SnapshotDirUnusable", "");
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return dir.status();
  }
  CheckpointOptions co;
  co.image_dir = *dir;
  co.leave_running = c.a.spec.checkpoint_policy == api::CheckpointPolicy::kLeaveRunningThenStop;
  if (gpu) co.cuda_checkpoint_path = c.a.spec.gpu.cuda_checkpoint_path;
  co.deadline = std::chrono::seconds(c.a.spec.timeouts.checkpoint_seconds);
  const auto start = clock_.Now();
  Status ck = data ? CheckpointData(c, data_dirs, *dir, co.deadline) : c.driver->Checkpoint(c.ref, co);
  const double took = Seconds(clock_.Now() - start);
  metrics_.ObserveDuration("checkpoint", trigger_name, gpu, ck.ok() ? "success" : "error", took);
  metrics_.CountOperation("checkpoint", ck.ok() ? "success" : "error", ck.reason());

  if (!ck.ok()) {
    std::error_code ec;
    fs::remove_all(*dir, ec);
    auto after = c.driver->State(c.ref);
    const std::string reason = ck.reason().empty() ? "runtime_error" : ck.reason();
    if (after.ok() && (*after == SandboxState::kRunning) && ck.code() != Code::kDeadlineExceeded) {
      // The workload survived (a refused save, -leave-running, an error before the save, a
      // Data archive that failed and was thawed): it keeps running, retried with backoff.
      c.a.status.status = ActorState::kRunning;
      NoteFailure(c, RetryOp::kCheckpoint);
      SetCondition(c, "CheckpointFailed", true, ConditionReason(reason), ck.message());
      SetCondition(c, "Progressing", false, ConditionReason(reason), "checkpoint failed; still running");
      if (Status s = WriteStatus(c); !s.ok()) return s;
      Event(c, true, "CheckpointFailed", ck.message() + " (the actor keeps running)");
      return ck;
    }
    // The sandbox is dead or suspect (timeout): never retry, clean up.
    return ForceClean(c, ck.code() == Code::kDeadlineExceeded ? "deadline" : "sandbox_died",
                      ConditionReason(reason), "checkpoint failed: " + ck.message());
  }

  ClearRetry(c, RetryOp::kCheckpoint);
  // The image is safe on disk. A sandbox that still lives (-leave-running; frozen for a Data
  // archive) goes now, before the status says the actor is at rest. One that the checkpoint
  // stopped holds nothing but runsc's state — and, for a GPU actor, possibly its device until
  // the sandbox is torn down (~1 s on an H200) —: it is deleted after the status write, off
  // the pause's path, and a GPU one before its worker is given back. A crash in between
  // leaves a sandbox of an actor at rest, which every later reconcile and restart recovery
  // remove.
  enum class DeleteAt { kBeforeWrite, kBeforeRelease, kAfterRelease };
  const DeleteAt delete_at = co.leave_running || data     ? DeleteAt::kBeforeWrite
                             : c.a.spec.gpu.count > 0 ? DeleteAt::kBeforeRelease
                                                      : DeleteAt::kAfterRelease;
  bool deleted = false;
  auto delete_if_at = [&](DeleteAt step) {
    if (step != delete_at) return;
    if (Status s = c.driver->Delete(c.ref); !s.ok()) {
      spdlog::warn("sandbox delete after checkpoint failed actor={} error=\"{}\"", c.key, s.message());
      return;
    }
    deleted = true;
  };
  delete_if_at(DeleteAt::kBeforeWrite);
  SnapshotManifest m;
  m.id = id;
  m.ns = c.a.metadata.namespace_;
  m.name = c.a.metadata.name;
  m.scope = api::ToString(scope);
  m.trigger = trigger_name;
  if (auto v = c.driver->Version(); v.ok()) m.runtime_version = *v;
  m.cuda_checkpointed = gpu;
  m.taken_at = FormatTime(std::chrono::floor<std::chrono::seconds>(clock_.WallNow()));
  m.duration_seconds = took;
  // A Pause's image stays on this node: its fsyncs need not hold up the PAUSED write (a crash
  // of the agent cannot lose the page cache; a reboot can, and then the restore verifies it).
  auto done = snapshots_.CompleteLocal(
      m, trigger == SnapshotTrigger::kPause ? options_.pause_durability : Durability::kSynced);
  if (!done.ok()) {
    std::error_code ec;
    fs::remove_all(*dir, ec);
    return ForceClean(c, "sandbox_died", "SnapshotIncomplete",
                      "the checkpoint succeeded but the snapshot could not be completed: " +
                          done.status().message());
  }
  metrics_.ObserveSnapshot(trigger_name, m.scope, gpu, static_cast<double>(done->total_bytes), took);
  api::Snapshot snap = ToSnapshot(*done, snapshots_.LocalPath(m.ns, m.name, id), options_.node);

  ActorState final_state = ActorState::kPaused;
  std::string commit_error;
  bool drop_local = false;
  if (trigger == SnapshotTrigger::kSuspend) {
    const auto cstart = clock_.Now();
    auto committed = snapshots_.Commit(m.ns, m.name, id, /*just_completed=*/true);
    const double ctook = Seconds(clock_.Now() - cstart);
    metrics_.ObserveDuration("commit", trigger_name, gpu, committed.ok() ? "success" : "error", ctook);
    metrics_.CountOperation("commit", committed.ok() ? "success" : "error",
                            committed.ok() ? "" : (committed.status().reason().empty() ? "store_error" : committed.status().reason()));
    if (committed.ok()) {
      snap = ToSnapshot(*committed, snapshots_.StorePath(m.ns, m.name, id), "");
      drop_local = true;
      final_state = ActorState::kSuspended;
    } else {
      // Nothing is lost: the complete snapshot stays on this node and the actor rests PAUSED
      // until the store takes it (the commit is retried).
      commit_error = committed.status().message();
    }
  }

  const std::string worker_name = c.a.status.worker_name;
  c.a.status.status = final_state;
  c.a.status.latest_snapshot = snap;
  c.a.status.worker_name.clear();
  c.a.status.sandbox_id.clear();
  SetCondition(c, "Progressing", false, final_state == ActorState::kPaused ? "Paused" : "Suspended", "");
  SetCondition(c, "Ready", false, final_state == ActorState::kPaused ? "Paused" : "Suspended",
               "snapshot " + id + " (" + std::to_string(snap.size_bytes) + " bytes)");
  SetCondition(c, "CheckpointFailed", false, "Checkpointed", "");
  if (!commit_error.empty()) {
    SetCondition(c, "CommitFailed", true, "StoreUnavailable", commit_error);
  } else {
    api::RemoveCondition(c.a.status.conditions, "CommitFailed");
  }
  if (Status s = WriteStatus(c); !s.ok()) return s;
  spdlog::info("actor checkpointed actor={} trigger={} scope={} snapshot={} size_bytes={} duration_s={:.3f} status={}",
               c.key, trigger_name, m.scope, id, snap.size_bytes, took, api::ToString(final_state));
  // The worker is given back after the write that ends the transition, off the pause's path:
  // the sandbox no longer runs (a Direct checkpoint stopped it; any other was deleted above).
  // A failed release is settled by the next reconcile's quorum read (the actor is at rest;
  // the error returned below makes one), a crash here by restart recovery; the queue runs no
  // other reconcile of this actor (a resume) before this one returns.
  delete_if_at(DeleteAt::kBeforeRelease);
  const Status released = workers_.Release(worker_name, c.actor_ref);
  if (!released.ok()) SetUnsettled(c.key, true);

  // Off the pause's path: nothing below decides anything a crash could lose.
  delete_if_at(DeleteAt::kAfterRelease);
  if (deleted) {
    // Left behind, the root would make the next reconcile ask runsc about a sandbox that is gone.
    std::error_code ec;
    fs::remove_all(c.ref.root, ec);
  }
  // The local copy of a committed snapshot, and older node-local snapshots, are superseded.
  if (drop_local) snapshots_.RemoveLocal(m.ns, m.name, id);
  for (const auto& old : snapshots_.ListLocal(m.ns, m.name)) {
    if (old.id != id) snapshots_.RemoveLocal(m.ns, m.name, old.id);
  }
  Event(c, false, final_state == ActorState::kPaused ? "Paused" : "Suspended",
        "snapshot " + id + " (" + m.scope + "): " + std::to_string(snap.size_bytes) + " bytes, checkpoint " +
            std::to_string(took) + "s");
  if (!commit_error.empty()) return Status(Code::kUnavailable, commit_error, "store_error");
  if (!released.ok()) return released;
  return ReconcileOutcome{};
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

Result<ReconcileOutcome> ActorReconciler::CommitPaused(Ctx& c) {
  const auto& snap = c.a.status.latest_snapshot;
  if (!snap || snap->node_name.empty()) {
    c.a.status.status = ActorState::kSuspended;
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return ReconcileOutcome{};
  }
  if (snap->node_name != options_.node) return ReconcileOutcome{};  // its node commits it
  const bool gpu = c.a.spec.gpu.count > 0;
  const auto start = clock_.Now();
  auto committed = snapshots_.Commit(c.a.metadata.namespace_, c.a.metadata.name, snap->id);
  metrics_.ObserveDuration("commit", "Suspend", gpu, committed.ok() ? "success" : "error",
                           Seconds(clock_.Now() - start));
  metrics_.CountOperation("commit", committed.ok() ? "success" : "error",
                          committed.ok() ? "" : "store_error");
  if (!committed.ok()) {
    SetCondition(c, "CommitFailed", true, "StoreUnavailable", committed.status().message());
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return committed.status();
  }
  snapshots_.RemoveLocal(c.a.metadata.namespace_, c.a.metadata.name, snap->id);
  c.a.status.latest_snapshot =
      ToSnapshot(*committed, snapshots_.StorePath(c.a.metadata.namespace_, c.a.metadata.name, snap->id), "");
  c.a.status.status = ActorState::kSuspended;
  api::RemoveCondition(c.a.status.conditions, "CommitFailed");
  SetCondition(c, "Ready", false, "Suspended", "snapshot " + snap->id + " committed");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, false, "Suspended", "paused snapshot " + snap->id + " committed to the store");
  return ReconcileOutcome{};
}

Result<ReconcileOutcome> ActorReconciler::RecoverInterrupted(Ctx& c) {
  auto state = c.driver->State(c.ref);
  if (!state.ok()) return state.status();
  const ActorState was = c.a.status.status;
  spdlog::info("recovering interrupted transition actor={} status={} sandbox={}", c.key,
               api::ToString(was), ToString(*state));
  if (was == ActorState::kResuming) {
    if (*state == SandboxState::kRunning) {
      c.a.status.status = ActorState::kRunning;
      SetCondition(c, "Progressing", false, "Resumed", "recovered after an agent restart");
      SetCondition(c, "Ready", true, "Running", "recovered after an agent restart");
      if (Status s = WriteStatus(c); !s.ok()) return s;
      return ReconcileOutcome{options_.liveness_period};
    }
    // The restore never finished: start it again from the snapshot it was restoring.
    c.driver->Delete(c.ref);
    c.a.status.status = RestingState(c.a);
    if (c.a.status.status == ActorState::kFailed) c.a.status.status = ActorState::kUnspecified;
    return Resume(c);
  }
  // PAUSING / SUSPENDING.
  bool running = *state == SandboxState::kRunning;
  if (*state == SandboxState::kPaused) {
    // Frozen for a Data archive when the agent died. A complete snapshot is adopted below (the
    // sandbox is deleted then); without one the workload is thawed and runs on.
    const std::string newest = c.a.status.latest_snapshot ? c.a.status.latest_snapshot->id : "";
    auto local = snapshots_.ListLocal(c.a.metadata.namespace_, c.a.metadata.name);
    if (local.empty() || local.back().id <= newest) {
      Status t = c.driver->Thaw(c.ref);
      running = t.ok();
      if (!t.ok()) spdlog::warn("thaw of a frozen sandbox failed actor={} error=\"{}\"", c.key, t.message());
    }
  }
  if (running) {
    // The checkpoint was cut short (or ran with -leave-running): the workload lives on.
    c.a.status.status = ActorState::kRunning;
    SetCondition(c, "Progressing", false, "CheckpointInterrupted",
                 "the node agent restarted during the checkpoint; the actor kept running");
    if (Status s = WriteStatus(c); !s.ok()) return s;
    return ReconcileOutcome{std::chrono::milliseconds(1)};  // the checkpoint starts again
  }
  // The sandbox is gone. A complete snapshot newer than the latest one means the checkpoint
  // finished before the agent died: adopt it, nothing is lost.
  const std::string latest = c.a.status.latest_snapshot ? c.a.status.latest_snapshot->id : "";
  auto local = snapshots_.ListLocal(c.a.metadata.namespace_, c.a.metadata.name);
  if (!local.empty() && local.back().id > latest) {
    const auto& m = local.back();
    c.driver->Delete(c.ref);
    if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
    c.a.status.latest_snapshot = ToSnapshot(m, snapshots_.LocalPath(m.ns, m.name, m.id), options_.node);
    c.a.status.status = ActorState::kPaused;
    c.a.status.worker_name.clear();
    c.a.status.sandbox_id.clear();
    SetCondition(c, "Progressing", false, "Recovered", "adopted complete snapshot " + m.id);
    SetCondition(c, "Ready", false, "Paused", "snapshot " + m.id);
    if (Status s = WriteStatus(c); !s.ok()) return s;
    // A suspend continues with the commit on the next pass.
    return ReconcileOutcome{std::chrono::milliseconds(1)};
  }
  // A suspend that committed its snapshot and was then cut short by an API error (freeing the
  // worker, writing the status: an API server restarting answers 503/429 for a while) left it
  // only in the store. Adopted if this transition took it, never an older orphan.
  if (was == ActorState::kSuspending && c.a.status.transition_start_time) {
    auto committed = snapshots_.ListCommitted(c.a.metadata.namespace_, c.a.metadata.name);
    if (!committed.empty()) {
      const auto& m = committed.back();
      auto taken = ParseTime(m.taken_at);
      if (m.id > latest && m.trigger == "Suspend" && taken.ok() &&
          *taken >= *c.a.status.transition_start_time) {
        c.driver->Delete(c.ref);
        if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
        c.a.status.latest_snapshot = ToSnapshot(m, snapshots_.StorePath(m.ns, m.name, m.id), "");
        c.a.status.status = ActorState::kSuspended;
        c.a.status.worker_name.clear();
        c.a.status.sandbox_id.clear();
        SetCondition(c, "Progressing", false, "Recovered", "adopted committed snapshot " + m.id);
        SetCondition(c, "Ready", false, "Suspended", "snapshot " + m.id + " committed");
        SetCondition(c, "CheckpointFailed", false, "Checkpointed", "");
        if (Status s = WriteStatus(c); !s.ok()) return s;
        spdlog::info("interrupted suspend recovered actor={} snapshot={} status=STATUS_SUSPENDED", c.key, m.id);
        return ReconcileOutcome{};
      }
    }
  }
  return ForceClean(c, "sandbox_died", "SandboxDied",
                    "the sandbox is " + std::string(ToString(*state)) +
                        " and no complete snapshot was left by the interrupted " +
                        api::ToString(was));
}

Result<ReconcileOutcome> ActorReconciler::ForceClean(Ctx& c, const std::string& reason,
                                                     const std::string& condition_reason,
                                                     const std::string& message) {
  if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
  std::error_code ec;
  fs::remove_all(c.ref.root, ec);
  if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
  metrics_.CountForcedCleanup(reason);
  const ActorState was = c.a.status.status;
  c.a.status.status = c.a.status.latest_snapshot ? RestingState(c.a) : ActorState::kFailed;
  if (c.a.status.status == ActorState::kPaused) c.a.status.status = ActorState::kSuspended;
  c.a.status.worker_name.clear();
  c.a.status.sandbox_id.clear();
  SetCondition(c, "CheckpointFailed", was != ActorState::kRunning, condition_reason, message);
  SetCondition(c, "Progressing", false, condition_reason, "cleaned up");
  SetCondition(c, "Ready", false, condition_reason,
               message + (c.a.status.latest_snapshot
                              ? "; kept snapshot " + c.a.status.latest_snapshot->id
                              : "; no snapshot to resume from"));
  if (Status s = WriteStatus(c); !s.ok()) return s;
  Event(c, true, "ForcedCleanup", message);
  spdlog::warn("actor force-cleaned actor={} reason={} was={} now={} message=\"{}\"", c.key, reason,
               api::ToString(was), api::ToString(c.a.status.status), message);
  return ReconcileOutcome{};
}

Result<ReconcileOutcome> ActorReconciler::Delete(Ctx& c) {
  if (!c.a.metadata.HasFinalizer(api::kActorFinalizer)) return ReconcileOutcome{};
  const bool active = c.a.status.status == ActorState::kRunning || api::IsTransitioning(c.a.status.status);
  if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
  std::error_code ec;
  fs::remove_all(c.ref.root, ec);
  fs::remove_all(GpuBundleDir(c.ref), ec);
  fs::remove(c.ref.log_path, ec);
  if (Status s = snapshots_.RemoveAllLocal(c.a.metadata.namespace_, c.a.metadata.name); !s.ok()) return s;
  for (const auto& m : snapshots_.ListCommitted(c.a.metadata.namespace_, c.a.metadata.name)) {
    snapshots_.RemoveCommitted(m.ns, m.name, m.id);
  }
  if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
  if (api::IsTransitioning(c.a.status.status)) metrics_.CountForcedCleanup("deleted");
  if (Status s = SetFinalizer(c, false); !s.ok()) return s;
  spdlog::info("actor deleted actor={} was={} sandbox_removed={}", c.key,
               api::ToString(c.a.status.status), active);
  return ReconcileOutcome{};
}

Status ActorReconciler::RecoverAtStartup() {
  auto removed = snapshots_.RemovePartials();
  if (removed.ok() && *removed > 0) spdlog::info("removed partial snapshots count={}", *removed);
  // Paused snapshots completed without checksums by an agent that stopped before computing them.
  if (int pending = snapshots_.ResumePendingChecksums(); pending > 0) {
    spdlog::info("pending snapshot checksums queued count={}", pending);
  }
  // Sandboxes whose actor is gone or not ours any more.
  std::error_code ec;
  const fs::path run = options_.root + "/run";
  if (fs::exists(run)) {
    for (const auto& entry : fs::directory_iterator(run, ec)) {
      const std::string id = entry.path().filename().string();
      auto sep = id.find('_');
      if (sep == std::string::npos) continue;
      const std::string ns = id.substr(0, sep), name = id.substr(sep + 1);
      ObjectPtr obj = actors_(ns + "/" + name);
      bool keep = false;
      if (obj) {
        auto a = api::ActorFromJson(*obj);
        keep = a.ok() && OwnedHere(*a);
      }
      if (!keep) {
        SandboxRef ref = SandboxFor(ns, name);
        (void)DeleteAnyRuntime(ref);
        fs::remove_all(ref.root, ec);
        snapshots_.RemoveAllLocal(ns, name);
        spdlog::info("leftover sandbox removed actor={}/{}", ns, name);
      }
    }
  }
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
  // Workers held by actors that do not exist, are not ours, or are at rest.
  return workers_.FreeUnless([&](const api::ActorRef& ref) {
    ObjectPtr obj = actors_(ref.Key());
    if (!obj) return false;
    auto a = api::ActorFromJson(*obj);
    if (!a.ok() || !OwnedHere(*a)) return false;
    return a->status.status == ActorState::kRunning || api::IsTransitioning(a->status.status);
  });
}

}  // namespace stasis
