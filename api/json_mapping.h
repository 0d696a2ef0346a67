// Actor and Worker to and from their JSON form on the wire (nlohmann::json).
//
// Reading applies the CRD's defaults (an absent or null field takes its default, exactly as
// the API server would have stored it) and fails, as a value, only when a field has the wrong
// JSON type or an enum value this version does not know.
//
// Unknown fields (written by a newer version of stasis) are preserved, in two ways:
//  - the object keeps the JSON it was read from (`raw`); ActorToJson() applies to that JSON
//    the merge patch between what was read and the typed object now, so a PUT of the result
//    changes only what the code changed and carries every other key through;
//  - ActorStatusMergePatch()/ActorMergePatch() build JSON merge patches (RFC 7386) that name
//    only the fields that changed, for PATCH …/status and PATCH of metadata and spec.
// Invariants: ActorFromJson(ActorToJson(a)) == a for every valid `a`; a patch is nullopt when
// nothing changed; no function here does I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "api/actor.h"
#include "api/worker.h"
#include "base/status.h"

namespace stasis::api {

// Parses text as JSON; kInvalidArgument with the parser's message when it is not.
Result<nlohmann::json> ParseJson(std::string_view text);

Result<Actor> ActorFromJson(const nlohmann::json& object);
Result<Worker> WorkerFromJson(const nlohmann::json& object);

// The full object: `raw` with the typed fields merged in, plus apiVersion and kind.
nlohmann::json ActorToJson(const Actor& actor);
nlohmann::json WorkerToJson(const Worker& worker);

// The typed fields only, defaults written out; what ActorToJson() returns for a new object.
nlohmann::json ActorTypedJson(const Actor& actor);
nlohmann::json WorkerTypedJson(const Worker& worker);

// {"metadata": {"resourceVersion": <before's>}, "status": {<changed fields>}}: for
// PATCH …/status with Content-Type application/merge-patch+json. The resourceVersion makes
// the patch fail with 409 when the object changed since `before` was read (clear
// before.metadata.resource_version for an unconditional patch). Lists (conditions) are sent
// whole, as merge patches require. nullopt when the status did not change.
std::optional<nlohmann::json> ActorStatusMergePatch(const Actor& before, const Actor& after);
std::optional<nlohmann::json> WorkerStatusMergePatch(const Worker& before, const Worker& after);

// The same for the main endpoint: metadata (labels, annotations, finalizers) and spec.
std::optional<nlohmann::json> ActorMergePatch(const Actor& before, const Actor& after);
std::optional<nlohmann::json> WorkerMergePatch(const Worker& before, const Worker& after);

}  // namespace stasis::api
