// The CRDs' schema defaults applied to JSON, the way the API server applies them before it
// validates: null values are dropped first (the server prunes nulls of non-nullable fields),
// then every `default:` whose parent object exists is filled in; spec.gpu, spec.snapshots and
// spec.timeouts default to objects (the CRD spells out {onPause: Full, onCommit: Full} for
// snapshots; the result is the same) so their fields are always filled when spec exists.
// The typed structs (actor.h, worker.h) carry the same defaults as member initialisers.
// Invariant: applying defaults twice changes nothing.
#pragma once

#include <nlohmann/json.hpp>

namespace stasis::api {

void ApplyActorDefaults(nlohmann::json& actor);
// A template's spec.actor takes an Actor spec's defaults except desiredState (each actor has
// its own); spec.warm defaults to 0; a readinessGate's bounds are filled in where one is written.
void ApplyActorTemplateDefaults(nlohmann::json& actor_template);
void ApplyWorkerDefaults(nlohmann::json& worker);

}  // namespace stasis::api
