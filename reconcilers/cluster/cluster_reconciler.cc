#include "reconcilers/cluster/cluster_reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "api/json_mapping.h"
#include "api/worker.h"
#include "base/time.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/cluster/stuck_detector.h"

namespace stasis {

using api::ActorState;

namespace {
// A parse for ParseMemo: the value, or nothing for an object that does not parse.
template <typename T>
std::optional<T> Parsed(Result<T> r) {
  return r.ok() ? std::optional<T>(std::move(*r)) : std::nullopt;
}

// The string at a JSON pointer of an object, or `def` when absent.
std::string StringAt(const json& o, const char* pointer, const char* def) {
  const json::json_pointer p(pointer);
  return o.contains(p) && o.at(p).is_string() ? o.at(p).get<std::string>() : std::string(def);
}

// The few fields of an actor that IsBindCandidate and HoldsAWorkerPromise read, from its JSON:
// the index functions run on every actor event and over every actor at a relist, so they do
// not parse the whole actor. Absent fields take the API's defaults (desiredState Running,
// status unspecified); nullopt for a value the API would not hold.
std::optional<api::Actor> IndexedFields(const json& o) {
  auto desired = api::ParseDesiredState(StringAt(o, "/spec/desiredState", "Running"));
  const std::string state = StringAt(o, "/status/status", "");
  auto parsed_state = state.empty() ? std::optional(ActorState::kUnspecified) : api::ParseActorState(state);
  if (!desired || !parsed_state) return std::nullopt;
  api::Actor a;
  a.spec.desired_state = *desired;
  a.spec.node_name = StringAt(o, "/spec/nodeName", "");
  a.spec.bundle = StringAt(o, "/spec/bundle", "");
  a.spec.image = StringAt(o, "/spec/image", "");
  if (o.contains(json::json_pointer("/spec/templateRef"))) a.spec.template_ref = api::LocalObjectReference{};
  a.status.status = *parsed_state;
  a.status.node_name = StringAt(o, "/status/nodeName", "");
  a.status.worker_name = StringAt(o, "/status/workerName", "");
  return a;
}

// The node an actor is on or is pinned to: spec.nodeName when pinned, else status.nodeName.
const std::string& NodeOf(const api::Actor& a) {
  return a.spec.node_name.empty() ? a.status.node_name : a.spec.node_name;
}
}  // namespace

ClusterReconciler::ClusterReconciler(ClusterReconcilerOptions options, KubeClient& client,
                                     const ObjectStore& actors, const ObjectStore& workers,
                                     const ObjectStore& leases, ClusterMetrics& metrics,
                                     EventRecorder* events, Clock& clock, SnapshotStore* store)
    : options_(std::move(options)), client_(client), actors_(actors), workers_(workers),
      leases_(leases), metrics_(metrics), events_(events), clock_(clock), store_(store),
      workers_parsed_([](const json& o) { return Parsed(api::WorkerFromJson(o)); }),
      promised_parsed_([](const json& o) { return Parsed(api::ActorFromJson(o)); }),
      leading_since_(clock.Now()), lease_tracker_(clock) {
  if (store_ && options_.retain) {
    retention_.emplace(*store_, RetentionPolicy{*options_.retain, options_.retain_min_age},
                       [this](const std::string& ns, const std::string& name) -> Result<api::Actor> {
                         auto live = client_.Get(kActorType, ns, name);
                         if (!live.ok()) return live.status();
                         return api::ActorFromJson(*live);
                       });
  }
}

Time ClusterReconciler::Now() const {
  return std::chrono::floor<std::chrono::seconds>(clock_.WallNow());
}

std::optional<bool> ClusterReconciler::NodeAlive(const std::string& node) const {
  if (node.empty()) return std::nullopt;
  const std::string key = options_.lease_namespace + "/" + NodeLeaseName(node);
  ObjectPtr lease = leases_.Get(key);
  if (!lease) return std::nullopt;
  return lease_tracker_.Observe(key, *lease).first;
}

void ClusterReconciler::LeaseSeen(const ObjectPtr& lease) {
  if (!lease) return;
  const json meta = lease->value("metadata", json::object());
  (void)lease_tracker_.Observe(meta.value("namespace", "") + "/" + meta.value("name", ""), *lease);
}

void ClusterReconciler::LeaseGone(const ObjectPtr& lease) {
  if (!lease) return;
  const json meta = lease->value("metadata", json::object());
  lease_tracker_.Forget(meta.value("namespace", "") + "/" + meta.value("name", ""));
}

void ClusterReconciler::StartedLeading() { leading_since_ = clock_.Now(); }

bool ClusterReconciler::NodeLossConfirmed(const std::string& node) {
  auto lease = client_.Get(kLeaseType, options_.lease_namespace, NodeLeaseName(node));
  if (!lease.ok()) {
    spdlog::warn("node loss not confirmed node={} error=\"{}\"", node, lease.status().ToString());
    return false;
  }
  // The server's copy may show a renewal the cache has not: that counts as observed now.
  const auto [alive, duration] =
      lease_tracker_.Observe(options_.lease_namespace + "/" + NodeLeaseName(node), *lease);
  if (alive) {
    spdlog::info("node heartbeat fresher than the cache node={} action=none", node);
    return false;
  }
  if (clock_.Now() - leading_since_.load() < duration) {
    spdlog::info("node heartbeat expired but this replica leads since less than its lease node={} "
                 "lease_s={} action=wait", node, duration.count());
    return false;
  }
  return true;
}

Status ClusterReconciler::FreeWorkersOf(const api::Actor& a) {
  const api::ActorRef ref{a.metadata.namespace_, a.metadata.name};
  for (const auto& obj : workers_.List()) {
    auto w = api::WorkerFromJson(*obj);
    if (!w.ok() || !w->IsHeldBy(ref)) continue;
    // Compare-and-swap on the worker: if its agent changed it meanwhile, look again later.
    json patch = {{"metadata", {{"resourceVersion", w->metadata.resource_version}}},
                  {"status", {{"phase", "Free"}, {"actorRef", nullptr}}}};
    auto r = client_.Patch(kWorkerType, "", w->metadata.name, PatchType::kMerge, patch, "status");
    if (!r.ok()) return r.status();
    spdlog::info("worker freed by controller worker={} actor={}", w->metadata.name, ref.Key());
  }
  return OkStatus();
}

Status ClusterReconciler::RemoveFinalizer(const api::Actor& a) {
  api::Actor after = a;
  if (!after.metadata.RemoveFinalizer(api::kActorFinalizer)) return OkStatus();
  json patch = {{"metadata",
                 {{"finalizers", after.metadata.finalizers},
                  {"resourceVersion", a.metadata.resource_version}}}};
  auto r = client_.Patch(kActorType, a.metadata.namespace_, a.metadata.name, PatchType::kMerge, patch);
  if (!r.ok() && r.status().code() != Code::kNotFound) return r.status();
  return OkStatus();
}

void ClusterReconciler::RemoveCommittedSnapshots(const api::Actor& a) {
  if (!store_) return;
  // Best effort, as the agent's own deletion does: a broken store must not block a deletion.
  for (const auto& m : store_->ListCommitted(a.metadata.namespace_, a.metadata.name)) {
    if (Status s = store_->RemoveCommitted(m.ns, m.name, m.id); !s.ok()) {
      spdlog::warn("committed snapshot not removed actor={} snapshot={} error=\"{}\"",
                   a.metadata.Key(), m.id, s.message());
    }
  }
}

namespace {
// Committed snapshots appear only with a new latestSnapshot (a suspend) or a new location of
// the same one (a paused snapshot committed): retention once per such value is enough.
std::string RetentionMark(const api::Actor& a) {
  return a.status.latest_snapshot ? a.status.latest_snapshot->id + "@" + a.status.latest_snapshot->location : "";
}
}  // namespace

bool ClusterReconciler::PrunePending(const api::Actor& a) {
  if (!retention_) return false;
  std::lock_guard lock(pruned_mu_);
  auto it = pruned_for_.find(a.metadata.Key());
  return it == pruned_for_.end() || it->second != RetentionMark(a);
}

bool ClusterReconciler::MaybePrune(const api::Actor& a, std::optional<std::chrono::milliseconds>* recheck) {
  if (!retention_) return true;
  const std::string key = a.metadata.Key();
  const std::string latest = RetentionMark(a);
  if (!PrunePending(a)) return true;
  auto pruned = retention_->Prune(a.metadata.namespace_, a.metadata.name, Now());
  if (!pruned.ok()) {
    spdlog::warn("retention failed actor={} error=\"{}\"", key, pruned.status().ToString());
    return false;
  }
  metrics_.CountSnapshotDeletions(kDeletionRetention, static_cast<int>(pruned->deleted.size()));
  if (pruned->skipped) return true;  // in a transition now: its end changes the status again
  if (pruned->recheck_at) {
    // Not marked done: a snapshot held back only by its age is deleted once it comes of age.
    *recheck = std::max(std::chrono::milliseconds(std::chrono::seconds(1)),
                        std::chrono::duration_cast<std::chrono::milliseconds>(*pruned->recheck_at - Now()));
    return true;
  }
  std::lock_guard lock(pruned_mu_);
  pruned_for_[key] = latest;
  return true;
}

Result<ReconcileOutcome> ClusterReconciler::Reconcile(const Request& request) {
  ObjectPtr obj = actors_.Get(request.Key());
  if (!obj) {
    std::lock_guard lock(pruned_mu_);
    pruned_for_.erase(request.Key());
    return ReconcileOutcome{};
  }
  // Most actors are at rest most of the time: decide those from the cache. Anything else to
  // write is decided on a quorum read (the controller's writes race with the node agent's),
  // but a bind: it is decided on the cache and written with the cached resourceVersion as its
  // precondition, so a stale cache costs a conflict, never a wrong bind, and a burst's binds
  // skip a read (a third of their requests).
  if (auto cached = api::ActorFromJson(*obj); cached.ok()) {
    const CachedDecision d = DecideFromCache(*cached);
    if (d.next == CachedDecision::kDone) return d.outcome;
    if (d.next == CachedDecision::kBind) return Bind(*cached);
  }
  auto live = client_.Get(kActorType, request.ns, request.name);
  if (!live.ok()) {
    return live.status().code() == Code::kNotFound ? Result<ReconcileOutcome>(ReconcileOutcome{})
                                                   : Result<ReconcileOutcome>(live.status());
  }
  auto parsed = api::ActorFromJson(*live);
  if (!parsed.ok()) return ReconcileOutcome{};
  api::Actor a = *parsed;
  const std::string node = NodeOf(a);
  const std::optional<bool> alive = NodeAlive(node);

  if (a.metadata.IsBeingDeleted()) {
    if (!a.metadata.HasFinalizer(api::kActorFinalizer)) return ReconcileOutcome{};
    if (node.empty() || (alive == std::optional<bool>(false) && NodeLossConfirmed(node))) {
      if (Status s = FreeWorkersOf(a); !s.ok()) return s;
      RemoveCommittedSnapshots(a);
      if (Status s = RemoveFinalizer(a); !s.ok()) return s;
      metrics_.CountForcedCleanup(api::kMetricReasonDeleted);
      spdlog::info("actor deletion completed by controller actor={} node={} reason=node_lost",
                   request.Key(), node);
      return ReconcileOutcome{};
    }
    return ReconcileOutcome{options_.recheck};  // its live agent finishes the deletion
  }

  if (auto verdict = DetectStuck(a, Now(), options_.grace, alive)) {
    if (verdict->reason != api::kReasonNodeLost || NodeLossConfirmed(node)) {
      return ForceClean(a, verdict->reason, verdict->message);
    }
    return ReconcileOutcome{options_.recheck};
  }

  // Retention waits for the end of a transition (its status write brings the actor back).
  std::optional<std::chrono::milliseconds> prune_recheck;
  const bool pruned = api::IsTransitioning(a.status.status) || MaybePrune(a, &prune_recheck);
  if (IsBindCandidate(a)) return Bind(a);
  // Transitions and running actors on nodes are looked at again until they settle; a failed
  // retention rides on that recheck, or has its own for an actor at rest.
  if (api::IsTransitioning(a.status.status) || a.status.status == ActorState::kRunning) {
    return ReconcileOutcome{options_.recheck};
  }
  if (!pruned) return ReconcileOutcome{options_.retention_retry};
  if (prune_recheck) return ReconcileOutcome{*prune_recheck};
  return ReconcileOutcome{};
}

ClusterReconciler::CachedDecision ClusterReconciler::DecideFromCache(const api::Actor& a) {
  const std::string& node = NodeOf(a);
  const std::optional<bool> alive = NodeAlive(node);
  const CachedDecision read_live{CachedDecision::kReadLive, {}};
  auto done = [](ReconcileOutcome o) { return CachedDecision{CachedDecision::kDone, o}; };
  // Mirrors Reconcile's decisions, in its order; every branch that may write, but a bind,
  // reads the actor live.
  if (a.metadata.IsBeingDeleted()) {
    if (!a.metadata.HasFinalizer(api::kActorFinalizer)) return done({});
    if (node.empty() || alive == std::optional<bool>(false)) return read_live;
    return done({options_.recheck});
  }
  if (DetectStuck(a, Now(), options_.grace, alive)) return read_live;
  // Retention runs before a bind (Reconcile prunes, then binds).
  if (IsBindCandidate(a)) return PrunePending(a) ? read_live : CachedDecision{CachedDecision::kBind, {}};
  if (!api::IsTransitioning(a.status.status) && PrunePending(a)) return read_live;
  if (api::IsTransitioning(a.status.status) || a.status.status == ActorState::kRunning) {
    return done({options_.recheck});
  }
  return done({});
}

Result<ReconcileOutcome> ClusterReconciler::ForceClean(api::Actor& a, const std::string& reason,
                                                       const std::string& message) {
  const api::Actor before = a;
  if (Status s = FreeWorkersOf(a); !s.ok()) return s;
  const ActorState was = a.status.status;
  a.status.status = a.status.latest_snapshot ? ActorState::kSuspended : ActorState::kFailed;
  a.status.worker_name.clear();
  a.status.sandbox_id.clear();
  a.status.transition_start_time.reset();
  a.status.observed_generation = a.metadata.generation;
  const Time now = Now();
  api::SetCondition(a.status.conditions,
                    api::Condition{api::kConditionStuck, api::ConditionStatus::kTrue, a.metadata.generation, {},
                                   reason, message},
                    now);
  api::SetCondition(a.status.conditions,
                    api::Condition{api::kConditionReady, api::ConditionStatus::kFalse, a.metadata.generation, {},
                                   reason,
                                   "cleaned by the cluster controller: " + message},
                    now);
  api::SetCondition(a.status.conditions,
                    api::Condition{api::kConditionProgressing, api::ConditionStatus::kFalse,
                                   a.metadata.generation, {}, reason, "cleaned up"},
                    now);
  api::SetStateConditions(a.status, a.metadata.generation, now);
  auto patch = api::ActorStatusMergePatch(before, a);
  if (patch) {
    (*patch)["metadata"]["resourceVersion"] = before.metadata.resource_version;
    auto r = client_.Patch(kActorType, a.metadata.namespace_, a.metadata.name, PatchType::kMerge,
                           *patch, "status");
    if (!r.ok()) return r.status();
  }
  metrics_.CountForcedCleanup(api::MetricReason(reason));
  if (events_) {
    ObjectReference ref{api::kApiVersion, api::kActorKind, a.metadata.namespace_, a.metadata.name,
                        a.metadata.uid, "", ""};
    events_->Event(ref, EventType::kWarning, "ForcedCleanup", message);
  }
  spdlog::warn("actor force-cleaned by controller actor={}/{} reason={} was={} now={} message=\"{}\"",
               a.metadata.namespace_, a.metadata.name, api::MetricReason(reason), api::ToString(was),
               api::ToString(a.status.status), message);
  return ReconcileOutcome{};
}

bool IsBindCandidate(const api::Actor& a) {
  return a.spec.desired_state == api::DesiredState::kRunning && a.spec.node_name.empty() && !api::AwaitsTemplate(a.spec) &&
         a.status.status != ActorState::kRunning && !api::IsTransitioning(a.status.status) &&
         a.status.status != ActorState::kFailed;
}

IndexFunc IndexBindCandidates() {
  // IsBindCandidate on the actor's IndexedFields.
  return [](const json& o) -> std::vector<std::string> {
    const auto a = IndexedFields(o);
    return a && IsBindCandidate(*a) ? std::vector<std::string>{kBindCandidate} : std::vector<std::string>{};
  };
}

IndexFunc IndexPromised() {
  // HoldsAWorkerPromise (placement.h) on the actor's IndexedFields.
  return [](const json& o) -> std::vector<std::string> {
    const auto a = IndexedFields(o);
    return a && HoldsAWorkerPromise(*a) ? std::vector<std::string>{kPromised} : std::vector<std::string>{};
  };
}

std::vector<std::pair<std::string, IndexFunc>> ClusterActorIndexes() {
  return {{kBindCandidateIndex, IndexBindCandidates()}, {kPromisedIndex, IndexPromised()}};
}

PlacementInput ClusterReconciler::PlacementInputFor(const api::Actor& a, const std::string& avoid) const {
  PlacementInput in;
  in.avoid = avoid;
  std::set<std::string> nodes_seen;
  for (const auto& w : workers_parsed_.ParseAll(workers_.List())) {
    if (nodes_seen.insert(w->spec.node_name).second && NodeAlive(w->spec.node_name) == std::optional<bool>(true)) {
      in.live_nodes.insert(w->spec.node_name);
    }
    in.workers.push_back(*w);
  }
  // A live node without Workers counts too: the message says how many nodes were looked at.
  const std::string prefix = NodeLeaseName("");
  for (const auto& obj : leases_.List()) {
    const json meta = obj->value("metadata", json::object());
    const std::string name = meta.value("name", "");
    if (meta.value("namespace", "") != options_.lease_namespace || !name.starts_with(prefix)) continue;
    const std::string node = name.substr(prefix.size());
    if (NodeAlive(node) == std::optional<bool>(true)) in.live_nodes.insert(node);
  }
  for (const auto& o : promised_parsed_.ParseAll(actors_.ByIndex(kPromisedIndex, kPromised))) in.actors.push_back(*o);
  // A clone restores where its source's snapshot can (RestoresOnto): the source, by name (once:
  // a source that is itself promised a worker is already there).
  if (a.spec.source) {
    const std::string key = ObjectKey(a.metadata.namespace_, a.spec.source->actor_name);
    const bool listed = std::any_of(in.actors.begin(), in.actors.end(),
                                    [&](const api::Actor& o) { return o.metadata.Key() == key; });
    if (ObjectPtr source = listed ? nullptr : actors_.Get(key)) {
      if (auto parsed = api::ActorFromJson(*source); parsed.ok()) in.actors.push_back(std::move(*parsed));
    }
  }
  for (const auto& node : in.live_nodes) {
    if (!DrainOf(node).takes_new_actors) in.closed_nodes.insert(node);
  }
  return in;
}

api::NodeDrain ClusterReconciler::DrainOf(const std::string& node) const {
  if (!nodes_ || node.empty()) return {};
  ObjectPtr obj = nodes_->Get(node);
  return obj ? api::NodeDrainOf(*obj) : api::NodeDrain{};
}

namespace {
// A bind's write refused for a version the cache had not caught up with: the actor is looked
// at again soon (its newer version is on the way), without counting an error.
ReconcileOutcome AgainAfterConflict(const api::Actor& a, const char* write) {
  spdlog::debug("bind conflict actor={}/{} write={} read={}", a.metadata.namespace_, a.metadata.name, write,
                a.metadata.resource_version);
  ReconcileOutcome again;
  again.requeue = true;
  return again;
}

ObjectReference RefTo(const api::Actor& a) {
  return ObjectReference{api::kApiVersion, api::kActorKind, a.metadata.namespace_, a.metadata.name,
                         a.metadata.uid, "", ""};
}
}  // namespace

Result<ReconcileOutcome> ClusterReconciler::Bind(api::Actor a) {
  const auto& snap = a.status.latest_snapshot;
  const bool snapshot_local = snap && !snap->node_name.empty();
  const api::Condition* ready = api::FindCondition(a.status.conditions, api::kConditionReady);
  // The node agent's word that its node has no free worker for this actor (the binder's own
  // NoFreeWorker is only ever written on an actor without a live node).
  const bool waiting = ready && ready->reason == api::kReasonNoFreeWorker;
  const bool on_live_node =
      !a.status.node_name.empty() && NodeAlive(a.status.node_name) == std::optional<bool>(true);
  // Its agent suspends it and resumes nothing there: it must move (a paused snapshot still
  // places it there until that agent has committed it).
  const bool draining = on_live_node && DrainOf(a.status.node_name).drain;
  if (on_live_node && !draining && !(waiting && !snapshot_local)) return ReconcileOutcome{};

  const Placement p = Place(a, PlacementInputFor(a, waiting ? a.status.node_name : ""));
  if (p.node.empty()) {
    // On a live node, its agent's condition already says why the actor waits.
    if (on_live_node && !draining) return ReconcileOutcome{options_.recheck};
    return ReportUnplaced(a, p);
  }
  if (p.node == a.status.node_name) return ReconcileOutcome{options_.recheck};
  return BindTo(a, p);
}

Result<ReconcileOutcome> ClusterReconciler::ReportUnplaced(api::Actor& a, const Placement& p) {
  const api::Actor before = a;
  const api::Condition* old = api::FindCondition(before.status.conditions, api::kConditionReady);
  const bool news = !old || old->status != api::ConditionStatus::kFalse || old->reason != p.reason ||
                    old->message != p.message;
  api::SetCondition(a.status.conditions,
                    api::Condition{api::kConditionReady, api::ConditionStatus::kFalse,
                                   a.metadata.generation, {}, p.reason, p.message},
                    Now());
  api::SetStateConditions(a.status, a.metadata.generation, Now());
  if (auto patch = api::ActorStatusMergePatch(before, a)) {
    (*patch)["metadata"]["resourceVersion"] = before.metadata.resource_version;
    auto r = client_.Patch(kActorType, a.metadata.namespace_, a.metadata.name, PatchType::kMerge,
                           *patch, "status");
    if (!r.ok() && r.status().code() == Code::kAborted) return AgainAfterConflict(before, "unplaced");
    if (!r.ok()) return r.status();
  }
  // Once per new message, as the scheduler's FailedScheduling: requeues and rechecks that
  // find the same counts write nothing and say nothing.
  if (news) {
    if (events_) events_->Event(RefTo(a), EventType::kWarning, "FailedBinding", p.message);
    spdlog::info("binding failed actor={}/{} reason={} message=\"{}\"", a.metadata.namespace_,
                 a.metadata.name, p.reason, p.message);
  }
  return ReconcileOutcome{options_.recheck};
}

Result<ReconcileOutcome> ClusterReconciler::BindTo(const api::Actor& a, const Placement& p) {
  // The label first (main endpoint), then status.nodeName (which hands it to the agent), each
  // on the version before it: the actor as decided on, then as the label left it.
  auto labeled = client_.Patch(
      kActorType, a.metadata.namespace_, a.metadata.name, PatchType::kMerge,
      {{"metadata", {{"resourceVersion", a.metadata.resource_version}, {"labels", {{api::kNodeLabel, p.node}}}}}});
  if (!labeled.ok() && labeled.status().code() == Code::kAborted) return AgainAfterConflict(a, "label");
  if (!labeled.ok()) return labeled.status();
  auto fresh = api::ActorFromJson(*labeled);
  if (!fresh.ok()) return fresh.status();
  api::Actor after = *fresh;
  after.status.node_name = p.node;
  // A reason for not placing it (the binder's, or an agent's NoFreeWorker on the node it
  // leaves) is no longer true; the agent of the new node writes its own conditions.
  std::string message = "bound to node " + p.node + " (" + std::to_string(p.free) + "/" +
                        std::to_string(p.suitable) + " suitable workers free)";
  if (!a.status.node_name.empty() && DrainOf(a.status.node_name).drain) {
    message += ", away from node " + a.status.node_name + ", which is draining";
  }
  if (const api::Condition* ready = api::FindCondition(after.status.conditions, api::kConditionReady);
      ready && (ready->reason == api::kReasonNoFreeWorker || ready->reason == api::kReasonUnschedulable)) {
    api::SetCondition(after.status.conditions,
                      api::Condition{api::kConditionReady, api::ConditionStatus::kFalse,
                                     after.metadata.generation, {}, api::kReasonBound, message},
                      Now());
  }
  json patch = api::ActorStatusMergePatch(*fresh, after).value_or(json::object());
  patch["metadata"]["resourceVersion"] = fresh->metadata.resource_version;
  auto bound = client_.Patch(kActorType, a.metadata.namespace_, a.metadata.name, PatchType::kMerge,
                             patch, "status");
  if (!bound.ok()) return bound.status();
  if (events_) events_->Event(RefTo(a), EventType::kNormal, "Bound", message);
  spdlog::info("actor bound actor={}/{} node={} previous={} free={} suitable={}", a.metadata.namespace_,
               a.metadata.name, p.node, a.status.node_name, p.free, p.suitable);
  return ReconcileOutcome{options_.recheck};
}

void ClusterReconciler::UpdateGauges() {
  std::map<std::string, int> by_status, stuck;
  const Time now = Now();
  auto string_at = [](const json& o, const char* key) -> std::string {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : "";
  };
  for (const auto& obj : actors_.List()) {
    // Only an actor that occupies a node can be stuck (DetectStuck); the rest — most of a
    // fleet, at rest — are counted from their status string, without parsing the whole actor
    // (every 5 s, for every actor).
    const auto st = obj->find("status");
    const bool has_status = st != obj->end() && st->is_object();
    const std::string state = has_status ? string_at(*st, "status") : "";
    const auto parsed = state.empty() ? std::optional(ActorState::kUnspecified) : api::ParseActorState(state);
    if (!parsed) continue;
    if (*parsed != ActorState::kRunning && !api::IsTransitioning(*parsed) &&
        (!has_status || string_at(*st, "workerName").empty())) {
      by_status[api::ToString(*parsed)]++;
      continue;
    }
    auto a = api::ActorFromJson(*obj);
    if (!a.ok()) continue;
    const std::string s = api::ToString(a->status.status);
    by_status[s]++;
    const std::string& node = NodeOf(*a);
    if (DetectStuck(*a, now, options_.grace, NodeAlive(node))) stuck[s]++;
  }
  metrics_.SetActors(by_status, stuck);
}

}  // namespace stasis
