#include "reconcilers/cluster/template_reconciler.h"

#include <spdlog/spdlog.h>

#include <map>

#include "api/json_mapping.h"
#include "api/template_json.h"
#include "api/worker.h"
#include "reconcilers/cluster/placement.h"
#include "reconcilers/api_resources.h"

namespace stasis {
namespace {

using json = nlohmann::json;

GoldenActorView ViewOf(const api::Actor& a) {
  GoldenActorView g;
  g.name = a.metadata.name;
  g.being_deleted = a.metadata.IsBeingDeleted();
  g.status = a.status.status;
  g.desired = a.spec.desired_state;
  if (const auto* gate = api::FindCondition(a.status.conditions, api::kConditionReadinessGate)) {
    g.gate_passed = gate->status == api::ConditionStatus::kTrue;
    g.gate_timed_out = gate->reason == api::kReasonReadinessGateTimedOut;
  }
  if (const auto* ready = api::FindCondition(a.status.conditions, api::kConditionReady)) g.failure = ready->message;
  g.latest = a.status.latest_snapshot;
  return g;
}

bool LabelIs(const api::Actor& a, const char* label, const std::string& value) {
  auto it = a.metadata.labels.find(label);
  return it != a.metadata.labels.end() && it->second == value;
}

PoolMemberView MemberOf(const api::Actor& a, const std::map<std::string, api::Actor>& all) {
  PoolMemberView m;
  m.name = a.metadata.name;
  if (a.spec.source) m.source = a.spec.source->actor_name;
  m.being_deleted = a.metadata.IsBeingDeleted();
  m.status = a.status.status;
  m.desired = a.spec.desired_state;
  if (auto it = a.metadata.annotations.find(kClaimedByAnnotation); it != a.metadata.annotations.end()) {
    m.claimed_by = it->second;
  }
  m.claimer = ClaimerOf(m.name, m.claimed_by, all);
  m.latest = a.status.latest_snapshot;
  return m;
}

json TemplateActorSpec(const api::ActorTemplate& t) {
  json spec = api::ActorSpecJson(t.spec.actor);
  // Each actor keeps where and how it wants to run; the rest is the template's.
  spec.erase("nodeName");
  spec.erase("desiredState");
  return spec;
}

json OwnedActor(const api::ActorTemplate& t, const std::string& name, const char* label, json spec) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kActorKind},
          {"metadata",
           {{"name", name},
            {"namespace", t.metadata.namespace_},
            {"labels", {{label, t.metadata.name}}},
            {"annotations", {{kTemplateGenerationAnnotation, std::to_string(t.metadata.generation)}}},
            {"ownerReferences",
             json::array({{{"apiVersion", api::kApiVersion},
                           {"kind", api::kActorTemplateKind},
                           {"name", t.metadata.name},
                           {"uid", t.metadata.uid},
                           {"controller", true}}})}}},
          {"spec", std::move(spec)}};
}

}  // namespace

std::vector<std::string> TemplateKeysOf(const json& actor) {
  std::vector<std::string> keys;
  const json& meta = actor.value("metadata", json::object());
  const std::string ns = meta.value("namespace", "");
  const json labels = meta.value("labels", json::object());
  for (const char* label : {api::kGoldenOfLabel, api::kWarmPoolOfLabel}) {
    if (labels.contains(label) && labels[label].is_string()) keys.push_back(ns + "/" + labels[label].get<std::string>());
  }
  const json::json_pointer ref("/spec/templateRef/name");
  if (actor.contains(ref) && actor.at(ref).is_string()) keys.push_back(ns + "/" + actor.at(ref).get<std::string>());
  return keys;
}

TemplateReconciler::TemplateReconciler(TemplateReconcilerOptions options, KubeClient& client,
                                       const ObjectStore& templates, const ObjectStore& actors,
                                       const ObjectStore& workers, EventRecorder* events, const SnapshotStore* store,
                                       ClusterMetrics* metrics, Clock& clock)
    : options_(options),
      client_(client),
      templates_(templates),
      actors_(actors),
      workers_(workers),
      events_(events),
      store_(store),
      metrics_(metrics),
      clock_(clock) {}

Result<ReconcileOutcome> TemplateReconciler::Reconcile(const Request& request) {
  auto r = ReconcileTemplate(request);
  if (r.ok() || r.status().code() != Code::kAborted) return r;
  // A 409: a write was checked against a template or actor the cache had not caught up with.
  // The watch brings the newer object; deciding again from it is the whole cure, not an error.
  spdlog::debug("template reconcile conflict template={} error=\"{}\"", request.Key(), r.status().ToString());
  ReconcileOutcome again;
  again.requeue = true;
  return again;
}

Result<ReconcileOutcome> TemplateReconciler::ReconcileTemplate(const Request& request) {
  ObjectPtr cached = templates_.Get(request.Key());
  if (!cached) {
    // A cache may lag: only a quorum read's NotFound lets its golden actors and pool go.
    auto live = client_.Get(kActorTemplateType, request.ns, request.name);
    if (live.ok()) return ReconcileOutcome{options_.recheck};
    if (live.status().code() != Code::kNotFound) return live.status();
    if (Status s = DeleteActorsOf(request.ns, request.name); !s.ok()) return s;
    if (metrics_) metrics_->ForgetTemplate(request.ns, request.name);
    return ReconcileOutcome{};
  }
  auto parsed = api::ActorTemplateFromJson(*cached);
  if (!parsed.ok()) {
    spdlog::warn("template unreadable template={} error=\"{}\"", request.Key(), parsed.status().ToString());
    return ReconcileOutcome{};
  }
  const api::ActorTemplate& t = *parsed;
  const TemplateObservation o = Observe(t);
  const TemplateActions act = DecideTemplate(t.metadata.name, o);
  const std::string& ns = t.metadata.namespace_;
  if (act.create_golden) {
    if (Status s = CreateGolden(t, *act.create_golden); !s.ok()) return s;
  }
  if (act.suspend_golden) {
    if (Status s = SetDesiredState(ns, *act.suspend_golden, "Suspended"); !s.ok()) return s;
  }
  for (const auto& name : act.delete_goldens) {
    if (Status s = DeleteActor(ns, name); !s.ok()) return s;
  }
  if (Status s = WriteStatus(t, act); !s.ok()) return s;
  if (act.ready) {
    const api::GoldenSnapshot& golden = act.record ? *act.record : *t.status.golden;
    if (Status s = KeepPool(t, golden, act.pool, o.resource_versions); !s.ok()) return s;
  }
  if (act.recheck) return ReconcileOutcome{options_.recheck};
  if (act.ready && store_) return ReconcileOutcome{options_.store_check};
  return ReconcileOutcome{};
}

TemplateObservation TemplateReconciler::Observe(const api::ActorTemplate& t) const {
  TemplateObservation o;
  o.generation = t.metadata.generation;
  o.has_gate = t.spec.readiness_gate.has_value();
  o.recorded = t.status.golden;
  o.warm = t.spec.warm;
  if (const auto* c = api::FindCondition(t.status.conditions, api::kConditionGoldenReady)) o.golden_ready = *c;
  std::map<std::string, api::Actor> by_name;
  for (const auto& obj : actors_.ByIndex(kActorsByNamespaceIndex, t.metadata.namespace_)) {
    auto a = api::ActorFromJson(*obj);
    if (a.ok()) by_name.emplace(a->metadata.name, std::move(*a));
  }
  for (const auto& [name, a] : by_name) {
    if (LabelIs(a, api::kGoldenOfLabel, t.metadata.name)) o.goldens.push_back(ViewOf(a));
    if (LabelIs(a, api::kWarmPoolOfLabel, t.metadata.name)) {
      o.members.push_back(MemberOf(a, by_name));
      o.resource_versions[name] = a.metadata.resource_version;
    }
    if (a.spec.template_ref && a.spec.template_ref->name == t.metadata.name && api::AwaitsTemplate(a.spec)) {
      o.pending.push_back({name, a.spec.node_name});
      o.resource_versions[name] = a.metadata.resource_version;
    }
    if (a.spec.source && !a.status.latest_snapshot) o.needed_as_source.insert(a.spec.source->actor_name);
  }
  if (o.warm > 0 || !o.members.empty()) {
    api::Actor like;
    like.spec = t.spec.actor;
    for (const auto& obj : workers_.List()) {
      auto w = api::WorkerFromJson(*obj);
      if (w.ok() && w->IsFree() && WorkerSuits(*w, like)) ++o.free_workers[w->spec.node_name];
    }
  }
  if (o.recorded && store_) {
    // Missing means the store answered without it: a store that cannot answer (unreachable,
    // refusing) keeps the golden, since taking it again deletes the golden actor.
    auto found = store_->HasCommitted(t.metadata.namespace_, o.recorded->actor_name, o.recorded->snapshot_id);
    if (!found.ok()) {
      spdlog::warn("golden snapshot not checked template={}/{} snapshot={} error=\"{}\"", t.metadata.namespace_,
                   t.metadata.name, o.recorded->snapshot_id, found.status().ToString());
    }
    o.recorded_in_store = !found.ok() || *found;
    if (!o.recorded_in_store) {
      spdlog::warn("golden snapshot missing from the store template={}/{} actor={} snapshot={}", t.metadata.namespace_,
                   t.metadata.name, o.recorded->actor_name, o.recorded->snapshot_id);
    }
  }
  return o;
}

Status TemplateReconciler::CreateGolden(const api::ActorTemplate& t, const std::string& name) {
  api::ActorSpec spec = t.spec.actor;
  // A Data golden would leave nothing to restore: golden snapshots are Full whatever the spec.
  spec.snapshots.on_pause = api::SnapshotScope::kFull;
  spec.snapshots.on_commit = api::SnapshotScope::kFull;
  spec.desired_state = api::DesiredState::kRunning;
  spec.node_name.clear();
  spec.source.reset();
  spec.template_ref.reset();
  spec.readiness_gate = t.spec.readiness_gate;
  const json object = OwnedActor(t, name, api::kGoldenOfLabel, api::ActorSpecJson(spec));
  auto created = client_.Create(kActorType, t.metadata.namespace_, object);
  if (created.status().code() == Code::kAlreadyExists) return OkStatus();  // an earlier reconcile's
  if (!created.ok()) return created.status();
  spdlog::info("golden actor created template={}/{} actor={} generation={}", t.metadata.namespace_, t.metadata.name,
               name, t.metadata.generation);
  return OkStatus();
}

Status TemplateReconciler::SetDesiredState(const std::string& ns, const std::string& name, const char* state) {
  auto r = client_.Patch(kActorType, ns, name, PatchType::kMerge, json{{"spec", {{"desiredState", state}}}});
  if (!r.ok()) return r.status();
  spdlog::info("template actor desired state set actor={}/{} desired_state={}", ns, name, state);
  return OkStatus();
}

Status TemplateReconciler::DeleteActor(const std::string& ns, const std::string& name, const std::string& rv) {
  DeleteOptions options;
  if (!rv.empty()) options.precondition_resource_version = rv;
  Status s = client_.Delete(kActorType, ns, name, options);
  if (s.code() == Code::kNotFound) return OkStatus();  // a repeat of an earlier reconcile's delete
  if (!s.ok()) return s;
  spdlog::info("template actor deleted actor={}/{}", ns, name);
  return OkStatus();
}

Status TemplateReconciler::DeleteActorsOf(const std::string& ns, const std::string& name) {
  for (const auto& obj : actors_.ByIndex(kActorsByNamespaceIndex, ns)) {
    const json labels = (*obj)["metadata"].value("labels", json::object());
    if (labels.value(api::kGoldenOfLabel, "") != name && labels.value(api::kWarmPoolOfLabel, "") != name) continue;
    if (Status s = DeleteActor(ns, (*obj)["metadata"].value("name", "")); !s.ok()) return s;
  }
  return OkStatus();
}

Status TemplateReconciler::KeepPool(const api::ActorTemplate& t, const api::GoldenSnapshot& golden,
                                    const PoolActions& pool, const std::map<std::string, std::string>& observed) {
  auto rv = [&observed](const std::string& name) {
    auto it = observed.find(name);
    return it == observed.end() ? std::string() : it->second;
  };
  const std::string& ns = t.metadata.namespace_;
  for (const auto& name : pool.remove) {
    // At the decision's resourceVersion: a member claimed since is never deleted as surplus.
    if (Status s = DeleteActor(ns, name, rv(name)); !s.ok()) return s;
  }
  for (const auto& name : pool.pause) {
    if (Status s = SetDesiredState(ns, name, "Paused"); !s.ok()) return s;
  }
  for (const auto& claim : pool.claims) {
    if (Status s = ClaimMember(t, claim, rv(claim.member), rv(claim.actor)); !s.ok()) return s;
  }
  for (const auto& name : pool.from_golden) {
    if (Status s = FillIn(t, name, rv(name), {{"actorName", golden.actor_name}}, ""); !s.ok()) return s;
    if (metrics_ && t.spec.warm > 0) metrics_->CountWarmClaim(ns, t.metadata.name, false);
  }
  for (const auto& name : pool.create) {
    json spec = TemplateActorSpec(t);
    spec["source"] = {{"actorName", golden.actor_name}};
    spec["desiredState"] = "Running";
    auto created = client_.Create(kActorType, ns, OwnedActor(t, name, api::kWarmPoolOfLabel, spec));
    if (created.status().code() == Code::kAlreadyExists) continue;  // an earlier reconcile's, not yet cached
    if (!created.ok()) return created.status();
    spdlog::info("warm pool member created template={}/{} actor={} golden={}", ns, t.metadata.name, name,
                 golden.actor_name);
  }
  if (metrics_) metrics_->SetWarmPool(ns, t.metadata.name, pool.ready);
  return OkStatus();
}

// The member first (its resourceVersion the precondition: one claimer per member), then the
// actor; a failure between the two leaves the member claimed by this actor, which the next
// reconcile fills in from the same member.
Status TemplateReconciler::ClaimMember(const api::ActorTemplate& t, const PoolClaim& claim,
                                       const std::string& member_rv, const std::string& actor_rv) {
  const std::string& ns = t.metadata.namespace_;
  if (!claim.already_claimed) {
    json patch = {{"metadata", {{"resourceVersion", member_rv}, {"annotations", {{kClaimedByAnnotation, claim.actor}}}}}};
    auto r = client_.Patch(kActorType, ns, claim.member, PatchType::kMerge, patch);
    if (!r.ok()) return r.status();
  }
  json source = {{"actorName", claim.member}, {"snapshotID", claim.snapshot_id}};
  if (Status s = FillIn(t, claim.actor, actor_rv, source, claim.node); !s.ok()) return s;
  if (metrics_) metrics_->CountWarmClaim(ns, t.metadata.name, true);
  return OkStatus();
}

Status TemplateReconciler::FillIn(const api::ActorTemplate& t, const std::string& name, const std::string& rv,
                                  const json& source, const std::string& node) {
  json spec = TemplateActorSpec(t);
  spec["source"] = source;
  if (!node.empty()) spec["nodeName"] = node;
  // The resourceVersion the decision saw: a change of the actor since (its fill by an earlier
  // reconcile, a user's edit) wins with a 409, and the actor is decided on again.
  json patch = {{"metadata", {{"resourceVersion", rv}}}, {"spec", spec}};
  auto r = client_.Patch(kActorType, t.metadata.namespace_, name, PatchType::kMerge, patch);
  if (!r.ok()) return r.status();
  spdlog::info("actor filled in from template actor={}/{} template={} source={} snapshot={} node={}",
               t.metadata.namespace_, name, t.metadata.name, source.value("actorName", ""),
               source.value("snapshotID", ""), node);
  return OkStatus();
}

Status TemplateReconciler::WriteStatus(const api::ActorTemplate& before, const TemplateActions& act) {
  api::ActorTemplate after = before;
  after.status.observed_generation = before.metadata.generation;
  if (act.record) after.status.golden = act.record;
  if (act.clear_recorded) after.status.golden.reset();
  after.status.warm_ready = act.ready ? act.pool.ready : 0;
  const Time now = std::chrono::floor<std::chrono::seconds>(clock_.WallNow());
  api::Condition c{api::kConditionGoldenReady,
                   act.ready ? api::ConditionStatus::kTrue : api::ConditionStatus::kFalse,
                   before.metadata.generation,
                   {},
                   act.reason,
                   act.message};
  api::SetCondition(after.status.conditions, c, now);
  auto patch = api::ActorTemplateStatusMergePatch(before, after);
  if (!patch) return OkStatus();
  auto r = client_.Patch(kActorTemplateType, before.metadata.namespace_, before.metadata.name, PatchType::kMerge,
                         *patch, "status");
  if (!r.ok()) return r.status();
  const auto* was = api::FindCondition(before.status.conditions, api::kConditionGoldenReady);
  if (events_ && (!was || was->reason != act.reason)) {
    const ObjectReference ref{api::kApiVersion, api::kActorTemplateKind, before.metadata.namespace_,
                              before.metadata.name, before.metadata.uid, "", ""};
    events_->Event(ref, act.ready || act.reason == api::kReasonTakingGolden ? EventType::kNormal : EventType::kWarning,
                   act.reason, act.message);
  }
  spdlog::info("template status template={}/{} golden_ready={} reason={} message=\"{}\"", before.metadata.namespace_,
               before.metadata.name, act.ready, act.reason, act.message);
  return OkStatus();
}

}  // namespace stasis
