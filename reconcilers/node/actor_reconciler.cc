// The node agent's reconcile loop: observe, ask transitions.h's Decide for the next step,
// gather what it still needs or prepare what it asks, until it names the action; then act.
#include "reconcilers/node/actor_reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "api/json_mapping.h"
#include "api/node_drain.h"
#include "api/validation.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/readiness_gate.h"
#include "reconcilers/node/restore_readiness.h"
#include "reconcilers/node/resume_intent.h"
#include "reconcilers/node/sandbox_id.h"
#include "reconcilers/node/stray_state.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using api::ActorState;

// A decision takes at most: quorum read, validation, probe, snapshot list, one preparation of
// each kind. More means Decide asks for something the loop does not deliver: a bug.
constexpr int kMaxSteps = 16;

std::string JoinErrors(const std::vector<api::FieldError>& errors) {
  std::string msg;
  for (const auto& e : errors) msg += (msg.empty() ? "" : "; ") + e.ToString();
  return msg;
}

}  // namespace

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
      snapshots_(snapshots), workers_(workers), metrics_(metrics), events_(events), clock_(clock),
      retries_(options_.retry_base, options_.retry_max, clock) {}

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

SandboxRef ActorReconciler::SandboxFor(const std::string& ns, const std::string& name,
                                       const std::string& recorded_id) const {
  // The id a running actor's sandbox was started with (status.sandboxID) wins: an agent that
  // names sandboxes differently than the one that started it must still find it.
  return SandboxWithId(IsUsableSandboxId(recorded_id) ? recorded_id : SandboxIdFor(ns, name));
}

SandboxRef ActorReconciler::SandboxWithId(const std::string& id) const {
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

ActorReconciler::Ctx ActorReconciler::NewCtx(const api::Actor& a, const Request& request, ActorSource source) {
  Ctx c;
  c.before = a;
  c.a = a;
  c.ref = SandboxFor(request.ns, request.name, a.status.sandbox_id);
  c.actor_ref = api::ActorRef{request.ns, request.name};
  c.key = request.Key();
  c.ref.bundle = a.spec.bundle;
  c.driver = DriverFor(a.spec.runtime);
  std::error_code ec;
  const bool root_exists = fs::exists(c.ref.root, ec);
  // A resume whose RESUMING write had not landed when the last agent stopped: read as if it had.
  c.through_intent = ThroughIntent(c.ref, root_exists, c.a);
  Observation& o = c.observed;
  o.source = source;
  o.status = c.a.status.status;
  o.desired = a.spec.desired_state;
  o.node_draining = draining_.load();
  o.owned_here = OwnedHere(a);
  o.being_deleted = a.metadata.IsBeingDeleted();
  o.has_finalizer = a.metadata.HasFinalizer(api::kActorFinalizer);
  o.generation_observed = a.status.observed_generation == a.metadata.generation;
  o.transition_start_known = a.status.transition_start_time.has_value();
  o.restore_pending = a.status.status == ActorState::kRunning && AwaitsRestore(a);
  o.driver_available = c.driver != nullptr;
  o.sandbox_root_exists = root_exists;
  // A transition the agent gave up on (host errors, host_failures.cc) waits for a new generation.
  const int64_t gen = a.metadata.generation;
  o.checkpoint_backoff = retries_.Wait(c.key, RetryOp::kCheckpoint, gen).count() > 0 ||
                         retries_.GaveUp(c.key, RetryOp::kCheckpoint, gen);
  o.resume_backoff = retries_.Wait(c.key, RetryOp::kResume, gen).count() > 0 || retries_.GaveUp(c.key, RetryOp::kResume, gen);
  o.unsettled_worker = retries_.Unsettled(c.key);
  return c;
}

bool ActorReconciler::ThroughIntent(const SandboxRef& ref, bool root_exists, api::Actor& a) {
  // Only an actor at rest with a sandbox root can be one: the record comes before runsc, and a
  // root before runsc too. Every other reconcile (most: at rest with nothing on disk, running)
  // reads no file for it.
  if (!root_exists || !api::IsResting(a.status.status)) return false;
  auto intent = ReadIntent(IntentPath(ref.root));
  if (!intent || !IntentApplies(*intent, a)) return false;
  Overlay(*intent, a);
  spdlog::debug("resume intent read actor={}/{} worker={} sandbox={}", a.metadata.namespace_, a.metadata.name,
                intent->worker_name, intent->sandbox_id);
  return true;
}

Result<bool> ActorReconciler::ReadQuorum(Ctx& c, const Request& request, bool unsettled) {
  // Settled after the read below — or, if it fails, after the read of a later reconcile.
  if (unsettled) retries_.SetUnsettled(c.key, true);
  // A watch event may lag our own last write, and acting on a stale status (an *ING this agent
  // has already finished, a RUNNING already paused) would repeat or undo a transition.
  auto live = client_.Get(kActorType, request.ns, request.name);
  if (!live.ok()) {
    // NotFound: its DELETED event follows, and the reconcile of a deleted actor frees its worker.
    if (live.status().code() == Code::kNotFound) return false;
    return live.status();
  }
  auto parsed = api::ActorFromJson(WithoutManagedFields(std::move(*live)));
  if (!parsed.ok()) {
    spdlog::error("actor unreadable actor={} error=\"{}\"", c.key, parsed.status().ToString());
    return false;  // nothing to act on until it changes
  }
  c = NewCtx(*parsed, request, ActorSource::kQuorum);
  return true;
}

Status ActorReconciler::Observe(Ctx& c, Step step) {
  Observation& o = c.observed;
  if (step == Step::kValidateSpec) {
    c.spec_errors = api::ValidateActor(c.a);
    o.spec_valid = c.spec_errors.empty();
    return OkStatus();
  }
  if (step == Step::kListSnapshots) return ListSnapshots(c);
  auto state = c.driver->State(c.ref);  // kProbeSandbox
  if (!state.ok()) return state.status();
  o.sandbox = *state;
  if (api::IsTransitioning(o.status) && o.source == ActorSource::kQuorum) {
    spdlog::info("recovering interrupted transition actor={} status={} sandbox={}", c.key,
                 api::ToString(o.status), ToString(*state));
  }
  return OkStatus();
}

Status ActorReconciler::Prepare(Ctx& c, Step step) {
  Observation& o = c.observed;
  switch (step) {
    case Step::kFreeUnsettledWorker:
      if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
      [[fallthrough]];
    case Step::kForgetUnsettledWorker:
      retries_.SetUnsettled(c.key, false);
      o.unsettled_worker = false;
      return OkStatus();
    case Step::kAddFinalizer:
      if (Status s = SetFinalizer(c, true); !s.ok()) return s;
      o.has_finalizer = true;
      return OkStatus();
    case Step::kRemoveLeftoverSandbox:
      if (Status s = RemoveLeftoverSandbox(c); !s.ok()) return s;
      o.sandbox_root_exists = false;
      return OkStatus();
    case Step::kThawFrozenSandbox:
      if (Status t = c.driver->Thaw(c.ref); t.ok()) {
        o.sandbox = SandboxState::kRunning;
      } else {
        spdlog::warn("thaw of a frozen sandbox failed actor={} error=\"{}\"", c.key, t.message());
        o.thaw_failed = true;
      }
      return OkStatus();
    default:
      return Status(Code::kInternal, std::string("not a preparation: ") + ToString(step));
  }
}

Result<ReconcileOutcome> ActorReconciler::Reconcile(const Request& request) {
  // The host's errors reach here as exceptions only from the standard library (a filesystem
  // call without an error_code): a value, retried with the queue's backoff, never a throw.
  try {
    return ReconcileSteps(request);
  } catch (const std::exception& e) {
    spdlog::error("reconcile failed on a host error actor={} error=\"{}\"", request.Key(), e.what());
    Status failure(Code::kUnavailable, std::string("host error: ") + e.what(), "host_error");
    ReportHostException(request, failure);
    return failure;
  }
}

Result<ReconcileOutcome> ActorReconciler::ReconcileSteps(const Request& request) {
  ObjectPtr obj = actors_(request.Key());
  if (!obj) return RemoveOrphan(request);
  Ctx c;
  c.key = request.Key();
  // The informer's copy decides most reconciles without a read (the echo of this agent's own
  // status write, every actor at start-up); if it is stale, the newer version's watch event is
  // on its way and reconciles it again.
  bool read_quorum = true;
  if (auto cached = api::ActorFromJson(*obj); cached.ok()) {
    c = NewCtx(*cached, request, ActorSource::kCache);
    read_quorum = false;
  }
  for (int i = 0; i < kMaxSteps; ++i) {
    if (read_quorum) {
      auto read = ReadQuorum(c, request, c.observed.unsettled_worker || c.claimed);
      if (!read.ok()) return read.status();
      if (!*read) return ReconcileOutcome{};
      read_quorum = false;
    }
    const Decision d = Decide(c.observed);
    spdlog::trace("decided actor={} source={} step={}", c.key,
                  c.observed.source == ActorSource::kCache ? "cache" : "quorum", ToString(d.step));
    if (d.step == Step::kReadQuorum) {
      read_quorum = true;
    } else if (IsObservation(d.step)) {
      Status s = Observe(c, d.step);
      // The cache path asks the runtime only to skip a read; an unanswered probe means: read.
      if (!s.ok() && c.observed.source == ActorSource::kCache) read_quorum = true;
      else if (!s.ok()) return s;
    } else if (IsPreparation(d.step)) {
      if (Status s = Prepare(c, d.step); !s.ok()) return s;
    } else {
      auto r = Act(c, d);
      if (c.observed.source == ActorSource::kQuorum || r.ok() || r.status().code() != Code::kAborted || c.wrote) {
        return r;
      }
      // The cached copy was stale (its first write met a conflict; nothing was written).
      spdlog::debug("cached actor was stale actor={} status={} action=quorum_read", c.key,
                    api::ToString(c.observed.status));
      read_quorum = true;
    }
  }
  spdlog::error("reconcile did not converge actor={} steps={}", c.key, kMaxSteps);
  return Status(Code::kInternal, "the node agent's decision did not converge in " + std::to_string(kMaxSteps) + " steps");
}

void ActorReconciler::ReportDrain(Ctx& c, const Decision& d) {
  if (!ChosenByDrain(c.observed, d)) return;
  spdlog::info("actor suspended for drain actor={} node={} desired={}", c.key, options_.node,
               api::ToString(c.a.spec.desired_state));
  Event(c, false, api::kReasonNodeDraining,
        "node " + options_.node + " is draining: suspending to the snapshot store, to resume on another node");
}

Result<ReconcileOutcome> ActorReconciler::Act(Ctx& c, const Decision& d) {
  const int64_t generation = c.a.metadata.generation;
  switch (d.step) {
    case Step::kNothing: return ReconcileOutcome{};
    case Step::kWriteObservedGeneration: return WriteObservedGeneration(c);
    case Step::kWatchLiveness: return WatchLiveness(c);
    case Step::kFinishRestore: return FinishRestore(c, std::nullopt);
    case Step::kDelete: return Delete(c);
    case Step::kFailInvalidSpec:
      return FailActor(c, api::kReasonInvalidSpec, JoinErrors(c.spec_errors));
    case Step::kFailRuntimeUnavailable:
      return FailActor(c, api::kReasonRuntimeUnavailable,
                       std::string("this node agent has no driver for runtime ") + api::ToString(c.a.spec.runtime));
    case Step::kRestNeverStarted: return RestNeverStarted(c);
    case Step::kCheckpoint:
      ReportDrain(c, d);
      return Checkpoint(c, d.trigger);
    case Step::kWaitCheckpointBackoff:
      return ReconcileOutcome{retries_.Wait(c.key, RetryOp::kCheckpoint, generation)};
    case Step::kResume: return Resume(c);
    case Step::kWaitResumeBackoff: return ReconcileOutcome{retries_.Wait(c.key, RetryOp::kResume, generation)};
    case Step::kCommitPaused:
      ReportDrain(c, d);
      return CommitPaused(c);
    case Step::kForceCleanDeadSandbox: {
      const std::string state = ToString(c.observed.sandbox.value_or(SandboxState::kNotFound));
      if (!api::IsTransitioning(c.a.status.status)) {
        return ForceClean(c, api::kReasonSandboxDied,
                          "the sandbox is " + state + " while the actor should run");
      }
      return ForceClean(c, api::kReasonSandboxDied,
                        "the sandbox is " + state + " and no complete snapshot was left by the interrupted " +
                            api::ToString(c.a.status.status));
    }
    case Step::kRecoverResumed: return RecoverResumed(c);
    case Step::kRestartResume: return RestartResume(c);
    case Step::kRecoverCheckpointInterrupted: return RecoverCheckpointInterrupted(c);
    case Step::kAdoptLocalSnapshot: return AdoptLocalSnapshot(c);
    case Step::kAdoptCommittedSnapshot: return AdoptCommittedSnapshot(c);
    default: return Status(Code::kInternal, std::string("not an action: ") + ToString(d.step));
  }
}

StrayLookup ActorReconciler::LookUpStray(const std::string& ns, const std::string& name, json* live) {
  auto got = client_.Get(kActorType, ns, name);
  if (!got.ok()) return got.status().code() == Code::kNotFound ? StrayLookup::kNotFound : StrayLookup::kUnreadable;
  auto a = api::ActorFromJson(*got);
  if (!a.ok()) return StrayLookup::kUnreadable;
  if (live) *live = std::move(*got);
  return OwnedHere(*a) ? StrayLookup::kOwnedHere : StrayLookup::kOwnedElsewhere;
}

void ActorReconciler::ReportKeptState(const std::string& key, const json& live) {
  const std::string owner = live.value("/spec/nodeName"_json_pointer, std::string());
  const std::string message = "the actor now belongs to node '" + owner + "', but node " + options_.node +
                              " still holds its sandbox or snapshots: kept, not deleted (suspend the "
                              "actor on this node before moving it)";
  spdlog::warn("local state of an actor owned elsewhere kept actor={} owner={} node={}", key, owner, options_.node);
  if (events_) events_->Event(live, EventType::kWarning, kReasonLocalStateKept, message);
}

Result<ReconcileOutcome> ActorReconciler::RemoveOrphan(const Request& request) {
  // Missing from the cache: gone from the API, moved between this agent's two informers, or
  // moved to another node. Nothing is removed before a quorum read says NotFound
  // (stray_state.h); then nothing of it may remain on this node — under the id this agent
  // gives it, or the "<ns>_<name>" an older agent gave it.
  const std::string key = request.Key();
  std::vector<SandboxRef> sandboxes;
  for (const std::string& id : {SandboxIdFor(request.ns, request.name), request.ns + "_" + request.name}) {
    SandboxRef ref = SandboxWithId(id);
    std::error_code ec;
    if (fs::exists(ref.root, ec)) sandboxes.push_back(std::move(ref));
  }
  const bool local = !sandboxes.empty() || !snapshots_.ListLocal(request.ns, request.name).empty();
  StrayAction action = StrayAction::kRemove;
  if (local) {
    json live;
    action = DecideStray(LookUpStray(request.ns, request.name, &live), local);
    if (action == StrayAction::kKeepAndReport) ReportKeptState(key, live);
  }
  if (action == StrayAction::kRetry) return Status(Code::kUnavailable, "actor " + key + " not readable to confirm it is gone");
  // Looked at again now and then: once it is deleted, its state here goes.
  if (action == StrayAction::kKeepAndReport) return ReconcileOutcome{kStrayRecheck};
  if (action == StrayAction::kKeep) return ReconcileOutcome{};
  for (const SandboxRef& ref : sandboxes) {
    if (Status s = DeleteAnyRuntime(ref); !s.ok()) return s;
    RemoveSandboxFiles(ref);
    spdlog::info("orphan sandbox removed actor={} sandbox={}", key, ref.id);
  }
  WarnIfFailed(snapshots_.RemoveAllLocal(request.ns, request.name), "orphan's local snapshots not removed", key);
  if (Status s = workers_.Free(api::ActorRef{request.ns, request.name}); !s.ok()) return s;
  retries_.SetUnsettled(key, false);
  return ReconcileOutcome{};
}

void ActorReconciler::RemoveSandboxRoot(const SandboxRef& ref) {
  // Left behind, the root would make the next pass ask runsc about a sandbox that is gone, and
  // the owner file would name an actor that has no sandbox until the agent's next start.
  std::error_code ec;
  fs::remove_all(ref.root, ec);
  fs::remove(ref.root + kOwnerSuffix, ec);
  RemoveIntent(IntentPath(ref.root));
}

void ActorReconciler::RemoveSandboxFiles(const SandboxRef& ref) {
  RemoveSandboxRoot(ref);
  std::error_code ec;
  fs::remove_all(GpuBundleDir(ref), ec);
  fs::remove_all(ImageBundleDir(ref), ec);
}

Result<ReconcileOutcome> ActorReconciler::Delete(Ctx& c) {
  // An actor of a runtime this node does not run never started here: nothing of it to delete
  // but what any driver would find.
  if (!c.driver) c.driver = drivers_.gvisor;
  if (!c.a.metadata.HasFinalizer(api::kActorFinalizer)) return ReconcileOutcome{};
  const bool active = c.a.status.status == ActorState::kRunning || api::IsTransitioning(c.a.status.status);
  if (Status s = c.driver->Delete(c.ref); !s.ok()) return s;
  RemoveSandboxFiles(c.ref);
  std::error_code ec;
  fs::remove(c.ref.log_path, ec);
  if (Status s = snapshots_.RemoveAllLocal(c.a.metadata.namespace_, c.a.metadata.name); !s.ok()) return s;
  for (const auto& m : snapshots_.ListCommitted(c.a.metadata.namespace_, c.a.metadata.name)) {
    WarnIfFailed(snapshots_.RemoveCommitted(m.ns, m.name, m.id), "committed snapshot of a deleted actor not removed", c.key);
  }
  if (Status s = workers_.Free(c.actor_ref); !s.ok()) return s;
  if (api::IsTransitioning(c.a.status.status)) metrics_.CountForcedCleanup(api::kMetricReasonDeleted);
  if (Status s = SetFinalizer(c, false); !s.ok()) return s;
  spdlog::info("actor deleted actor={} was={} sandbox_removed={}", c.key,
               api::ToString(c.a.status.status), active);
  return ReconcileOutcome{};
}

Result<ReconcileOutcome> ActorReconciler::FailActor(Ctx& c, const std::string& reason, const std::string& message) {
  c.a.status.status = ActorState::kFailed;
  SetCondition(c, api::kConditionReady, false, reason, message);
  if (Status s = WriteStatus(c); !s.ok()) return s;
  return ReconcileOutcome{};
}

Result<ReconcileOutcome> ActorReconciler::RestNeverStarted(Ctx& c) {
  // Never ran and is not wanted running: at rest, with nothing to resume from.
  c.a.status.status = ActorState::kSuspended;
  c.a.status.node_name = options_.node;
  SetCondition(c, api::kConditionReady, false, api::kReasonNeverStarted, "the actor has not run yet");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  return ReconcileOutcome{};
}

Result<ReconcileOutcome> ActorReconciler::WatchLiveness(Ctx& c) {
  std::chrono::milliseconds next = options_.liveness_period;
  bool write = !c.observed.generation_observed;
  const auto& gate = c.a.spec.readiness_gate;
  switch (DecideGate(c.a, std::chrono::floor<std::chrono::seconds>(clock_.WallNow()))) {
    case GateStep::kNone: break;
    case GateStep::kTimedOut: {
      const std::string message = "the readiness gate did not pass within " +
                                  std::to_string(gate->timeout_seconds) + "s; the actor runs on";
      SetCondition(c, api::kConditionReadinessGate, false, api::kReasonReadinessGateTimedOut, message);
      Event(c, true, api::kReasonReadinessGateTimedOut, message);
      spdlog::warn("readiness gate timed out actor={} timeout_s={}", c.key, gate->timeout_seconds);
      write = true;
      break;
    }
    case GateStep::kProbe: {
      ExecRequest probe{gate->command, {}, std::chrono::seconds(std::min(gate->timeout_seconds, 30))};
      auto ran = c.driver->Exec(c.ref, probe);
      if (ran.ok() && ran->exit_code == 0) {
        SetCondition(c, api::kConditionReadinessGate, true, api::kReasonReadinessGatePassed, "the readiness gate passed");
        spdlog::info("readiness gate passed actor={}", c.key);
        write = true;
      } else {
        next = std::chrono::seconds(gate->period_seconds);
      }
      break;
    }
  }
  if (write) {
    if (Status s = WriteStatus(c); !s.ok()) return s;
  }
  return ReconcileOutcome{next};
}

Result<ReconcileOutcome> ActorReconciler::WriteObservedGeneration(Ctx& c) {
  if (Status s = WriteStatus(c); !s.ok()) return s;
  return ReconcileOutcome{};
}

}  // namespace stasis
