#include "reconcilers/cluster/template_decisions.h"

namespace stasis {
namespace {

using api::ActorState;

bool FailedAtThisGeneration(const TemplateObservation& o) {
  const auto& c = o.golden_ready;
  return c && c->status == api::ConditionStatus::kFalse && c->observed_generation == o.generation &&
         (c->reason == api::kReasonReadinessGateFailed || c->reason == api::kReasonGoldenActorFailed);
}

bool CommittedFull(const std::optional<api::Snapshot>& s) {
  return s && s->node_name.empty() && s->scope == api::SnapshotScope::kFull;
}

const GoldenActorView* Find(const TemplateObservation& o, const std::string& name) {
  for (const auto& g : o.goldens) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

void Say(TemplateActions& t, bool ready, const char* reason, std::string message) {
  t.ready = ready;
  t.reason = reason;
  t.message = std::move(message);
}

// The golden is recorded for this generation: actors may be filled in from it, and older
// golden actors nobody may still start from go.
TemplateActions Recorded(const std::string& template_name, const TemplateObservation& o,
                         const api::GoldenSnapshot& golden) {
  TemplateActions t;
  Say(t, true, api::kReasonGoldenSnapshotTaken,
      "golden snapshot " + golden.snapshot_id + " of actor " + golden.actor_name + " (generation " +
          std::to_string(golden.generation) + ")");
  t.pool = DecidePool(template_name, o.warm, golden, o.members, o.pending, o.free_workers);
  t.recheck = t.pool.filling;
  for (const auto& g : o.goldens) {
    if (g.name != golden.actor_name && !g.being_deleted && !o.needed_as_source.count(g.name)) {
      t.delete_goldens.push_back(g.name);
    }
  }
  return t;
}

// Taking the golden of this generation through its golden actor, one step at a time.
TemplateActions Taking(const std::string& template_name, const std::string& current,
                       const TemplateObservation& o) {
  TemplateActions t;
  t.recheck = true;
  const GoldenActorView* g = Find(o, current);
  if (!g) {
    t.create_golden = current;
    Say(t, false, api::kReasonTakingGolden, "creating golden actor " + current);
    return t;
  }
  if (g->being_deleted) {
    Say(t, false, api::kReasonTakingGolden, "waiting for the previous golden actor " + current + " to be deleted");
    return t;
  }
  if (g->status == ActorState::kFailed) {
    Say(t, false, api::kReasonGoldenActorFailed, "golden actor " + current + " failed: " + g->failure);
    t.delete_goldens.push_back(current);
    t.recheck = false;
    return t;
  }
  if (g->gate_timed_out) {
    Say(t, false, api::kReasonReadinessGateFailed,
        "the readiness gate did not pass in golden actor " + current + " within its timeout; fix the template "
        "(a new generation takes a golden again)");
    t.delete_goldens.push_back(current);
    t.recheck = false;
    return t;
  }
  if (g->status == ActorState::kSuspended && g->desired == api::DesiredState::kSuspended && CommittedFull(g->latest)) {
    const api::Snapshot& s = *g->latest;
    api::GoldenSnapshot golden{current, s.id, o.generation, s.image_digest, s.size_bytes, s.cuda_checkpointed,
                               s.taken_at};
    t = Recorded(template_name, o, golden);
    t.record = golden;
    return t;
  }
  if (g->status == ActorState::kRunning && g->desired == api::DesiredState::kRunning &&
      (!o.has_gate || g->gate_passed)) {
    t.suspend_golden = current;
    Say(t, false, api::kReasonTakingGolden,
        "suspending golden actor " + current + (o.has_gate ? ": its readiness gate passed" : ": it runs"));
    return t;
  }
  std::string state = g->status == ActorState::kUnspecified ? "not started" : api::ToString(g->status);
  if (g->status == ActorState::kRunning && !g->gate_passed && g->desired == api::DesiredState::kRunning) {
    state += ", waiting for its readiness gate";
  }
  Say(t, false, api::kReasonTakingGolden, "golden actor " + current + " is " + state);
  return t;
}

}  // namespace

std::string GoldenActorName(const std::string& template_name, int64_t generation) {
  return template_name + "-golden-" + std::to_string(generation);
}

TemplateActions DecideTemplate(const std::string& template_name, const TemplateObservation& o) {
  const std::string current = GoldenActorName(template_name, o.generation);
  if (o.recorded && o.recorded->generation == o.generation) {
    if (o.recorded_in_store) return Recorded(template_name, o, *o.recorded);
    TemplateActions t;
    t.clear_recorded = true;
    t.recheck = true;
    Say(t, false, api::kReasonGoldenSnapshotMissing,
        "golden snapshot " + o.recorded->snapshot_id + " of actor " + o.recorded->actor_name +
            " is gone from the snapshot store; taking it again");
    const GoldenActorView* g = Find(o, o.recorded->actor_name);
    if (g && !g->being_deleted) t.delete_goldens.push_back(g->name);
    return t;
  }
  if (FailedAtThisGeneration(o)) {
    TemplateActions t;
    Say(t, false, o.golden_ready->reason.c_str(), o.golden_ready->message);
    const GoldenActorView* g = Find(o, current);
    if (g && !g->being_deleted) t.delete_goldens.push_back(current);
    return t;
  }
  return Taking(template_name, current, o);
}

}  // namespace stasis
