#include "reconcilers/cluster/template_reconciler.h"

#include <spdlog/spdlog.h>

#include "api/json_mapping.h"
#include "api/template_json.h"
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

bool Ignorable(const Status& s, Code code) { return s.ok() || s.code() == code; }

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
                                       const ObjectStore& templates, const ObjectStore& actors, EventRecorder* events,
                                       const SnapshotStore* store, Clock& clock)
    : options_(options),
      client_(client),
      templates_(templates),
      actors_(actors),
      events_(events),
      store_(store),
      clock_(clock) {}

Result<ReconcileOutcome> TemplateReconciler::Reconcile(const Request& request) {
  ObjectPtr cached = templates_.Get(request.Key());
  if (!cached) {
    // A cache may lag: only a quorum read's NotFound lets the golden actors go.
    auto live = client_.Get(kActorTemplateType, request.ns, request.name);
    if (live.ok()) return ReconcileOutcome{options_.recheck};
    if (live.status().code() != Code::kNotFound) return live.status();
    if (Status s = DeleteGoldensOf(request.ns, request.name); !s.ok()) return s;
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
    if (Status s = SuspendGolden(ns, *act.suspend_golden); !s.ok()) return s;
  }
  for (const auto& name : act.delete_goldens) {
    if (Status s = DeleteActor(ns, name); !s.ok()) return s;
  }
  if (Status s = WriteStatus(t, act); !s.ok()) return s;
  if (act.fill_pending) {
    const api::GoldenSnapshot& golden = act.record ? *act.record : *t.status.golden;
    if (Status s = FillPending(t, golden); !s.ok()) return s;
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
  if (const auto* c = api::FindCondition(t.status.conditions, api::kConditionGoldenReady)) o.golden_ready = *c;
  for (const auto& obj : actors_.ByIndex(kActorsByNamespaceIndex, t.metadata.namespace_)) {
    auto a = api::ActorFromJson(*obj);
    if (!a.ok()) continue;
    auto label = a->metadata.labels.find(api::kGoldenOfLabel);
    if (label != a->metadata.labels.end() && label->second == t.metadata.name) o.goldens.push_back(ViewOf(*a));
    if (a->spec.template_ref && a->spec.template_ref->name == t.metadata.name && api::AwaitsTemplate(a->spec)) {
      ++o.pending_actors;
    }
    if (a->spec.source && !a->status.latest_snapshot) o.needed_as_source.insert(a->spec.source->actor_name);
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
  json object = {
      {"apiVersion", api::kApiVersion},
      {"kind", api::kActorKind},
      {"metadata",
       {{"name", name},
        {"namespace", t.metadata.namespace_},
        {"labels", {{api::kGoldenOfLabel, t.metadata.name}}},
        {"annotations", {{kTemplateGenerationAnnotation, std::to_string(t.metadata.generation)}}},
        {"ownerReferences",
         json::array({{{"apiVersion", api::kApiVersion},
                       {"kind", api::kActorTemplateKind},
                       {"name", t.metadata.name},
                       {"uid", t.metadata.uid},
                       {"controller", true}}})}}},
      {"spec", api::ActorSpecJson(spec)}};
  auto created = client_.Create(kActorType, t.metadata.namespace_, object);
  if (!Ignorable(created.status(), Code::kAlreadyExists)) return created.status();
  spdlog::info("golden actor created template={}/{} actor={} generation={}", t.metadata.namespace_, t.metadata.name,
               name, t.metadata.generation);
  return OkStatus();
}

Status TemplateReconciler::SuspendGolden(const std::string& ns, const std::string& name) {
  auto r = client_.Patch(kActorType, ns, name, PatchType::kMerge, json{{"spec", {{"desiredState", "Suspended"}}}});
  if (!r.ok()) return r.status();
  spdlog::info("golden actor suspended actor={}/{}", ns, name);
  return OkStatus();
}

Status TemplateReconciler::DeleteActor(const std::string& ns, const std::string& name) {
  Status s = client_.Delete(kActorType, ns, name);
  if (!Ignorable(s, Code::kNotFound)) return s;
  spdlog::info("golden actor deleted actor={}/{}", ns, name);
  return OkStatus();
}

Status TemplateReconciler::DeleteGoldensOf(const std::string& ns, const std::string& name) {
  for (const auto& obj : actors_.ByIndex(kActorsByNamespaceIndex, ns)) {
    const json labels = (*obj)["metadata"].value("labels", json::object());
    if (labels.value(api::kGoldenOfLabel, "") != name) continue;
    if (Status s = DeleteActor(ns, (*obj)["metadata"].value("name", "")); !s.ok()) return s;
  }
  return OkStatus();
}

Status TemplateReconciler::FillPending(const api::ActorTemplate& t, const api::GoldenSnapshot& golden) {
  json spec = api::ActorSpecJson(t.spec.actor);
  // Each actor keeps where and how it wants to run; the rest is the template's.
  spec.erase("nodeName");
  spec.erase("desiredState");
  spec["source"] = {{"actorName", golden.actor_name}};
  for (const auto& obj : actors_.ByIndex(kActorsByNamespaceIndex, t.metadata.namespace_)) {
    auto a = api::ActorFromJson(*obj);
    if (!a.ok() || !a->spec.template_ref || a->spec.template_ref->name != t.metadata.name ||
        !api::AwaitsTemplate(a->spec)) {
      continue;
    }
    // The resourceVersion read: a concurrent change of the actor wins (409, tried again).
    json patch = {{"metadata", {{"resourceVersion", a->metadata.resource_version}}}, {"spec", spec}};
    auto r = client_.Patch(kActorType, a->metadata.namespace_, a->metadata.name, PatchType::kMerge, patch);
    if (!r.ok()) return r.status();
    spdlog::info("actor filled in from template actor={}/{} template={} golden={} snapshot={}", a->metadata.namespace_,
                 a->metadata.name, t.metadata.name, golden.actor_name, golden.snapshot_id);
  }
  return OkStatus();
}

Status TemplateReconciler::WriteStatus(const api::ActorTemplate& before, const TemplateActions& act) {
  api::ActorTemplate after = before;
  after.status.observed_generation = before.metadata.generation;
  if (act.record) after.status.golden = act.record;
  if (act.clear_recorded) after.status.golden.reset();
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
