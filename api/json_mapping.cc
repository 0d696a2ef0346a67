#include "api/json_mapping.h"

#include <string>

#include "api/json_reader.h"
#include "api/names.h"
#include "api/template_json.h"

namespace stasis::api {

using json_internal::ConditionsToJson;
using json_internal::MergeIntoRaw;
using json_internal::MetaAndSpec;
using json_internal::MetaToJson;
using json_internal::PatchOf;
using json_internal::ReadConditions;
using json_internal::Reader;
using json_internal::ReadMeta;
using nlohmann::json;

namespace {

void ReadGpu(Reader& r, const json& obj, const std::string& path, GpuIdentity& g) {
  const json* gpu = r.Object(obj, "gpu", path);
  if (gpu == nullptr) return;
  r.String(*gpu, "model", path + ".model", g.model);
  r.String(*gpu, "driverVersion", path + ".driverVersion", g.driver_version);
  r.String(*gpu, "cudaVersion", path + ".cudaVersion", g.cuda_version);
}

// Written only when something is known, so objects without a GPU stay as they were.
void WriteGpu(const GpuIdentity& g, json& into) {
  if (g == GpuIdentity{}) return;
  json gpu = json::object();
  if (!g.model.empty()) gpu["model"] = g.model;
  if (!g.driver_version.empty()) gpu["driverVersion"] = g.driver_version;
  if (!g.cuda_version.empty()) gpu["cudaVersion"] = g.cuda_version;
  into["gpu"] = std::move(gpu);
}

void ReadActorStatus(Reader& r, const json& obj, ActorStatus& s) {
  const json* st = r.Object(obj, "status", "status");
  if (st == nullptr) return;
  r.Enum(*st, "status", "status.status", &ParseActorState, s.status);
  r.Integer(*st, "observedGeneration", "status.observedGeneration", s.observed_generation);
  r.String(*st, "nodeName", "status.nodeName", s.node_name);
  r.String(*st, "workerName", "status.workerName", s.worker_name);
  r.String(*st, "sandboxID", "status.sandboxID", s.sandbox_id);
  r.String(*st, "imageDigest", "status.imageDigest", s.image_digest);
  r.OptionalTime(*st, "transitionStartTime", "status.transitionStartTime", s.transition_start_time);
  if (const json* ls = r.Object(*st, "latestSnapshot", "status.latestSnapshot")) {
    const std::string p = "status.latestSnapshot.";
    Snapshot snap;
    r.String(*ls, "id", p + "id", snap.id);
    r.Enum(*ls, "trigger", p + "trigger", &ParseSnapshotTrigger, snap.trigger);
    r.Enum(*ls, "scope", p + "scope", &ParseSnapshotScope, snap.scope);
    r.String(*ls, "location", p + "location", snap.location);
    r.String(*ls, "nodeName", p + "nodeName", snap.node_name);
    r.Integer(*ls, "sizeBytes", p + "sizeBytes", snap.size_bytes);
    r.Number(*ls, "durationSeconds", p + "durationSeconds", snap.duration_seconds);
    r.Bool(*ls, "cudaCheckpointed", p + "cudaCheckpointed", snap.cuda_checkpointed);
    r.String(*ls, "runscVersion", p + "runscVersion", snap.runsc_version);
    r.String(*ls, "imageDigest", p + "imageDigest", snap.image_digest);
    ReadGpu(r, *ls, p + "gpu", snap.gpu);
    r.OptionalTime(*ls, "takenAt", p + "takenAt", snap.taken_at);
    s.latest_snapshot = std::move(snap);
  }
  if (const json* cf = r.Object(*st, "clonedFrom", "status.clonedFrom")) {
    const std::string p = "status.clonedFrom.";
    ClonedFrom from;
    r.String(*cf, "actorName", p + "actorName", from.actor_name);
    r.String(*cf, "actorUID", p + "actorUID", from.actor_uid);
    r.String(*cf, "snapshotID", p + "snapshotID", from.snapshot_id);
    s.cloned_from = std::move(from);
  }
  ReadConditions(r, *st, s.conditions);
}

json ActorStatusToJson(const ActorStatus& s) {
  json j = json::object();
  if (s.status != ActorState::kUnspecified) j["status"] = ToString(s.status);
  if (s.observed_generation != 0) j["observedGeneration"] = s.observed_generation;
  if (!s.node_name.empty()) j["nodeName"] = s.node_name;
  if (!s.worker_name.empty()) j["workerName"] = s.worker_name;
  if (!s.sandbox_id.empty()) j["sandboxID"] = s.sandbox_id;
  if (!s.image_digest.empty()) j["imageDigest"] = s.image_digest;
  if (s.transition_start_time) j["transitionStartTime"] = FormatTime(*s.transition_start_time);
  if (s.latest_snapshot) {
    const Snapshot& snap = *s.latest_snapshot;
    json ls = {{"id", snap.id},
               {"trigger", ToString(snap.trigger)},
               {"scope", ToString(snap.scope)},
               {"location", snap.location},
               {"sizeBytes", snap.size_bytes},
               {"durationSeconds", snap.duration_seconds},
               {"cudaCheckpointed", snap.cuda_checkpointed}};
    if (!snap.node_name.empty()) ls["nodeName"] = snap.node_name;
    if (!snap.runsc_version.empty()) ls["runscVersion"] = snap.runsc_version;
    if (!snap.image_digest.empty()) ls["imageDigest"] = snap.image_digest;
    WriteGpu(snap.gpu, ls);
    if (snap.taken_at) ls["takenAt"] = FormatTime(*snap.taken_at);
    j["latestSnapshot"] = std::move(ls);
  }
  if (s.cloned_from) {
    json cf = json::object();
    if (!s.cloned_from->actor_name.empty()) cf["actorName"] = s.cloned_from->actor_name;
    if (!s.cloned_from->actor_uid.empty()) cf["actorUID"] = s.cloned_from->actor_uid;
    if (!s.cloned_from->snapshot_id.empty()) cf["snapshotID"] = s.cloned_from->snapshot_id;
    j["clonedFrom"] = std::move(cf);
  }
  if (!s.conditions.empty()) j["conditions"] = ConditionsToJson(s.conditions);
  return j;
}

}  // namespace

Result<json> ParseJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(Code::kInvalidArgument, "not valid JSON");
  return j;
}

Result<Actor> ActorFromJson(const json& object) {
  if (!object.is_object()) return Status(Code::kInvalidArgument, "an Actor must be an object");
  Reader r;
  Actor a;
  ReadMeta(r, object, a.metadata);
  if (const json* spec = r.Object(object, "spec", "spec")) {
    json_internal::ReadActorSpec(r, *spec, "spec.", a.spec);
  }
  ReadActorStatus(r, object, a.status);
  if (!r.status().ok()) return r.status();
  a.raw = object;
  return a;
}

json ActorTypedJson(const Actor& a) {
  return {{"apiVersion", kApiVersion},
          {"kind", kActorKind},
          {"metadata", MetaToJson(a.metadata)},
          {"spec", ActorSpecJson(a.spec)},
          {"status", ActorStatusToJson(a.status)}};
}

json ActorToJson(const Actor& a) {
  return MergeIntoRaw<Actor>(a, ActorTypedJson(a), &ActorFromJson, &ActorTypedJson);
}

std::optional<json> ActorStatusMergePatch(const Actor& before, const Actor& after) {
  return PatchOf({{"status", ActorStatusToJson(before.status)}},
                 {{"status", ActorStatusToJson(after.status)}}, before.metadata.resource_version);
}

std::optional<json> ActorMergePatch(const Actor& before, const Actor& after) {
  return PatchOf(MetaAndSpec(ActorTypedJson(before)), MetaAndSpec(ActorTypedJson(after)),
                 before.metadata.resource_version);
}

namespace {

json WorkerStatusToJson(const WorkerStatus& s) {
  json j = {{"phase", ToString(s.phase)}};
  if (s.actor_ref) {
    j["actorRef"] = {{"namespace", s.actor_ref->namespace_}, {"name", s.actor_ref->name}};
  }
  return j;
}

}  // namespace

Result<Worker> WorkerFromJson(const json& object) {
  if (!object.is_object()) return Status(Code::kInvalidArgument, "a Worker must be an object");
  Reader r;
  Worker w;
  ReadMeta(r, object, w.metadata);
  if (const json* spec = r.Object(object, "spec", "spec")) {
    r.String(*spec, "nodeName", "spec.nodeName", w.spec.node_name);
    r.StringList(*spec, "devices", "spec.devices", w.spec.devices);
    ReadGpu(r, *spec, "spec.gpu", w.spec.gpu);
  }
  if (const json* st = r.Object(object, "status", "status")) {
    r.Enum(*st, "phase", "status.phase", &ParseWorkerPhase, w.status.phase);
    if (const json* ref = r.Object(*st, "actorRef", "status.actorRef")) {
      ActorRef a;
      r.String(*ref, "namespace", "status.actorRef.namespace", a.namespace_);
      r.String(*ref, "name", "status.actorRef.name", a.name);
      w.status.actor_ref = std::move(a);
    }
  }
  if (!r.status().ok()) return r.status();
  w.raw = object;
  return w;
}

json WorkerTypedJson(const Worker& w) {
  json spec = {{"nodeName", w.spec.node_name}};
  if (!w.spec.devices.empty()) spec["devices"] = w.spec.devices;
  WriteGpu(w.spec.gpu, spec);
  return {{"apiVersion", kApiVersion},
          {"kind", kWorkerKind},
          {"metadata", MetaToJson(w.metadata)},
          {"spec", std::move(spec)},
          {"status", WorkerStatusToJson(w.status)}};
}

json WorkerToJson(const Worker& w) {
  return MergeIntoRaw<Worker>(w, WorkerTypedJson(w), &WorkerFromJson, &WorkerTypedJson);
}

std::optional<json> WorkerStatusMergePatch(const Worker& before, const Worker& after) {
  return PatchOf({{"status", WorkerStatusToJson(before.status)}},
                 {{"status", WorkerStatusToJson(after.status)}}, before.metadata.resource_version);
}

std::optional<json> WorkerMergePatch(const Worker& before, const Worker& after) {
  return PatchOf(MetaAndSpec(WorkerTypedJson(before)), MetaAndSpec(WorkerTypedJson(after)),
                 before.metadata.resource_version);
}

}  // namespace stasis::api
