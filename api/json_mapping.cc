#include "api/json_mapping.h"

#include <cmath>
#include <limits>
#include <string>

#include "api/json_reader.h"
#include "api/merge_patch.h"
#include "api/names.h"

namespace stasis::api {

void ReadMeta(Reader& r, const json& obj, ObjectMeta& m) {
  const json* meta = r.Object(obj, "metadata", "metadata");
  if (meta == nullptr) return;
  r.String(*meta, "name", "metadata.name", m.name);
  r.String(*meta, "namespace", "metadata.namespace", m.namespace_);
  r.String(*meta, "uid", "metadata.uid", m.uid);
  r.String(*meta, "resourceVersion", "metadata.resourceVersion", m.resource_version);
  r.Integer(*meta, "generation", "metadata.generation", m.generation);
  r.StringMap(*meta, "labels", "metadata.labels", m.labels);
  r.StringMap(*meta, "annotations", "metadata.annotations", m.annotations);
  r.StringList(*meta, "finalizers", "metadata.finalizers", m.finalizers);
  r.OptionalTime(*meta, "creationTimestamp", "metadata.creationTimestamp", m.creation_timestamp);
  r.OptionalTime(*meta, "deletionTimestamp", "metadata.deletionTimestamp", m.deletion_timestamp);
}

json MetaToJson(const ObjectMeta& m) {
  json j = json::object();
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.namespace_.empty()) j["namespace"] = m.namespace_;
  if (!m.uid.empty()) j["uid"] = m.uid;
  if (!m.resource_version.empty()) j["resourceVersion"] = m.resource_version;
  if (m.generation != 0) j["generation"] = m.generation;
  if (!m.labels.empty()) j["labels"] = m.labels;
  if (!m.annotations.empty()) j["annotations"] = m.annotations;
  if (!m.finalizers.empty()) j["finalizers"] = m.finalizers;
  if (m.creation_timestamp) j["creationTimestamp"] = FormatTime(*m.creation_timestamp);
  if (m.deletion_timestamp) j["deletionTimestamp"] = FormatTime(*m.deletion_timestamp);
  return j;
}

void ReadConditions(Reader& r, const json& status, std::vector<Condition>& out) {
  const json* list = r.Array(status, "conditions", "status.conditions");
  if (list == nullptr) return;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = "status.conditions[" + std::to_string(i) + "]";
    const json& item = (*list)[i];
    if (!item.is_object()) {
      r.Fail(path, "an object");
      return;
    }
    Condition c;
    r.String(item, "type", path + ".type", c.type);
    r.Enum(item, "status", path + ".status", &ParseConditionStatus, c.status);
    r.Integer(item, "observedGeneration", path + ".observedGeneration", c.observed_generation);
    r.RequiredTime(item, "lastTransitionTime", path + ".lastTransitionTime",
                   c.last_transition_time);
    r.String(item, "reason", path + ".reason", c.reason);
    r.String(item, "message", path + ".message", c.message);
    out.push_back(std::move(c));
  }
}

json ConditionsToJson(const std::vector<Condition>& conditions) {
  json list = json::array();
  for (const Condition& c : conditions) {
    json j = {{"type", c.type},
              {"status", ToString(c.status)},
              {"lastTransitionTime", FormatTime(c.last_transition_time)},
              {"reason", c.reason},
              {"message", c.message}};
    if (c.observed_generation != 0) j["observedGeneration"] = c.observed_generation;
    list.push_back(std::move(j));
  }
  return list;
}

namespace {

// spec.source and spec.hooks: optional objects, absent (nullopt) unless written.
void ReadCloneFields(Reader& r, const json& spec, ActorSpec& s) {
  if (const json* src = r.Object(spec, "source", "spec.source")) {
    ActorSourceRef ref;
    r.String(*src, "actorName", "spec.source.actorName", ref.actor_name);
    r.String(*src, "snapshotID", "spec.source.snapshotID", ref.snapshot_id);
    s.source = std::move(ref);
  }
  const json* hooks = r.Object(spec, "hooks", "spec.hooks");
  if (hooks == nullptr) return;
  if (const json* hook = r.Object(*hooks, "postRestore", "spec.hooks.postRestore")) {
    const std::string p = "spec.hooks.postRestore.";
    ExecHook exec;
    r.StringList(*hook, "command", p + "command", exec.command);
    r.Integer(*hook, "timeoutSeconds", p + "timeoutSeconds", exec.timeout_seconds);
    s.hooks.post_restore = std::move(exec);
  }
}

// spec.templateRef and spec.readinessGate: optional objects, absent unless written.
void ReadTemplateFields(Reader& r, const json& spec, ActorSpec& s) {
  if (const json* ref = r.Object(spec, "templateRef", "spec.templateRef")) {
    LocalObjectReference t;
    r.String(*ref, "name", "spec.templateRef.name", t.name);
    s.template_ref = std::move(t);
  }
  if (const json* gate = r.Object(spec, "readinessGate", "spec.readinessGate")) {
    s.readiness_gate = ReadReadinessGate(r, *gate, "spec.readinessGate");
  }
}

void WriteCloneFields(const ActorSpec& s, json& j) {
  if (s.source) {
    json src = {{"actorName", s.source->actor_name}};
    if (!s.source->snapshot_id.empty()) src["snapshotID"] = s.source->snapshot_id;
    j["source"] = std::move(src);
  }
  if (s.hooks.post_restore) {
    const ExecHook& hook = *s.hooks.post_restore;
    j["hooks"]["postRestore"] = {{"command", hook.command},
                                 {"timeoutSeconds", hook.timeout_seconds}};
  }
  if (s.template_ref) j["templateRef"] = {{"name", s.template_ref->name}};
  if (s.readiness_gate) j["readinessGate"] = ReadinessGateToJson(*s.readiness_gate);
}

}  // namespace

void ReadActorSpec(Reader& r, const json& obj, ActorSpec& s) {
  const json* spec = r.Object(obj, "spec", "spec");
  if (spec == nullptr) return;
  r.Enum(*spec, "runtime", "spec.runtime", &ParseRuntime, s.runtime);
  r.String(*spec, "bundle", "spec.bundle", s.bundle);
  r.String(*spec, "image", "spec.image", s.image);
  if (auto p = spec->find("imagePullPolicy"); p != spec->end() && !p->is_null()) {
    PullPolicy policy = PullPolicy::kIfNotPresent;
    r.Enum(*spec, "imagePullPolicy", "spec.imagePullPolicy", &ParsePullPolicy, policy);
    s.image_pull_policy = policy;
  }
  ReadObjectList(r, *spec, "imagePullSecrets", "spec.imagePullSecrets", s.image_pull_secrets,
                 [&r](const json& item, const std::string& path, LocalObjectReference& ref) {
                   r.String(item, "name", path + ".name", ref.name);
                 });
  r.StringList(*spec, "command", "spec.command", s.command);
  r.StringList(*spec, "args", "spec.args", s.args);
  ReadObjectList(r, *spec, "env", "spec.env", s.env,
                 [&r](const json& item, const std::string& path, EnvVar& e) {
                   r.String(item, "name", path + ".name", e.name);
                   r.String(item, "value", path + ".value", e.value);
                 });
  r.String(*spec, "workingDir", "spec.workingDir", s.working_dir);
  r.String(*spec, "nodeName", "spec.nodeName", s.node_name);
  if (const json* gpu = r.Object(*spec, "gpu", "spec.gpu")) {
    r.Integer(*gpu, "count", "spec.gpu.count", s.gpu.count);
    r.String(*gpu, "cudaCheckpointPath", "spec.gpu.cudaCheckpointPath", s.gpu.cuda_checkpoint_path);
  }
  r.Enum(*spec, "desiredState", "spec.desiredState", &ParseDesiredState, s.desired_state);
  r.Enum(*spec, "checkpointPolicy", "spec.checkpointPolicy", &ParseCheckpointPolicy,
         s.checkpoint_policy);
  if (const json* snap = r.Object(*spec, "snapshots", "spec.snapshots")) {
    r.Enum(*snap, "onPause", "spec.snapshots.onPause", &ParseSnapshotScope, s.snapshots.on_pause);
    r.Enum(*snap, "onCommit", "spec.snapshots.onCommit", &ParseSnapshotScope,
           s.snapshots.on_commit);
    r.StringList(*snap, "dataDirs", "spec.snapshots.dataDirs", s.snapshots.data_dirs);
  }
  if (const json* t = r.Object(*spec, "timeouts", "spec.timeouts")) {
    r.Integer(*t, "checkpointSeconds", "spec.timeouts.checkpointSeconds",
              s.timeouts.checkpoint_seconds);
    r.Integer(*t, "restoreSeconds", "spec.timeouts.restoreSeconds", s.timeouts.restore_seconds);
  }
  ReadCloneFields(r, *spec, s);
  ReadTemplateFields(r, *spec, s);
}

ReadinessGate ReadReadinessGate(Reader& r, const json& gate, const std::string& path) {
  ReadinessGate g;
  r.StringList(gate, "command", path + ".command", g.command);
  r.Integer(gate, "timeoutSeconds", path + ".timeoutSeconds", g.timeout_seconds);
  r.Integer(gate, "periodSeconds", path + ".periodSeconds", g.period_seconds);
  return g;
}

json ReadinessGateToJson(const ReadinessGate& g) {
  return {{"command", g.command}, {"timeoutSeconds", g.timeout_seconds}, {"periodSeconds", g.period_seconds}};
}

json ActorSpecToJson(const ActorSpec& s) {
  json j = json::object();
  j["runtime"] = ToString(s.runtime);
  if (!s.bundle.empty()) j["bundle"] = s.bundle;
  if (!s.image.empty()) j["image"] = s.image;
  if (s.image_pull_policy) j["imagePullPolicy"] = ToString(*s.image_pull_policy);
  if (!s.image_pull_secrets.empty()) {
    json secrets = json::array();
    for (const LocalObjectReference& ref : s.image_pull_secrets) {
      secrets.push_back({{"name", ref.name}});
    }
    j["imagePullSecrets"] = std::move(secrets);
  }
  if (!s.command.empty()) j["command"] = s.command;
  if (!s.args.empty()) j["args"] = s.args;
  if (!s.env.empty()) {
    json env = json::array();
    for (const EnvVar& e : s.env) {
      json var = {{"name", e.name}};
      if (!e.value.empty()) var["value"] = e.value;
      env.push_back(std::move(var));
    }
    j["env"] = std::move(env);
  }
  if (!s.working_dir.empty()) j["workingDir"] = s.working_dir;
  if (!s.node_name.empty()) j["nodeName"] = s.node_name;
  j["gpu"] = {{"count", s.gpu.count}, {"cudaCheckpointPath", s.gpu.cuda_checkpoint_path}};
  j["desiredState"] = ToString(s.desired_state);
  j["checkpointPolicy"] = ToString(s.checkpoint_policy);
  j["snapshots"] = {{"onPause", ToString(s.snapshots.on_pause)},
                    {"onCommit", ToString(s.snapshots.on_commit)}};
  if (!s.snapshots.data_dirs.empty()) j["snapshots"]["dataDirs"] = s.snapshots.data_dirs;
  j["timeouts"] = {{"checkpointSeconds", s.timeouts.checkpoint_seconds},
                   {"restoreSeconds", s.timeouts.restore_seconds}};
  WriteCloneFields(s, j);
  return j;
}

namespace {

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


json MetaAndSpec(const json& typed) {
  return {{"metadata", typed["metadata"]}, {"spec", typed["spec"]}};
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
  ReadActorSpec(r, object, a.spec);
  ReadActorStatus(r, object, a.status);
  if (!r.status().ok()) return r.status();
  a.raw = object;
  return a;
}

json ActorTypedJson(const Actor& a) {
  return {{"apiVersion", kApiVersion},
          {"kind", kActorKind},
          {"metadata", MetaToJson(a.metadata)},
          {"spec", ActorSpecToJson(a.spec)},
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
