#include "api/crd_schemas.h"

#include "api/cel_rules.h"
#include "api/conditions.h"
#include "api/names.h"
#include "api/validation.h"

namespace stasis::api {
namespace {

using namespace openapi;  // NOLINT: the transcriptions read like the YAML

Schema ConditionSchema() {
  Schema type = String(316);
  type.pattern = kConditionTypePattern;
  Schema reason = String(1024);
  reason.min_length = 1;
  reason.pattern = kConditionReasonPattern;
  return Object({{"type", type},
                 {"status", Enum({"True", "False", "Unknown"})},
                 {"observedGeneration", Integer("int64", 0, std::nullopt)},
                 {"lastTransitionTime", DateTime()},
                 {"reason", reason},
                 {"message", String(kMaxConditionMessageBytes)}},
                {"type", "status", "lastTransitionTime", "reason", "message"});
}

// A whole object of a kind: apiVersion, kind, metadata (not validated), spec, status, and the
// rules on the whole object.
Schema KindSchema(Schema spec, Schema status, std::vector<Rule> rules = {}) {
  return Object({{"apiVersion", Scalar(Type::kString)},
                 {"kind", Scalar(Type::kString)},
                 {"metadata", Object({})},
                 {"spec", std::move(spec)},
                 {"status", std::move(status)}},
                {"spec"}, std::move(rules));
}

// spec.source and spec.hooks: a clone, and the command that gives it its own identity.
Schema SourceSchema() {
  return Object({{"actorName", String(kMaxNodeNameLength, {cel::SourceActorName()})},
                 {"snapshotID", String(kMaxSnapshotIdLength, {cel::SnapshotId()})}},
                {"actorName"});
}

Schema HooksSchema() {
  Schema command = Array(String(kMaxArgLength), kMaxCommandItems, ListType::kAtomic);
  command.min_items = 1;
  Schema post_restore = Object(
      {{"command", command},
       {"timeoutSeconds", Integer("int32", kMinTimeoutSeconds, kMaxHookTimeoutSeconds)}},
      {"command"});
  return Object({{"postRestore", post_restore}});
}

// spec.readinessGate of an Actor and of a template.
Schema ReadinessGateSchema() {
  Schema command = Array(String(kMaxArgLength), kMaxCommandItems, ListType::kAtomic);
  command.min_items = 1;
  return Object(
      {{"command", command},
       {"timeoutSeconds", Integer("int32", kMinTimeoutSeconds, kMaxReadinessTimeoutSeconds)},
       {"periodSeconds", Integer("int32", kMinTimeoutSeconds, kMaxReadinessPeriodSeconds)}},
      {"command"});
}

using Properties = std::vector<std::pair<std::string, Schema>>;

// The fields an Actor's spec and a template's spec.actor share, in the CRD's order around
// nodeName and desiredState (which only an Actor has).
Properties ActorSpecImageFields(Schema runtime) {
  Schema pull_secret = Object(
      {{"name", String(kMaxNodeNameLength, {cel::PullSecretName()})}}, {"name"});
  Schema env_var = Object({{"name", String(kMaxEnvNameLength, {cel::EnvName()})},
                           {"value", String(kMaxEnvValueLength)}},
                          {"name"});
  return {{"runtime", std::move(runtime)},
          {"bundle", String(kMaxPathLength, cel::PathRules(kMessageBundleAbsolute, kMessageBundleDotDot))},
          {"image", String(kMaxImageLength, {cel::ImageReference()})},
          {"imagePullPolicy", Enum({"Always", "IfNotPresent", "Never"})},
          {"imagePullSecrets", Array(pull_secret, kMaxImagePullSecrets, ListType::kMap, "name")},
          {"command", Array(String(kMaxArgLength), kMaxCommandItems, ListType::kAtomic)},
          {"args", Array(String(kMaxArgLength), kMaxCommandItems, ListType::kAtomic)},
          {"env", Array(env_var, kMaxEnvVars, ListType::kMap, "name")},
          {"workingDir", String(kMaxPathLength, {cel::WorkingDirAbsolute()})}};
}

std::vector<openapi::Rule> CudaPathRules() {
  auto rules = cel::PathRules(kMessageCudaPathAbsolute, kMessageCudaPathDotDot);
  rules.push_back(cel::CudaPathOutsidePrivateDir());
  return rules;
}

Properties ActorSpecRunFields() {
  Schema gpu = Object(
      {{"count", Integer("int32", 0, kMaxGpuCount)},
       {"cudaCheckpointPath", String(kMaxPathLength, CudaPathRules())},
       {"fastSnapshot", Scalar(Type::kBoolean)}},
      {}, {cel::FastSnapshotNeedsGpu()});
  Schema snapshots = Object(
      {{"onPause", Enum({"Full", "Data"})},
       {"onCommit", Enum({"Full", "Data"})},
       {"dataDirs",
        Array(String(kMaxPathLength, cel::PathRules(kMessageDataDirAbsolute, kMessageDataDirDotDot)),
              kMaxDataDirs, ListType::kSet)}},
      {}, {cel::ScopeSubset(), cel::DataScopeNeedsDirs()});
  Schema timeouts =
      Object({{"checkpointSeconds", Integer("int32", kMinTimeoutSeconds, kMaxTimeoutSeconds)},
              {"restoreSeconds", Integer("int32", kMinTimeoutSeconds, kMaxTimeoutSeconds)}});
  return {{"checkpointPolicy", Enum({"Direct", "LeaveRunningThenStop"})},
          {"gpu", gpu},
          {"snapshots", snapshots},
          {"timeouts", timeouts}};
}

// The rules of an Actor's spec that a template's spec.actor has too.
std::vector<Rule> ActorSpecRules() {
  return {cel::ImageOrBundle(), cel::AtMostImageOrBundle(),
          cel::NeedsImage("imagePullPolicy", kMessagePullPolicyNeedsImage),
          cel::NeedsImage("imagePullSecrets", kMessagePullSecretsNeedsImage),
          cel::NeedsImage("command", kMessageCommandNeedsImage),
          cel::NeedsImage("args", kMessageArgsNeedsImage),
          cel::NeedsImage("env", kMessageEnvNeedsImage),
          cel::NeedsImage("workingDir", kMessageWorkingDirNeedsImage), cel::ImageNotMicrovm(),
          cel::ImageNoDataSnapshots(), cel::GvisorOnly("hooks", kMessageHooksNeedGvisor),
          cel::GvisorOnly("readinessGate", kMessageReadinessGateNeedsGvisor)};
}

void Append(Properties& to, Properties from) {
  for (auto& p : from) to.push_back(std::move(p));
}

Schema ActorSpecSchema() {
  Schema runtime = Enum({"gvisor", "microvm"});
  // A sandbox and its snapshots belong to one runtime: a runsc image cannot restore as a VM.
  runtime.transition_rules = {cel::Immutable(kMessageImmutableRuntime)};
  Properties props = ActorSpecImageFields(std::move(runtime));
  props.emplace_back("nodeName", String(kMaxNodeNameLength, {cel::NodeNameOrEmpty()}));
  props.emplace_back("desiredState", Enum({"Running", "Paused", "Suspended"}));
  Append(props, ActorSpecRunFields());
  props.emplace_back("source", SourceSchema());
  props.emplace_back("hooks", HooksSchema());
  props.emplace_back("templateRef",
                     Object({{"name", String(kMaxNodeNameLength, {cel::TemplateRefName()})}},
                            {"name"}));
  props.emplace_back("readinessGate", ReadinessGateSchema());
  std::vector<Rule> rules = ActorSpecRules();
  rules.push_back(cel::SourceNeedsGvisor());
  Schema spec = Object(std::move(props), {}, std::move(rules));
  // A clone's first start restored its source's snapshot; another source would make its own
  // later snapshots and status.clonedFrom describe an actor it never was. The controller sets
  // source once on an actor from a template; another template would be another workload.
  spec.transition_rules = {cel::SourceImmutable(),
                           cel::FieldImmutable("templateRef", kMessageImmutableTemplateRef)};
  return spec;
}

// A template's spec.actor: an Actor's spec without what is each actor's own (nodeName,
// desiredState) or the controller's (source) and without templateRef. Those four are in the
// schema only so that the server does not prune them silently: a rule refuses each.
Schema TemplateActorSchema() {
  Properties props = ActorSpecImageFields(Enum({"gvisor", "microvm"}));
  Append(props, ActorSpecRunFields());
  props.emplace_back("hooks", HooksSchema());
  props.emplace_back("readinessGate", ReadinessGateSchema());
  props.emplace_back("nodeName", String(kMaxNodeNameLength));
  props.emplace_back("desiredState", String(kMaxNodeNameLength));
  // x-kubernetes-preserve-unknown-fields in the CRD: any content, which this validator ignores.
  props.emplace_back("source", Object({}));
  props.emplace_back("templateRef", Object({}));
  std::vector<Rule> rules = ActorSpecRules();
  for (Rule rule : {cel::RuntimeGvisor(kMessageTemplateRuntime),
                    cel::Absent("nodeName", kMessageTemplateNodeName),
                    cel::Absent("desiredState", kMessageTemplateDesiredState),
                    cel::Absent("source", kMessageTemplateSource),
                    cel::Absent("templateRef", kMessageTemplateTemplateRef)}) {
    rules.push_back(std::move(rule));
  }
  return Object(std::move(props), {}, std::move(rules));
}

// Worker spec.gpu and latestSnapshot.gpu (api/gpu_identity.h).
Schema GpuIdentitySchema() {
  return Object({{"model", String(kMaxGpuModelLength)},
                 {"driverVersion", String(kMaxDriverVersionLength)},
                 {"cudaVersion", String(kMaxCudaVersionLength)}});
}

Schema ActorStatusSchema() {
  Schema duration = Scalar(Type::kNumber);
  duration.minimum = 0;
  Schema latest = Object({{"id", String(253)},
                          {"trigger", Enum({"Pause", "Suspend"})},
                          {"scope", Enum({"Full", "Data"})},
                          {"location", String(kMaxPathLength)},
                          {"nodeName", String(kMaxNodeNameLength)},
                          {"sizeBytes", Integer("int64", 0, std::nullopt)},
                          {"durationSeconds", duration},
                          {"cudaCheckpointed", Scalar(Type::kBoolean)},
                          {"runscVersion", String(256)},
                          {"imageDigest", String(kMaxImageDigestLength)},
                          {"gpu", GpuIdentitySchema()},
                          {"takenAt", DateTime()}});
  Schema cloned_from = Object({{"actorName", String(kMaxNodeNameLength)},
                               {"actorUID", String(kMaxUidLength)},
                               {"snapshotID", String(kMaxSnapshotIdLength)}});
  return Object({{"status", Enum({"STATUS_UNSPECIFIED", "STATUS_RESUMING", "STATUS_RUNNING",
                                  "STATUS_SUSPENDING", "STATUS_SUSPENDED", "STATUS_PAUSING",
                                  "STATUS_PAUSED", "STATUS_FAILED"})},
                 {"observedGeneration", Integer("int64", 0, std::nullopt)},
                 {"nodeName", String(kMaxNodeNameLength)},
                 {"workerName", String(kMaxNodeNameLength)},
                 {"sandboxID", String(512)},
                 {"imageDigest", String(kMaxImageDigestLength)},
                 {"transitionStartTime", DateTime()},
                 {"latestSnapshot", latest},
                 {"clonedFrom", cloned_from},
                 {"conditions", Array(ConditionSchema(), kMaxConditions, ListType::kMap, "type")}});
}

Schema ActorTemplateSpecSchema() {
  return Object({{"actor", TemplateActorSchema()},
                 {"readinessGate", ReadinessGateSchema()},
                 {"warm", Integer("int32", 0, kMaxWarmPool)}},
                {"actor"});
}

Schema ActorTemplateStatusSchema() {
  Schema golden = Object({{"actorName", String(kMaxNodeNameLength)},
                          {"snapshotID", String(kMaxSnapshotIdLength)},
                          {"generation", Integer("int64", 0, std::nullopt)},
                          {"imageDigest", String(kMaxImageDigestLength)},
                          {"sizeBytes", Integer("int64", 0, std::nullopt)},
                          {"cudaCheckpointed", Scalar(Type::kBoolean)},
                          {"takenAt", DateTime()}});
  return Object({{"observedGeneration", Integer("int64", 0, std::nullopt)},
                 {"golden", golden},
                 {"warmReady", Integer("int32", 0, kMaxWarmPool)},
                 {"conditions", Array(ConditionSchema(), kMaxConditions, ListType::kMap, "type")}});
}

Schema WorkerSpecSchema() {
  Schema node_name = String(kMaxNodeNameLength, {cel::NodeName()});
  node_name.transition_rules = {cel::Immutable(kMessageImmutableNodeName)};
  Schema device = String(kMaxDeviceLength);
  device.min_length = 1;
  return Object({{"nodeName", node_name},
                 {"devices", Array(device, kMaxDevices, ListType::kSet)},
                 {"gpu", GpuIdentitySchema()}},
                {"nodeName"});
}

Schema WorkerStatusSchema() {
  Schema ref_namespace = String(63);
  ref_namespace.min_length = 1;
  Schema ref_name = String(kMaxNodeNameLength);
  ref_name.min_length = 1;
  return Object(
      {{"phase", Enum({"Free", "Held"})},
       {"actorRef",
        Object({{"namespace", ref_namespace}, {"name", ref_name}}, {"namespace", "name"})}},
      {}, {cel::WorkerHeldRef()});
}

}  // namespace

const Schema& ActorSchema() {
  static const Schema* const kSchema = new Schema(
      KindSchema(ActorSpecSchema(), ActorStatusSchema(), {cel::SourceIsNotSelf()}));
  return *kSchema;
}

const Schema& ActorTemplateSchema() {
  static const Schema* const kSchema =
      new Schema(KindSchema(ActorTemplateSpecSchema(), ActorTemplateStatusSchema()));
  return *kSchema;
}

const Schema& WorkerSchema() {
  static const Schema* const kSchema =
      new Schema(KindSchema(WorkerSpecSchema(), WorkerStatusSchema()));
  return *kSchema;
}

}  // namespace stasis::api
