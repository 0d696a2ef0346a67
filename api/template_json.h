// ActorTemplate to and from JSON, with the same rules as json_mapping.h (defaults applied on
// read, unknown fields kept through `raw`, merge patches naming only what changed).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "api/actor_template.h"
#include "base/status.h"

namespace stasis::api {

Result<ActorTemplate> ActorTemplateFromJson(const nlohmann::json& object);
nlohmann::json ActorTemplateToJson(const ActorTemplate& t);
nlohmann::json ActorTemplateTypedJson(const ActorTemplate& t);
// PATCH …/status (resourceVersion-checked as ActorStatusMergePatch); nullopt when unchanged.
std::optional<nlohmann::json> ActorTemplateStatusMergePatch(const ActorTemplate& before, const ActorTemplate& after);

// An actor spec as the JSON object `spec` of an Actor (every typed field, defaults written out):
// what the controller copies from a template into an actor created from it.
nlohmann::json ActorSpecJson(const ActorSpec& spec);

}  // namespace stasis::api
