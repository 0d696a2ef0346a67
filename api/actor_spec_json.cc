// An Actor's spec to and from JSON: one reader and one writer for both places a spec lives, an
// Actor's `spec` and an ActorTemplate's `spec.actor`, so the two cannot drift apart.
#include <string>
#include <utility>

#include "api/json_reader.h"
#include "api/names.h"
#include "api/template_json.h"

namespace stasis::api {
namespace json_internal {
namespace {

// spec.source, spec.hooks and spec.templateRef: optional objects, absent (nullopt) unless
// written.
void ReadOptionalFields(Reader& r, const json& spec, const std::string& p, ActorSpec& s) {
  if (const json* src = r.Object(spec, "source", p + "source")) {
    ActorSourceRef ref;
    r.String(*src, "actorName", p + "source.actorName", ref.actor_name);
    r.String(*src, "snapshotID", p + "source.snapshotID", ref.snapshot_id);
    s.source = std::move(ref);
  }
  if (const json* ref = r.Object(spec, "templateRef", p + "templateRef")) {
    LocalObjectReference t;
    r.String(*ref, "name", p + "templateRef.name", t.name);
    s.template_ref = std::move(t);
  }
  ReadReadinessGate(r, spec, p, s.readiness_gate);
  const json* hooks = r.Object(spec, "hooks", p + "hooks");
  if (hooks == nullptr) return;
  if (const json* hook = r.Object(*hooks, "postRestore", p + "hooks.postRestore")) {
    const std::string hp = p + "hooks.postRestore.";
    ExecHook exec;
    r.StringList(*hook, "command", hp + "command", exec.command);
    r.Integer(*hook, "timeoutSeconds", hp + "timeoutSeconds", exec.timeout_seconds);
    s.hooks.post_restore = std::move(exec);
  }
}

void WriteOptionalFields(const ActorSpec& s, json& j) {
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
  if (s.readiness_gate) j["readinessGate"] = ReadinessGateJson(*s.readiness_gate);
}

// The fields only an actor from an image has (spec.image and what goes with it).
void ReadImageFields(Reader& r, const json& spec, const std::string& p, ActorSpec& s) {
  r.String(spec, "image", p + "image", s.image);
  if (auto it = spec.find("imagePullPolicy"); it != spec.end() && !it->is_null()) {
    PullPolicy policy = PullPolicy::kIfNotPresent;
    r.Enum(spec, "imagePullPolicy", p + "imagePullPolicy", &ParsePullPolicy, policy);
    s.image_pull_policy = policy;
  }
  ReadObjectList(r, spec, "imagePullSecrets", p + "imagePullSecrets", s.image_pull_secrets,
                 [&r](const json& item, const std::string& path, LocalObjectReference& ref) {
                   r.String(item, "name", path + ".name", ref.name);
                 });
  r.StringList(spec, "command", p + "command", s.command);
  r.StringList(spec, "args", p + "args", s.args);
  ReadObjectList(r, spec, "env", p + "env", s.env,
                 [&r](const json& item, const std::string& path, EnvVar& e) {
                   r.String(item, "name", path + ".name", e.name);
                   r.String(item, "value", path + ".value", e.value);
                 });
  r.String(spec, "workingDir", p + "workingDir", s.working_dir);
}

void WriteImageFields(const ActorSpec& s, json& j) {
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
}

}  // namespace

void ReadReadinessGate(Reader& r, const json& spec, const std::string& prefix,
                       std::optional<ReadinessGate>& out) {
  const json* g = r.Object(spec, "readinessGate", prefix + "readinessGate");
  if (g == nullptr) return;
  const std::string p = prefix + "readinessGate.";
  ReadinessGate gate;
  r.StringList(*g, "command", p + "command", gate.command);
  r.Integer(*g, "timeoutSeconds", p + "timeoutSeconds", gate.timeout_seconds);
  r.Integer(*g, "periodSeconds", p + "periodSeconds", gate.period_seconds);
  out = std::move(gate);
}

json ReadinessGateJson(const ReadinessGate& gate) {
  return {{"command", gate.command},
          {"timeoutSeconds", gate.timeout_seconds},
          {"periodSeconds", gate.period_seconds}};
}

void ReadActorSpec(Reader& r, const json& spec, const std::string& p, ActorSpec& s) {
  r.Enum(spec, "runtime", p + "runtime", &ParseRuntime, s.runtime);
  r.String(spec, "bundle", p + "bundle", s.bundle);
  ReadImageFields(r, spec, p, s);
  r.String(spec, "nodeName", p + "nodeName", s.node_name);
  if (const json* gpu = r.Object(spec, "gpu", p + "gpu")) {
    r.Integer(*gpu, "count", p + "gpu.count", s.gpu.count);
    r.String(*gpu, "cudaCheckpointPath", p + "gpu.cudaCheckpointPath", s.gpu.cuda_checkpoint_path);
    r.Bool(*gpu, "fastSnapshot", p + "gpu.fastSnapshot", s.gpu.fast_snapshot);
  }
  r.Enum(spec, "desiredState", p + "desiredState", &ParseDesiredState, s.desired_state);
  r.Enum(spec, "checkpointPolicy", p + "checkpointPolicy", &ParseCheckpointPolicy,
         s.checkpoint_policy);
  if (const json* snap = r.Object(spec, "snapshots", p + "snapshots")) {
    r.Enum(*snap, "onPause", p + "snapshots.onPause", &ParseSnapshotScope, s.snapshots.on_pause);
    r.Enum(*snap, "onCommit", p + "snapshots.onCommit", &ParseSnapshotScope,
           s.snapshots.on_commit);
    r.StringList(*snap, "dataDirs", p + "snapshots.dataDirs", s.snapshots.data_dirs);
  }
  if (const json* t = r.Object(spec, "timeouts", p + "timeouts")) {
    r.Integer(*t, "checkpointSeconds", p + "timeouts.checkpointSeconds",
              s.timeouts.checkpoint_seconds);
    r.Integer(*t, "restoreSeconds", p + "timeouts.restoreSeconds", s.timeouts.restore_seconds);
  }
  ReadOptionalFields(r, spec, p, s);
}

}  // namespace json_internal

nlohmann::json ActorSpecJson(const ActorSpec& s) {
  using json_internal::json;
  json j = json::object();
  j["runtime"] = ToString(s.runtime);
  if (!s.bundle.empty()) j["bundle"] = s.bundle;
  json_internal::WriteImageFields(s, j);
  if (!s.node_name.empty()) j["nodeName"] = s.node_name;
  j["gpu"] = {{"count", s.gpu.count},
              {"cudaCheckpointPath", s.gpu.cuda_checkpoint_path},
              {"fastSnapshot", s.gpu.fast_snapshot}};
  j["desiredState"] = ToString(s.desired_state);
  j["checkpointPolicy"] = ToString(s.checkpoint_policy);
  j["snapshots"] = {{"onPause", ToString(s.snapshots.on_pause)},
                    {"onCommit", ToString(s.snapshots.on_commit)}};
  if (!s.snapshots.data_dirs.empty()) j["snapshots"]["dataDirs"] = s.snapshots.data_dirs;
  j["timeouts"] = {{"checkpointSeconds", s.timeouts.checkpoint_seconds},
                   {"restoreSeconds", s.timeouts.restore_seconds}};
  json_internal::WriteOptionalFields(s, j);
  return j;
}

}  // namespace stasis::api
