// The part of Kubernetes ObjectMeta that stasis reads and writes, shared by Actor and Worker.
// Fields stasis does not model (ownerReferences, managedFields, …) are not lost: they stay in
// the object's raw JSON (see json_mapping.h). Invariant: finalizers are a set (no duplicates).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/time.h"

namespace stasis::api {

struct ObjectMeta {
  std::string name;
  std::string namespace_;  // "namespace" is a C++ keyword; empty for cluster-scoped objects
  std::string uid;
  std::string resource_version;  // opaque: compare for equality only
  int64_t generation = 0;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> finalizers;
  std::optional<Time> creation_timestamp;
  std::optional<Time> deletion_timestamp;

  bool operator==(const ObjectMeta&) const = default;

  bool IsBeingDeleted() const { return deletion_timestamp.has_value(); }
  // "namespace/name", or "name" for a cluster-scoped object: the work-queue key.
  std::string Key() const;
  bool HasFinalizer(std::string_view finalizer) const;
  // Both return whether the list changed.
  bool AddFinalizer(std::string_view finalizer);
  bool RemoveFinalizer(std::string_view finalizer);
};

}  // namespace stasis::api
