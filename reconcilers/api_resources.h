// The ResourceTypes of the stasis API and the built-ins the reconcilers use, in one place.
#pragma once

#include "api/names.h"
#include "controller/kube_client.h"

namespace stasis {

inline const ResourceType kActorType{api::kGroup, api::kVersion, api::kActorResource, true};
inline const ResourceType kWorkerType{api::kGroup, api::kVersion, api::kWorkerResource, false};
inline const ResourceType kLeaseType{"coordination.k8s.io", "v1", "leases", true};

}  // namespace stasis
