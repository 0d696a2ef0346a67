// The Worker custom resource (stasis.dev/v1alpha1, cluster-scoped) as C++ types: one slot of
// capacity on one node that holds at most one Actor. Node agents register their workers;
// claiming and freeing are resourceVersion-checked status writes (409 -> re-read).
// Invariant (also a CRD rule): status.actor_ref is set exactly when status.phase is kHeld;
// Hold() and Release() keep it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/gpu_identity.h"
#include "api/object_meta.h"

namespace stasis::api {

enum class WorkerPhase { kFree, kHeld };  // "Free" | "Held"

const char* ToString(WorkerPhase v);
std::optional<WorkerPhase> ParseWorkerPhase(std::string_view s);

struct ActorRef {
  std::string namespace_;
  std::string name;
  std::string Key() const { return namespace_ + "/" + name; }
  bool operator==(const ActorRef&) const = default;
};

struct WorkerSpec {
  std::string node_name;             // required, immutable
  std::vector<std::string> devices;  // e.g. GPU UUIDs; empty for a CPU slot
  // The model and driver of the worker's GPUs, as the node discovered them (NVML); empty for a
  // CPU slot and for GPUs named by --gpus without discovery.
  GpuIdentity gpu;
  bool operator==(const WorkerSpec&) const = default;
};

struct WorkerStatus {
  WorkerPhase phase = WorkerPhase::kFree;
  std::optional<ActorRef> actor_ref;
  bool operator==(const WorkerStatus&) const = default;
};

struct Worker {
  ObjectMeta metadata;
  WorkerSpec spec;
  WorkerStatus status;
  nlohmann::json raw;  // as in Actor: keeps unknown fields through WorkerToJson()

  bool IsFree() const { return status.phase == WorkerPhase::kFree; }
  bool IsHeldBy(const ActorRef& ref) const {
    return status.phase == WorkerPhase::kHeld && status.actor_ref == ref;
  }
  bool operator==(const Worker& o) const {
    return metadata == o.metadata && spec == o.spec && status == o.status;
  }
};

// Marks `worker` held by `ref` / free; the caller then writes status with the resourceVersion
// it read, so two claimants cannot both win.
void Hold(Worker& worker, ActorRef ref);
void Release(Worker& worker);

}  // namespace stasis::api
