#include "api/template_json.h"

#include "api/json_reader.h"
#include "api/names.h"

namespace stasis::api {
namespace {

void ReadTemplateSpec(Reader& r, const json& obj, ActorTemplateSpec& s) {
  const json* spec = r.Object(obj, "spec", "spec");
  if (spec == nullptr) return;
  if (const json* actor = r.Object(*spec, "actor", "spec.actor")) ReadActorSpec(r, {{"spec", *actor}}, s.actor);
  if (const json* gate = r.Object(*spec, "readinessGate", "spec.readinessGate")) {
    s.readiness_gate = ReadReadinessGate(r, *gate, "spec.readinessGate");
  }
  r.Integer(*spec, "warm", "spec.warm", s.warm);
}

json TemplateSpecToJson(const ActorTemplateSpec& s) {
  json j = {{"actor", ActorSpecJson(s.actor)}, {"warm", s.warm}};
  if (s.readiness_gate) j["readinessGate"] = ReadinessGateToJson(*s.readiness_gate);
  return j;
}

void ReadGolden(Reader& r, const json& status, std::optional<GoldenSnapshot>& out) {
  const json* g = r.Object(status, "golden", "status.golden");
  if (g == nullptr) return;
  const std::string p = "status.golden.";
  GoldenSnapshot golden;
  r.String(*g, "actorName", p + "actorName", golden.actor_name);
  r.String(*g, "snapshotID", p + "snapshotID", golden.snapshot_id);
  r.Integer(*g, "generation", p + "generation", golden.generation);
  r.String(*g, "imageDigest", p + "imageDigest", golden.image_digest);
  r.Integer(*g, "sizeBytes", p + "sizeBytes", golden.size_bytes);
  r.Bool(*g, "cudaCheckpointed", p + "cudaCheckpointed", golden.cuda_checkpointed);
  r.OptionalTime(*g, "takenAt", p + "takenAt", golden.taken_at);
  out = std::move(golden);
}

void ReadTemplateStatus(Reader& r, const json& obj, ActorTemplateStatus& s) {
  const json* st = r.Object(obj, "status", "status");
  if (st == nullptr) return;
  r.Integer(*st, "observedGeneration", "status.observedGeneration", s.observed_generation);
  ReadGolden(r, *st, s.golden);
  r.Integer(*st, "warmReady", "status.warmReady", s.warm_ready);
  ReadConditions(r, *st, s.conditions);
}

json TemplateStatusToJson(const ActorTemplateStatus& s) {
  json j = json::object();
  if (s.observed_generation != 0) j["observedGeneration"] = s.observed_generation;
  if (s.golden) {
    const GoldenSnapshot& g = *s.golden;
    json golden = {{"actorName", g.actor_name},     {"snapshotID", g.snapshot_id}, {"generation", g.generation},
                   {"sizeBytes", g.size_bytes},     {"cudaCheckpointed", g.cuda_checkpointed}};
    if (!g.image_digest.empty()) golden["imageDigest"] = g.image_digest;
    if (g.taken_at) golden["takenAt"] = FormatTime(*g.taken_at);
    j["golden"] = std::move(golden);
  }
  if (s.warm_ready != 0) j["warmReady"] = s.warm_ready;
  if (!s.conditions.empty()) j["conditions"] = ConditionsToJson(s.conditions);
  return j;
}

}  // namespace

json ActorSpecJson(const ActorSpec& spec) { return ActorSpecToJson(spec); }

Result<ActorTemplate> ActorTemplateFromJson(const json& object) {
  if (!object.is_object()) return Status(Code::kInvalidArgument, "an ActorTemplate must be an object");
  Reader r;
  ActorTemplate t;
  ReadMeta(r, object, t.metadata);
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
  return MergeIntoRaw<ActorTemplate>(t, ActorTemplateTypedJson(t), &ActorTemplateFromJson, &ActorTemplateTypedJson);
}

std::optional<json> ActorTemplateStatusMergePatch(const ActorTemplate& before, const ActorTemplate& after) {
  return PatchOf({{"status", TemplateStatusToJson(before.status)}}, {{"status", TemplateStatusToJson(after.status)}},
                 before.metadata.resource_version);
}

}  // namespace stasis::api
