#include "api/template_json.h"

#include <string>
#include <utility>

#include "api/json_reader.h"
#include "api/names.h"

namespace stasis::api {

using json_internal::ConditionsToJson;
using json_internal::MergeIntoRaw;
using json_internal::MetaToJson;
using json_internal::PatchOf;
using json_internal::Reader;
using nlohmann::json;

namespace {

// The fields of an Actor spec that are each actor's own (or the controller's): a template's
// spec.actor never carries them (the CRD refuses them), so they are not written there.
constexpr const char* kActorOwnFields[] = {"nodeName", "desiredState", "source", "templateRef"};

void ReadTemplateSpec(Reader& r, const json& obj, ActorTemplateSpec& s) {
  const json* spec = r.Object(obj, "spec", "spec");
  if (spec == nullptr) return;
  if (const json* actor = r.Object(*spec, "actor", "spec.actor")) {
    json_internal::ReadActorSpec(r, *actor, "spec.actor.", s.actor);
  }
  json_internal::ReadReadinessGate(r, *spec, "spec.", s.readiness_gate);
  r.Integer(*spec, "warm", "spec.warm", s.warm);
}

json TemplateSpecToJson(const ActorTemplateSpec& s) {
  json actor = ActorSpecJson(s.actor);
  for (const char* key : kActorOwnFields) actor.erase(key);
  json j = {{"actor", std::move(actor)}, {"warm", s.warm}};
  if (s.readiness_gate) j["readinessGate"] = json_internal::ReadinessGateJson(*s.readiness_gate);
  return j;
}

void ReadTemplateStatus(Reader& r, const json& obj, ActorTemplateStatus& s) {
  const json* st = r.Object(obj, "status", "status");
  if (st == nullptr) return;
  r.Integer(*st, "observedGeneration", "status.observedGeneration", s.observed_generation);
  if (const json* g = r.Object(*st, "golden", "status.golden")) {
    const std::string p = "status.golden.";
    GoldenSnapshot golden;
    r.String(*g, "actorName", p + "actorName", golden.actor_name);
    r.String(*g, "snapshotID", p + "snapshotID", golden.snapshot_id);
    r.Integer(*g, "generation", p + "generation", golden.generation);
    r.String(*g, "imageDigest", p + "imageDigest", golden.image_digest);
    r.Integer(*g, "sizeBytes", p + "sizeBytes", golden.size_bytes);
    r.Bool(*g, "cudaCheckpointed", p + "cudaCheckpointed", golden.cuda_checkpointed);
    r.OptionalTime(*g, "takenAt", p + "takenAt", golden.taken_at);
    s.golden = std::move(golden);
  }
  r.Integer(*st, "warmReady", "status.warmReady", s.warm_ready);
  json_internal::ReadConditions(r, *st, s.conditions);
}

json TemplateStatusToJson(const ActorTemplateStatus& s) {
  json j = json::object();
  if (s.observed_generation != 0) j["observedGeneration"] = s.observed_generation;
  if (s.golden) {
    const GoldenSnapshot& g = *s.golden;
    json golden = {{"actorName", g.actor_name},
                   {"snapshotID", g.snapshot_id},
                   {"generation", g.generation},
                   {"sizeBytes", g.size_bytes},
                   {"cudaCheckpointed", g.cuda_checkpointed}};
    if (!g.image_digest.empty()) golden["imageDigest"] = g.image_digest;
    if (g.taken_at) golden["takenAt"] = FormatTime(*g.taken_at);
    j["golden"] = std::move(golden);
  }
  if (s.warm_ready != 0) j["warmReady"] = s.warm_ready;
  if (!s.conditions.empty()) j["conditions"] = ConditionsToJson(s.conditions);
  return j;
}

}  // namespace

Result<ActorTemplate> ActorTemplateFromJson(const json& object) {
  if (!object.is_object()) {
    return Status(Code::kInvalidArgument, "an ActorTemplate must be an object");
  }
  Reader r;
  ActorTemplate t;
  json_internal::ReadMeta(r, object, t.metadata);
  ReadTemplateSpec(r, object, t.spec);
  ReadTemplateStatus(r, object, t.status);
  if (!r.status().ok()) return r.status();
  t.raw = object;
  return t;
}

json ActorTemplateTypedJson(const ActorTemplate& t) {
  return {{"apiVersion", kApiVersion},
          {"kind", kActorTemplateKind},
          {"metadata", MetaToJson(t.metadata)},
          {"spec", TemplateSpecToJson(t.spec)},
          {"status", TemplateStatusToJson(t.status)}};
}

json ActorTemplateToJson(const ActorTemplate& t) {
  return MergeIntoRaw<ActorTemplate>(t, ActorTemplateTypedJson(t), &ActorTemplateFromJson,
                                     &ActorTemplateTypedJson);
}

std::optional<json> ActorTemplateStatusMergePatch(const ActorTemplate& before,
                                                  const ActorTemplate& after) {
  return PatchOf({{"status", TemplateStatusToJson(before.status)}},
                 {{"status", TemplateStatusToJson(after.status)}},
                 before.metadata.resource_version);
}

}  // namespace stasis::api
