// The names of the stasis API that other code and other programs key on: group, version,
// kinds, resources, the node label, the finalizer and the defaults shared by the CRD schema
// (manifests/crd/) and the C++ types. Invariant: every value here appears verbatim in the CRDs;
// change both together.
#pragma once

#include <cstdint>
#include <string>

namespace stasis::api {

inline constexpr char kGroup[] = "stasis.dev";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kApiVersion[] = "stasis.dev/v1alpha1";

inline constexpr char kActorKind[] = "Actor";
inline constexpr char kActorResource[] = "actors";  // namespaced; short name "act"
inline constexpr char kWorkerKind[] = "Worker";
inline constexpr char kWorkerResource[] = "workers";  // cluster-scoped

// Set by the binder on an Actor when it binds it (together with status.nodeName), and by a
// node agent on the Workers it registers: `-l stasis.dev/node=<node>` lists one node's objects.
// Label values are at most 63 characters; the field selector status.nodeName=<node> (Actor)
// or spec.nodeName=<node> (Worker) works for any node name.
inline constexpr char kNodeLabel[] = "stasis.dev/node";

// The finalizer the node agent puts on an Actor so that deletion waits for the sandbox to be
// removed, snapshots to be handled per retention and the worker to be freed.
inline constexpr char kActorFinalizer[] = "stasis.dev/actor-cleanup";

// Field selectors the CRDs declare (selectableFields).
inline constexpr char kActorFieldSpecNodeName[] = "spec.nodeName";
inline constexpr char kActorFieldStatusNodeName[] = "status.nodeName";
inline constexpr char kWorkerFieldNodeName[] = "spec.nodeName";
inline constexpr char kWorkerFieldPhase[] = "status.phase";

// The node agent's two actor caches, disjoint: the actors pinned to `node`, and those bound to
// it that are not pinned to it (an unpinned actor's spec.nodeName is "", which is != node).
inline std::string PinnedActorsSelector(const std::string& node) {
  return std::string(kActorFieldSpecNodeName) + "=" + node;
}
inline std::string BoundUnpinnedActorsSelector(const std::string& node) {
  return std::string(kActorFieldStatusNodeName) + "=" + node + "," + kActorFieldSpecNodeName + "!=" + node;
}

// Schema defaults (the CRD's `default:` values).
inline constexpr char kDefaultCudaCheckpointPath[] = "/usr/local/bin/cuda-checkpoint";
// Where the helper's private directory (the helper's own glibc loader and libraries, lib/) is
// mounted in GPU containers: the helper's interpreter and RPATH point there, so it runs whatever
// C library the image has, or none (cmd/stasis-cuda-checkpoint/CMakeLists.txt; docs/gpu.md).
inline constexpr char kCudaCheckpointPrivateDir[] = "/opt/stasis/cuda-checkpoint";
// The GPU fast-snapshot library (cmd/stasis-cuda-checkpoint/fastsnap/), shipped in that private
// directory: the node agent preloads it into an actor with spec.gpu.fastSnapshot
// (docs/gpu-fast-snapshot.md, "Opting in").
inline constexpr char kFastSnapshotLibrary[] = "/opt/stasis/cuda-checkpoint/libstasis-fastsnap.so";
#if defined(__aarch64__)
inline constexpr char kCudaCheckpointPrivateLoader[] =
    "/opt/stasis/cuda-checkpoint/lib/ld-linux-aarch64.so.1";
#else
inline constexpr char kCudaCheckpointPrivateLoader[] =
    "/opt/stasis/cuda-checkpoint/lib/ld-linux-x86-64.so.2";
#endif
inline constexpr int32_t kDefaultTimeoutSeconds = 600;

// Schema bounds.
inline constexpr int32_t kMinTimeoutSeconds = 1;
inline constexpr int32_t kMaxTimeoutSeconds = 86400;
inline constexpr int32_t kMaxGpuCount = 8;
inline constexpr int kMaxPathLength = 4096;
inline constexpr int kMaxNodeNameLength = 253;
inline constexpr int kMaxDataDirs = 16;
inline constexpr int kMaxDevices = 16;
inline constexpr int kMaxDeviceLength = 256;
// A GPU's identity (Worker spec.gpu, latestSnapshot.gpu): NVML's name, driver and CUDA versions.
inline constexpr int kMaxGpuModelLength = 256;
inline constexpr int kMaxDriverVersionLength = 64;
inline constexpr int kMaxCudaVersionLength = 16;
inline constexpr int kMaxConditions = 32;
inline constexpr int kMaxConditionMessageBytes = 32768;
// Actors from OCI images (spec.image and the fields that go with it).
inline constexpr int kMaxImageLength = 255;
inline constexpr int kMaxImagePullSecrets = 16;
inline constexpr int kMaxCommandItems = 256;  // spec.command and spec.args, each
inline constexpr int kMaxArgLength = 4096;    // one item of command or args
inline constexpr int kMaxEnvVars = 256;
inline constexpr int kMaxEnvNameLength = 253;
inline constexpr int kMaxEnvValueLength = 32768;
inline constexpr int kMaxImageDigestLength = 256;  // status.imageDigest, latestSnapshot.imageDigest
// Clones (spec.source, spec.hooks, status.clonedFrom).
inline constexpr int32_t kDefaultHookTimeoutSeconds = 30;
inline constexpr int32_t kDefaultReadinessTimeoutSeconds = 300;
inline constexpr int32_t kMaxReadinessTimeoutSeconds = 3600;
inline constexpr int32_t kDefaultReadinessPeriodSeconds = 1;  // ReadinessGate::period_seconds
inline constexpr int32_t kMaxReadinessPeriodSeconds = 60;
inline constexpr int32_t kMaxWarmPool = 64;
inline constexpr int32_t kMaxHookTimeoutSeconds = 600;  // hooks.postRestore.timeoutSeconds
// A snapshot id: the rule snapshots/snapshot_names.h IsSnapshotId() applies (snapshots/ cannot
// include api/, so the length is spelled there too).
inline constexpr int kMaxSnapshotIdLength = 128;
inline constexpr int kMaxUidLength = 128;  // metadata.uid (a UUID: 36)

}  // namespace stasis::api
