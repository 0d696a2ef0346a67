#include "api/json_mapping.h"

#include <cmath>
#include <limits>
#include <string>

#include "api/merge_patch.h"
#include "api/names.h"

namespace stasis::api {
namespace {

using nlohmann::json;

// Reads typed values out of JSON objects. A missing or null key leaves the output at its
// default; a value of the wrong type records the first error, with the field's path.
class Reader {
 public:
  const Status& status() const { return status_; }

  // The child object at obj[key], or nullptr when absent/null (or not an object: an error).
  const json* Object(const json& obj, const char* key, const std::string& path) {
    const json* v = Find(obj, key);
    if (v == nullptr) return nullptr;
    if (!v->is_object()) return Fail(path, "an object");
    return v;
  }

  void String(const json& obj, const char* key, const std::string& path, std::string& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_string()) return (void)Fail(path, "a string");
    out = v->get<std::string>();
  }

  template <typename Int>
  void Integer(const json& obj, const char* key, const std::string& path, Int& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    long double d;
    if (v->is_number_integer() && v->is_number_unsigned()) {
      d = static_cast<long double>(v->get<uint64_t>());
    } else if (v->is_number_integer()) {
      d = static_cast<long double>(v->get<int64_t>());
    } else if (v->is_number_float() && std::trunc(v->get<double>()) == v->get<double>()) {
      d = v->get<double>();  // 600.0 is an integer in JSON's eyes
    } else {
      return (void)Fail(path, "an integer");
    }
    if (d < static_cast<long double>(std::numeric_limits<Int>::min()) ||
        d > static_cast<long double>(std::numeric_limits<Int>::max())) {
      return (void)Fail(path, "an integer in range");
    }
    out = static_cast<Int>(d);
  }

  void Number(const json& obj, const char* key, const std::string& path, double& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_number()) return (void)Fail(path, "a number");
    out = v->get<double>();
  }

  void Bool(const json& obj, const char* key, const std::string& path, bool& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return (void)Fail(path, "a boolean");
    out = v->get<bool>();
  }

  void OptionalTime(const json& obj, const char* key, const std::string& path,
                    std::optional<Time>& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_string()) return (void)Fail(path, "an RFC 3339 date-time");
    Result<Time> t = ParseTime(v->get_ref<const std::string&>());
    if (!t.ok()) return (void)Fail(path, "an RFC 3339 date-time");
    out = *t;
  }

  void RequiredTime(const json& obj, const char* key, const std::string& path, Time& out) {
    std::optional<Time> t;
    OptionalTime(obj, key, path, t);
    if (t) out = *t;
  }

  template <typename E>
  void Enum(const json& obj, const char* key, const std::string& path,
            std::optional<E> (*parse)(std::string_view), E& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_string()) return (void)Fail(path, "a string");
    std::optional<E> e = parse(v->get_ref<const std::string&>());
    if (!e) {
      if (status_.ok()) {
        status_ = Status(Code::kInvalidArgument,
                         path + ": unsupported value \"" + v->get<std::string>() + "\"");
      }
      return;
    }
    out = *e;
  }

  void StringList(const json& obj, const char* key, const std::string& path,
                  std::vector<std::string>& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_array()) return (void)Fail(path, "a list of strings");
    out.clear();
    for (const json& item : *v) {
      if (!item.is_string()) return (void)Fail(path, "a list of strings");
      out.push_back(item.get<std::string>());
    }
  }

  void StringMap(const json& obj, const char* key, const std::string& path,
                 std::map<std::string, std::string>& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_object()) return (void)Fail(path, "a map of strings");
    out.clear();
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it.value().is_string()) return (void)Fail(path, "a map of strings");
      out[it.key()] = it.value().get<std::string>();
    }
  }

  const json* Array(const json& obj, const char* key, const std::string& path) {
    const json* v = Find(obj, key);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) return Fail(path, "a list");
    return v;
  }

  const json* Fail(const std::string& path, const char* what) {
    if (status_.ok()) status_ = Status(Code::kInvalidArgument, path + ": must be " + what);
    return nullptr;
  }

 private:
  static const json* Find(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status status_;
};

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

// A list of objects at obj[key]: `read` is called with each item and its path.
template <typename T, typename F>
void ReadObjectList(Reader& r, const json& obj, const char* key, const std::string& path,
                    std::vector<T>& out, F read) {
  const json* list = r.Array(obj, key, path);
  if (list == nullptr) return;
  out.clear();
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const json& item = (*list)[i];
    if (!item.is_object()) return (void)r.Fail(item_path, "an object");
    T t;
    read(item, item_path, t);
    out.push_back(std::move(t));
  }
}

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
}

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

// `raw` with the changes between what it says and `typed` applied; apiVersion/kind set.
template <typename T>
json MergeIntoRaw(const T& object, const json& typed, Result<T> (*from_json)(const json&),
                  json (*to_typed)(const T&)) {
  if (!object.raw.is_object() || object.raw.empty()) return typed;
  json out = object.raw;
  Result<T> base = from_json(object.raw);
  if (base.ok()) {
    out.merge_patch(CreateMergePatch(to_typed(*base), typed));
  } else {
    out.merge_patch(typed);  // raw unreadable: typed fields win, other keys stay
  }
  out["apiVersion"] = typed["apiVersion"];
  out["kind"] = typed["kind"];
  return out;
}

std::optional<json> PatchOf(const json& before, const json& after,
                            const std::string& resource_version) {
  json diff = CreateMergePatch(before, after);
  if (diff.empty()) return std::nullopt;
  if (!resource_version.empty()) diff["metadata"]["resourceVersion"] = resource_version;
  return diff;
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
