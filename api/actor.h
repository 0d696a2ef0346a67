// The Actor custom resource (stasis.dev/v1alpha1) as C++ types: one sandboxed workload that
// is paused, suspended and resumed through spec.desiredState. manifests/crd/ is the source of
// truth; these types mirror it field for field, with the CRD's defaults as member
// initialisers, so a value read from JSON with a field absent equals what the server stores.
// Invariants: enums hold only the values the CRD allows; `raw` is the object as last read
// (or empty for an object built in code) and is only used to keep unknown fields on write.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/conditions.h"
#include "api/gpu_identity.h"
#include "api/names.h"
#include "api/object_meta.h"
#include "base/time.h"

namespace stasis::api {

enum class Runtime { kGvisor, kMicrovm };                        // "gvisor" | "microvm"
enum class DesiredState { kRunning, kPaused, kSuspended };       // "Running" | …
enum class CheckpointPolicy { kDirect, kLeaveRunningThenStop };  // "Direct" | …
enum class SnapshotScope { kFull, kData };                       // "Full" | "Data"
enum class SnapshotTrigger { kPause, kSuspend };                 // "Pause" | "Suspend"
enum class PullPolicy { kAlways, kIfNotPresent, kNever };        // "Always" | …

// status.status: the platform's enum, kept verbatim ("STATUS_RUNNING", …).
enum class ActorState {
  kUnspecified,
  kResuming,
  kRunning,
  kSuspending,
  kSuspended,
  kPausing,
  kPaused,
  kFailed,
};

const char* ToString(Runtime v);
const char* ToString(DesiredState v);
const char* ToString(CheckpointPolicy v);
const char* ToString(SnapshotScope v);
const char* ToString(SnapshotTrigger v);
const char* ToString(ActorState v);
const char* ToString(PullPolicy v);
std::optional<Runtime> ParseRuntime(std::string_view s);
std::optional<DesiredState> ParseDesiredState(std::string_view s);
std::optional<CheckpointPolicy> ParseCheckpointPolicy(std::string_view s);
std::optional<SnapshotScope> ParseSnapshotScope(std::string_view s);
std::optional<SnapshotTrigger> ParseSnapshotTrigger(std::string_view s);
std::optional<ActorState> ParseActorState(std::string_view s);
std::optional<PullPolicy> ParsePullPolicy(std::string_view s);

// RESUMING, SUSPENDING, PAUSING: the statuses that carry transitionStartTime and a deadline.
bool IsTransitioning(ActorState s);
// Neither RUNNING nor transitioning: never started, PAUSED, SUSPENDED or FAILED.
bool IsResting(ActorState s);

struct GpuSpec {
  int32_t count = 0;  // 0 = a CPU actor; at most kMaxGpuCount
  std::string cuda_checkpoint_path = kDefaultCudaCheckpointPath;  // inside the container
  // The workload runs with kFastSnapshotLibrary preloaded, so the helper stages device memory
  // through it; only with count > 0. Takes effect when the process starts (a boot, not a
  // restore of a Full snapshot, whose process keeps the environment it was started with).
  bool fast_snapshot = false;
  bool operator==(const GpuSpec&) const = default;
};

struct SnapshotSpec {
  SnapshotScope on_pause = SnapshotScope::kFull;
  SnapshotScope on_commit = SnapshotScope::kFull;  // a subset of on_pause
  std::vector<std::string> data_dirs;              // what a Data snapshot keeps
  bool operator==(const SnapshotSpec&) const = default;
};

struct Timeouts {
  int32_t checkpoint_seconds = kDefaultTimeoutSeconds;
  int32_t restore_seconds = kDefaultTimeoutSeconds;
  bool operator==(const Timeouts&) const = default;
};

// spec.imagePullSecrets[]: a Secret in the actor's namespace, as a Pod's LocalObjectReference.
struct LocalObjectReference {
  std::string name;
  bool operator==(const LocalObjectReference&) const = default;
};

// spec.env[]: one environment variable of the image's process.
struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

// spec.source: the actor starts from another actor's committed Full snapshot (a clone) instead
// of booting. The source is an Actor in the same namespace; it keeps running.
struct ActorSourceRef {
  std::string actor_name;
  // A snapshot id of the source; empty = the source's status.latestSnapshot when the clone
  // starts (it must then be committed: taken by a suspend, or a pause since committed).
  std::string snapshot_id;
  bool operator==(const ActorSourceRef&) const = default;
};

// A command run inside the sandbox (runsc exec) with a deadline.
struct ExecHook {
  std::vector<std::string> command;
  int32_t timeout_seconds = kDefaultHookTimeoutSeconds;
  bool operator==(const ExecHook&) const = default;
};

// A gate in the sandbox: a command that exits 0 once the workload is ready (a file that
// appears: ["test", "-e", "/ready"]), run every `period_seconds` from the start until it passes
// or `timeout_seconds` have passed (condition ReadinessGate).
struct ReadinessGate {
  std::vector<std::string> command;
  int32_t timeout_seconds = kDefaultReadinessTimeoutSeconds;
  int32_t period_seconds = 1;
  bool operator==(const ReadinessGate&) const = default;
};

struct Hooks {
  // Run after every restore of a Full snapshot (a resume, or a clone's first start), before
  // the actor is RUNNING: where a clone takes its own identity. Its environment carries the
  // actor's identity (docs/api.md, "Clones"). A failure is a failed resume.
  std::optional<ExecHook> post_restore;
  bool operator==(const Hooks&) const = default;
};

struct ActorSpec {
  Runtime runtime = Runtime::kGvisor;
  // Exactly one of bundle and image is set (non-empty).
  std::string bundle;  // the OCI bundle directory on the node
  std::string image;   // an image reference, by tag or digest (an actor from an OCI image)
  // The fields below are only for an actor from an image. Absent pull policy: see
  // EffectivePullPolicy().
  std::optional<PullPolicy> image_pull_policy;
  std::vector<LocalObjectReference> image_pull_secrets;
  std::vector<std::string> command;  // replaces the image's Entrypoint when non-empty
  std::vector<std::string> args;     // replaces the image's Cmd when non-empty
  std::vector<EnvVar> env;           // added to (and overriding) the image's Env
  std::string working_dir;           // replaces the image's WorkingDir when non-empty
  std::string node_name;  // optional pin
  GpuSpec gpu;
  DesiredState desired_state = DesiredState::kRunning;
  CheckpointPolicy checkpoint_policy = CheckpointPolicy::kDirect;
  SnapshotSpec snapshots;
  Timeouts timeouts;
  std::optional<ActorSourceRef> source;  // immutable, but set once by the controller from templateRef; gvisor only
  Hooks hooks;
  // An actor from an ActorTemplate (same namespace; immutable). At creation only templateRef,
  // nodeName and desiredState need be set: the cluster controller copies the template's actor
  // spec in and sets source to the template's golden snapshot (docs/templates.md).
  std::optional<LocalObjectReference> template_ref;
  std::optional<ReadinessGate> readiness_gate;
  bool operator==(const ActorSpec&) const = default;
};

// status.latestSnapshot: a complete snapshot (never a partial one).
struct Snapshot {
  std::string id;
  SnapshotTrigger trigger = SnapshotTrigger::kPause;
  SnapshotScope scope = SnapshotScope::kFull;
  std::string location;   // a directory on node_name, or a snapshot-store URI
  std::string node_name;  // the node whose disk holds it; empty once committed to the store
  int64_t size_bytes = 0;
  double duration_seconds = 0;
  bool cuda_checkpointed = false;
  std::string runsc_version;
  // An actor from an image: the manifest digest ("sha256:…") of the image the snapshot was
  // taken on; a restore needs that same root filesystem. Empty for a bundle actor.
  std::string image_digest;
  // The GPU a CUDA checkpoint was taken on (api/gpu_identity.h): the binder places its restore
  // only on a worker of the same identity. Empty without a CUDA context or identity.
  GpuIdentity gpu;
  std::optional<Time> taken_at;
  bool operator==(const Snapshot&) const = default;
};

// status.clonedFrom: the source snapshot a clone last started from (kept once the clone has
// snapshots of its own). Informational: a restore derives everything again.
struct ClonedFrom {
  std::string actor_name;
  std::string actor_uid;  // the source's metadata.uid, which its snapshot's manifest records
  std::string snapshot_id;
  bool operator==(const ClonedFrom&) const = default;
};

struct ActorStatus {
  ActorState status = ActorState::kUnspecified;
  int64_t observed_generation = 0;
  std::string node_name;    // set on binding, with the label kNodeLabel
  std::string worker_name;  // the Worker held
  std::string sandbox_id;
  // An actor from an image: the manifest digest its sandbox was last booted from.
  std::string image_digest;
  std::optional<Time> transition_start_time;  // set while IsTransitioning(status)
  std::optional<Snapshot> latest_snapshot;
  std::optional<ClonedFrom> cloned_from;
  std::vector<Condition> conditions;
  bool operator==(const ActorStatus&) const = default;
};

struct Actor {
  ObjectMeta metadata;
  ActorSpec spec;
  ActorStatus status;
  // The whole object as read from the API server. ActorToJson() writes the typed fields over
  // it, so keys this version does not know survive a read-modify-write. Empty for new objects.
  nlohmann::json raw;

  // The typed parts only; `raw` is a carrier, not part of the value.
  bool operator==(const Actor& o) const {
    return metadata == o.metadata && spec == o.spec && status == o.status;
  }
};

// The pull policy the node agent applies to spec.image: spec.imagePullPolicy when set, else
// Pods' rule: Always for the tag "latest" or a reference with neither tag nor digest,
// IfNotPresent otherwise (a digest, or any other tag). kNever for an actor without an image
// (nothing is pulled).
PullPolicy EffectivePullPolicy(const ActorSpec& spec);

// An actor from a template whose spec the controller has not filled in yet (no image, no
// bundle): nothing runs it and the binder leaves it alone until then.
bool AwaitsTemplate(const ActorSpec& spec);

// The tag of an image reference as written ("" when none; a digest is not a tag): the part
// after the last ':' of the last '/'-separated component, before any '@'.
std::string_view ImageTag(std::string_view image);
// Whether the reference carries a digest ("…@sha256:…").
bool ImageHasDigest(std::string_view image);

// Before a status write: the Paused and Suspended conditions follow status.status (the table
// in docs/api.md), and every condition carries `generation`, the generation this write
// observed, so that no condition reads as stale beside the others.
void SetStateConditions(ActorStatus& status, int64_t generation, Time now);

}  // namespace stasis::api
