// Status conditions (metav1.Condition) and the helpers that keep their semantics, the way
// k8s.io/apimachinery meta.SetStatusCondition does: a condition's lastTransitionTime changes
// only when its status changes; reason, message and observedGeneration are always taken from
// the new value. Time is injected (`now`); nothing here reads a clock.
// Invariant: at most one condition per type (the CRD lists them as a map keyed by type).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/time.h"

namespace stasis::api {

// Condition types stasis sets on Actors. Names are states, not transitions.
inline constexpr char kConditionReady[] = "Ready";              // the summary
inline constexpr char kConditionProgressing[] = "Progressing";  // an *ING status is under way
inline constexpr char kConditionCheckpointFailed[] = "CheckpointFailed";
inline constexpr char kConditionCudaCheckpointReady[] = "CudaCheckpointReady";  // GPU preflight
inline constexpr char kConditionStuck[] = "Stuck";  // a deadline passed or the node was lost
inline constexpr char kConditionCommitFailed[] = "CommitFailed";  // PAUSED, the store refused it
// Where an actor rests, for `kubectl wait --for=condition=…`: Paused is True when the actor is
// not running and its state is saved (PAUSED, or SUSPENDED: a suspended actor satisfies a
// desired state of Paused), Suspended when its snapshot is committed to the store.
inline constexpr char kConditionPaused[] = "Paused";
inline constexpr char kConditionSuspended[] = "Suspended";
// spec.readinessGate: True once its command passed in this run of the sandbox (reset at each
// start); False with ReadinessGatePending until then, ReadinessGateTimedOut after its timeout.
inline constexpr char kConditionReadinessGate[] = "ReadinessGate";
inline constexpr char kReasonReadinessGatePassed[] = "ReadinessGatePassed";
inline constexpr char kReasonReadinessGatePending[] = "ReadinessGatePending";
inline constexpr char kReasonReadinessGateTimedOut[] = "ReadinessGateTimedOut";
// A restore's last part runs after `runsc restore` has returned: a CUDA snapshot's device memory
// is copied back and its processes unlocked inside the sandbox. Restored is False with
// Restoring (and Ready False with Restoring) from the RUNNING write until that part has
// finished, True with RestoreComplete after; a restore without that part writes it True at once.
// A booted sandbox has no Restored condition.
inline constexpr char kConditionRestored[] = "Restored";
inline constexpr char kReasonRestoring[] = "Restoring";
inline constexpr char kReasonRestoreComplete[] = "RestoreComplete";
// spec.templateRef: the controller has not filled the spec from the template yet (it waits for
// the template's golden snapshot).
inline constexpr char kReasonTemplatePending[] = "TemplatePending";

// Condition reasons that say where an actor is or what happened to it. Failure reasons
// derived from a failure class ("nvproxy_live_clients" → "NvproxyLiveClients") are built by the
// node agent (ConditionReason); those its metrics pre-register are listed at the end, so that
// every metric label value can be checked against this list; docs/api.md lists them all.
inline constexpr char kReasonRunning[] = "Running";
inline constexpr char kReasonPausing[] = "Pausing";
inline constexpr char kReasonPaused[] = "Paused";
inline constexpr char kReasonSuspending[] = "Suspending";
inline constexpr char kReasonSuspended[] = "Suspended";
inline constexpr char kReasonResuming[] = "Resuming";
inline constexpr char kReasonResumed[] = "Resumed";
inline constexpr char kReasonCheckpointed[] = "Checkpointed";
inline constexpr char kReasonClearedOnResume[] = "ClearedOnResume";  // CheckpointFailed=False
inline constexpr char kReasonFailed[] = "Failed";
inline constexpr char kReasonNeverStarted[] = "NeverStarted";
inline constexpr char kReasonInvalidSpec[] = "InvalidSpec";
inline constexpr char kReasonRuntimeUnavailable[] = "RuntimeUnavailable";
inline constexpr char kReasonMicrovmGpuUnsupported[] = "MicrovmGpuUnsupported";
// spec.bundle, or a path its config.json names, is outside this node's --bundle-root rules.
inline constexpr char kReasonBundleNotAllowed[] = "BundleNotAllowed";
inline constexpr char kReasonSnapshotOnOtherNode[] = "SnapshotOnOtherNode";
inline constexpr char kReasonNoFreeWorker[] = "NoFreeWorker";
// Set by the cluster controller's binder: no live node has a worker that could ever run the
// actor (no node live, or none with enough GPUs); and, once it binds, that it did.
inline constexpr char kReasonUnschedulable[] = "Unschedulable";
inline constexpr char kReasonBound[] = "Bound";
inline constexpr char kReasonStoreUnavailable[] = "StoreUnavailable";
// CommitFailed reasons for an object store that answers but refuses the commit as configured:
// waiting will not fix these, a person must (the credentials, the bucket).
inline constexpr char kReasonStoreAuthFailed[] = "StoreAuthFailed";
inline constexpr char kReasonStoreBucketMissing[] = "StoreBucketMissing";
inline constexpr char kReasonSnapshotDirUnusable[] = "SnapshotDirUnusable";
inline constexpr char kReasonSnapshotIncomplete[] = "SnapshotIncomplete";
inline constexpr char kReasonPreflightPassed[] = "PreflightPassed";
inline constexpr char kReasonCheckpointInterrupted[] = "CheckpointInterrupted";
inline constexpr char kReasonRecovered[] = "Recovered";
inline constexpr char kReasonSandboxDied[] = "SandboxDied";
inline constexpr char kReasonNodeLost[] = "NodeLost";
inline constexpr char kReasonDeadlineExceeded[] = "DeadlineExceeded";
// Errors of the node itself (reconcilers/node/host_errors.h): a path the kernel refuses as too
// long (permanent), one of the agent's directories unwritable, its disk full (retried, bounded).
inline constexpr char kReasonHostPathTooLong[] = "HostPathTooLong";
inline constexpr char kReasonHostPathNotWritable[] = "HostPathNotWritable";
inline constexpr char kReasonHostDiskFull[] = "HostDiskFull";
// An exception of the host's (a filesystem call) that none of the above names.
inline constexpr char kReasonHostError[] = "HostError";
// Snapshots the agent will not trust (docs/node-agent.md#trusting-a-snapshot): a restore of a
// snapshot whose manifest names another actor of the same name (an earlier life: another
// metadata.uid), or whose files do not match their checksums — FAILED, the snapshot kept. And a
// checkpoint refused before it starts: the snapshot's file system has less free space than the
// sandbox's memory plus the margin — RUNNING, retried with backoff.
inline constexpr char kReasonSnapshotOwnerMismatch[] = "SnapshotOwnerMismatch";
inline constexpr char kReasonSnapshotCorrupt[] = "SnapshotCorrupt";
inline constexpr char kReasonInsufficientSpace[] = "InsufficientSpace";
// A GPU checkpoint would copy more device memory into host memory than the host has available.
inline constexpr char kReasonInsufficientHostMemory[] = "InsufficientHostMemory";
// A committed snapshot in an object store encrypted with another key than this agent's (or
// this agent has none, or has one and the snapshot is not encrypted): nothing downloaded, the
// actor rests where it was and the resume is retried with backoff — the right key restores it.
inline constexpr char kReasonSnapshotKeyMismatch[] = "SnapshotKeyMismatch";
// Actors from OCI images (spec.image). A pull that fails sets Ready=False with ImagePullFailed
// (the registry unreachable, or it answered with an error: retried with backoff), ImageNotFound
// (the registry has no such repository, tag or digest) or Unauthorized (the registry refused the
// credentials of spec.imagePullSecrets, or has none it accepts); Progressing=True PullingImage
// while layers download. ImageNotPresent: imagePullPolicy Never and the node has no such image
// cached. SnapshotImageUnavailable: a resume needs the image the snapshot was taken on
// (latestSnapshot.imageDigest) and it cannot be pulled by that digest. BadImage: the image
// has a layer or config this node refuses (a media type it does not know, a digest mismatch, a
// path that escapes the root filesystem, a platform other than the node's).
inline constexpr char kReasonImagePullFailed[] = "ImagePullFailed";
inline constexpr char kReasonImageNotFound[] = "ImageNotFound";
inline constexpr char kReasonUnauthorized[] = "Unauthorized";
inline constexpr char kReasonPullingImage[] = "PullingImage";
inline constexpr char kReasonImageNotPresent[] = "ImageNotPresent";
inline constexpr char kReasonSnapshotImageUnavailable[] = "SnapshotImageUnavailable";
inline constexpr char kReasonBadImage[] = "BadImage";
// A clone (spec.source): the source actor does not exist; it has no committed Full snapshot
// to start from (or not the one named); its snapshot cannot run here (a CUDA snapshot in an
// actor without a GPU, or another runtime); the postRestore hook failed. RestoredFromSource:
// Ready=True, the clone runs on its source's snapshot.
inline constexpr char kReasonSourceNotFound[] = "SourceNotFound";
inline constexpr char kReasonSourceSnapshotUnavailable[] = "SourceSnapshotUnavailable";
inline constexpr char kReasonSourceIncompatible[] = "SourceIncompatible";
inline constexpr char kReasonPostRestoreHookFailed[] = "PostRestoreHookFailed";
inline constexpr char kReasonRestoredFromSource[] = "RestoredFromSource";

// Derived from the failure classes a runtime driver names (runtime_driver.h), a Data
// snapshot's (data_dirs.h) and the snapshot store's (snapshot_reasons.h): a checkpoint or a
// restore that failed with one says it in CheckpointFailed / Ready.
inline constexpr char kReasonNvproxyLiveClients[] = "NvproxyLiveClients";
inline constexpr char kReasonContainerStopped[] = "ContainerStopped";
inline constexpr char kReasonVersionMismatch[] = "VersionMismatch";
inline constexpr char kReasonTimeout[] = "Timeout";
inline constexpr char kReasonNotFound[] = "NotFound";
inline constexpr char kReasonBadBundle[] = "BadBundle";
inline constexpr char kReasonRuntimeError[] = "RuntimeError";
inline constexpr char kReasonDataDirUnusable[] = "DataDirUnusable";
inline constexpr char kReasonDataArchiveFailed[] = "DataArchiveFailed";
inline constexpr char kReasonDataRestoreFailed[] = "DataRestoreFailed";
inline constexpr char kReasonSnapshotNotFound[] = "SnapshotNotFound";

// Metric label values. A `reason` label that says why an actor failed is the snake_case of the
// condition reason the actor gets for it (MetricReason("DeadlineExceeded") ==
// "deadline_exceeded"; the node agent's ConditionReason is the inverse), so that an alert's
// label leads to the actors' conditions and back (docs/metrics.md). The one forced-cleanup
// label that names no condition: an actor deleted mid-transition has no status left to carry one.
std::string MetricReason(std::string_view condition_reason);
inline constexpr char kMetricReasonDeleted[] = "deleted";

enum class ConditionStatus { kTrue, kFalse, kUnknown };

const char* ToString(ConditionStatus status);  // "True", "False", "Unknown"
std::optional<ConditionStatus> ParseConditionStatus(std::string_view text);

struct Condition {
  std::string type;
  ConditionStatus status = ConditionStatus::kUnknown;
  int64_t observed_generation = 0;  // the metadata.generation this condition reflects
  Time last_transition_time{};      // Time{} = not set; SetCondition fills it in
  std::string reason;               // CamelCase, e.g. "NvproxyLiveClients"
  std::string message;              // for people; at most kMaxConditionMessageBytes

  bool operator==(const Condition&) const = default;
};

const Condition* FindCondition(const std::vector<Condition>& conditions, std::string_view type);
Condition* FindCondition(std::vector<Condition>& conditions, std::string_view type);

// Adds or updates `condition` by type; returns whether anything changed (so the caller can
// skip a status write that changes nothing).
//  - new type: appended; lastTransitionTime = condition.last_transition_time if set, else now;
//  - status changed: lastTransitionTime = condition.last_transition_time if set, else now;
//  - status unchanged: lastTransitionTime kept, whatever the argument says;
//  - reason, message and observedGeneration are copied from `condition`.
// A message longer than kMaxConditionMessageBytes is cut (at a UTF-8 boundary, with "…"
// appended) so that the API server never rejects the write for it.
bool SetCondition(std::vector<Condition>& conditions, Condition condition, Time now);

// Returns whether a condition of that type was there.
bool RemoveCondition(std::vector<Condition>& conditions, std::string_view type);

// An absent condition is Unknown (API conventions).
ConditionStatus GetConditionStatus(const std::vector<Condition>& conditions, std::string_view type);
inline bool IsConditionTrue(const std::vector<Condition>& conditions, std::string_view type) {
  return GetConditionStatus(conditions, type) == ConditionStatus::kTrue;
}

// Cuts `message` to at most `max_bytes` bytes without splitting a UTF-8 sequence, ending
// with "…" when it was cut.
std::string TruncateMessage(std::string message, size_t max_bytes);

}  // namespace stasis::api
