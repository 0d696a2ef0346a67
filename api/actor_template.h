// The ActorTemplate custom resource (stasis.dev/v1alpha1, namespaced, short name "atpl"): an
// actor spec and a readiness gate, from which the cluster controller takes a golden snapshot
// (docs/templates.md). Actors created with spec.templateRef start from that snapshot; a warm
// pool keeps some of them restored ahead of demand. Mirrors manifests/crd/ field for field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/actor.h"
#include "api/conditions.h"
#include "api/object_meta.h"
#include "base/time.h"

namespace stasis::api {

inline constexpr char kActorTemplateKind[] = "ActorTemplate";
inline constexpr char kActorTemplateResource[] = "actortemplates";  // namespaced; short name "atpl"

// Labels the controller puts on the actors it makes for a template: the golden actor
// (kGoldenOfLabel=<template>) and warm-pool members (kWarmPoolOfLabel=<template>).
inline constexpr char kGoldenOfLabel[] = "stasis.dev/golden-of";
inline constexpr char kWarmPoolOfLabel[] = "stasis.dev/warm-pool-of";

// status.conditions of a template.
inline constexpr char kConditionGoldenReady[] = "GoldenReady";
// GoldenReady reasons: a golden snapshot is being taken (TakingGolden), is committed and
// recorded (GoldenSnapshotTaken), the readiness gate did not pass within its timeout
// (ReadinessGateFailed), the golden actor failed (GoldenActorFailed), the recorded snapshot is
// gone from the store and is being taken again (GoldenSnapshotMissing).
inline constexpr char kReasonTakingGolden[] = "TakingGolden";
inline constexpr char kReasonGoldenSnapshotTaken[] = "GoldenSnapshotTaken";
inline constexpr char kReasonReadinessGateFailed[] = "ReadinessGateFailed";
inline constexpr char kReasonGoldenActorFailed[] = "GoldenActorFailed";
inline constexpr char kReasonGoldenSnapshotMissing[] = "GoldenSnapshotMissing";

struct ActorTemplateSpec {
  // The actors' spec. Its nodeName, desiredState and source are not used (each actor has its
  // own; the golden actor runs wherever the binder puts it); the CRD refuses them.
  ActorSpec actor;
  // When the golden snapshot is taken: once this passes in the golden actor (none: as soon as
  // it is RUNNING).
  std::optional<ReadinessGate> readiness_gate;
  int32_t warm = 0;  // actors kept restored and paused for templateRef actors to claim
  bool operator==(const ActorTemplateSpec&) const = default;
};

// status.golden: the committed Full snapshot actors of this template start from.
struct GoldenSnapshot {
  std::string actor_name;   // the golden actor, whose committed snapshot it is
  std::string snapshot_id;
  int64_t generation = 0;   // the template generation it was taken for
  std::string image_digest;
  int64_t size_bytes = 0;
  bool cuda_checkpointed = false;
  std::optional<Time> taken_at;
  bool operator==(const GoldenSnapshot&) const = default;
};

struct ActorTemplateStatus {
  int64_t observed_generation = 0;
  std::optional<GoldenSnapshot> golden;
  int32_t warm_ready = 0;  // pool members restored and paused, unclaimed
  std::vector<Condition> conditions;
  bool operator==(const ActorTemplateStatus&) const = default;
};

struct ActorTemplate {
  ObjectMeta metadata;
  ActorTemplateSpec spec;
  ActorTemplateStatus status;
  nlohmann::json raw;  // as in Actor: keeps unknown fields on write
  bool operator==(const ActorTemplate& o) const {
    return metadata == o.metadata && spec == o.spec && status == o.status;
  }
};

}  // namespace stasis::api
