// How the node agent writes what it decided: the Actor's status as a merge patch carrying the
// resourceVersion it read (a concurrent writer makes it fail with 409 rather than be
// overwritten), the finalizer, conditions with the write's generation, and Events.
#include <spdlog/spdlog.h>

#include "api/json_mapping.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"

namespace stasis {

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
  api::SetStateConditions(c.a.status, c.a.metadata.generation,
                          std::chrono::floor<std::chrono::seconds>(clock_.WallNow()));
  auto patch = api::ActorStatusMergePatch(c.before, c.a);
  if (!patch) return OkStatus();
  (*patch)["metadata"]["resourceVersion"] = c.before.metadata.resource_version;
  const auto start = clock_.Now();
  auto r = client_.Patch(kActorType, c.a.metadata.namespace_, c.a.metadata.name,
                         PatchType::kMerge, *patch, "status");
  if (r.ok()) {
    // The end of the write, timed: a transition's steps are split at its status writes.
    spdlog::debug("status written actor={} status={} duration_ms={}", c.key, api::ToString(c.a.status.status),
                  std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - start).count());
  }
  if (!r.ok()) {
    // A conflict is routine (a stale cache, a concurrent spec change): decided again on a read.
    spdlog::log(r.status().code() == Code::kAborted ? spdlog::level::debug : spdlog::level::warn,
                "status write failed actor={} status={} error=\"{}\"", c.key,
                api::ToString(c.a.status.status), r.status().ToString());
    return r.status();
  }
  return Adopt(c, WithoutManagedFields(std::move(*r)));
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
  return Adopt(c, WithoutManagedFields(std::move(*r)));
}

api::Snapshot ActorReconciler::ToSnapshot(const SnapshotManifest& m, const std::string& location,
                                          const std::string& node) const {
  api::Snapshot s;
  s.id = m.id;
  s.trigger = m.trigger == "Suspend" ? api::SnapshotTrigger::kSuspend : api::SnapshotTrigger::kPause;
  s.scope = m.scope == "Data" ? api::SnapshotScope::kData : api::SnapshotScope::kFull;
  s.location = location;
  s.node_name = node;
  s.size_bytes = m.total_bytes;
  s.duration_seconds = m.duration_seconds;
  s.cuda_checkpointed = m.cuda_checkpointed;
  s.runsc_version = m.runtime_version;
  s.image_digest = m.image_digest;
  s.gpu = GpuTakenOn(m);
  if (auto t = ParseTime(m.taken_at); t.ok()) s.taken_at = *t;
  return s;
}

}  // namespace stasis
