// What both roles know of the API: the ResourceTypes of the stasis API and the built-ins the
// reconcilers use, and the name of a node's heartbeat Lease (written by the node agent, read by
// the cluster controller).
#pragma once

#include <string>

#include "api/names.h"
#include "controller/kube_client.h"

namespace stasis {

inline const ResourceType kActorType{api::kGroup, api::kVersion, api::kActorResource, true};
inline const ResourceType kWorkerType{api::kGroup, api::kVersion, api::kWorkerResource, false};
inline const ResourceType kLeaseType{"coordination.k8s.io", "v1", "leases", true};
// Read only: a Node's cordon and stasis.dev/drain annotation (api/node_drain.h).
inline const ResourceType kNodeType{"", "v1", "nodes", false};

// The coordination.k8s.io/v1 Lease a node agent renews while it lives.
inline std::string NodeLeaseName(const std::string& node) { return "stasis-node-" + node; }

}  // namespace stasis
