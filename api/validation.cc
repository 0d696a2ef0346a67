// The validation entry points: defaults applied to a copy, as the server applies them, then
// the kind's CRD schema (crd_schemas.cc) checked by the schema validator
// (schema_validator.cc).
#include "api/validation.h"

#include "api/crd_schemas.h"
#include "api/defaults.h"
#include "api/json_mapping.h"
#include "api/schema_validator.h"
#include "api/template_json.h"

namespace stasis::api {

using nlohmann::json;

FieldErrors ValidateActor(const json& actor) {
  json copy = actor;
  ApplyActorDefaults(copy);
  return ValidateAgainstSchema(ActorSchema(), copy, nullptr);
}

FieldErrors ValidateActor(const Actor& actor) { return ValidateActor(ActorTypedJson(actor)); }

FieldErrors ValidateActorUpdate(const json& old_actor, const json& new_actor) {
  json old_copy = old_actor;
  json new_copy = new_actor;
  ApplyActorDefaults(old_copy);
  ApplyActorDefaults(new_copy);
  return ValidateAgainstSchema(ActorSchema(), new_copy, &old_copy);
}

FieldErrors ValidateActorStatus(const json& actor) {
  json copy = actor;
  ApplyActorDefaults(copy);
  auto status = copy.find("status");
  if (status == copy.end()) return {};
  return ValidateAgainstSchema(openapi::PropertyOf(ActorSchema(), "status"), *status, nullptr, "status");
}

FieldErrors ValidateActorStatus(const Actor& actor) {
  return ValidateActorStatus(ActorTypedJson(actor));
}

FieldErrors ValidateActorTemplate(const json& actor_template) {
  json copy = actor_template;
  ApplyActorTemplateDefaults(copy);
  return ValidateAgainstSchema(ActorTemplateSchema(), copy, nullptr);
}

FieldErrors ValidateActorTemplate(const ActorTemplate& actor_template) {
  return ValidateActorTemplate(ActorTemplateTypedJson(actor_template));
}

FieldErrors ValidateActorTemplateStatus(const json& actor_template) {
  json copy = actor_template;
  ApplyActorTemplateDefaults(copy);
  auto status = copy.find("status");
  if (status == copy.end()) return {};
  return ValidateAgainstSchema(openapi::PropertyOf(ActorTemplateSchema(), "status"), *status,
                               nullptr, "status");
}

FieldErrors ValidateWorker(const json& worker) {
  json copy = worker;
  ApplyWorkerDefaults(copy);
  return ValidateAgainstSchema(WorkerSchema(), copy, nullptr);
}

FieldErrors ValidateWorker(const Worker& worker) { return ValidateWorker(WorkerTypedJson(worker)); }

FieldErrors ValidateWorkerStatus(const json& worker) {
  json copy = worker;
  ApplyWorkerDefaults(copy);
  auto status = copy.find("status");
  if (status == copy.end()) return {};
  return ValidateAgainstSchema(openapi::PropertyOf(WorkerSchema(), "status"), *status, nullptr, "status");
}

FieldErrors ValidateWorkerUpdate(const json& old_worker, const json& new_worker) {
  json old_copy = old_worker;
  json new_copy = new_worker;
  ApplyWorkerDefaults(old_copy);
  ApplyWorkerDefaults(new_copy);
  return ValidateAgainstSchema(WorkerSchema(), new_copy, &old_copy);
}

}  // namespace stasis::api
