// How a Kubernetes Node asks stasis to move its actors away, read the same way by the node
// agent (which suspends them) and the cluster controller (which binds them elsewhere and sends
// no new actor there). A pure function of the Node object, so both roles agree on every case
// (tests/unit/node_drain_test.cc).
//
//  - Cordoned (`kubectl cordon`, spec.unschedulable: true): takes no new actors, and drains,
//    as `kubectl drain` expects of what runs there.
//  - The annotation stasis.dev/drain: "true" drains a node that is not cordoned; "false" keeps
//    the actors of a cordoned node where they are (it still takes no new ones).
//  - No Node object (a node agent run outside a kubelet's node): never draining.
#pragma once

#include <nlohmann/json.hpp>

namespace stasis::api {

inline constexpr char kDrainAnnotation[] = "stasis.dev/drain";
// The Event reason of an actor suspended because its node drains, and of its binding elsewhere.
inline constexpr char kReasonNodeDraining[] = "NodeDraining";

struct NodeDrain {
  bool takes_new_actors = true;  // the binder may send actors here
  bool drain = false;            // its actors are suspended to the store and bound elsewhere
  bool operator==(const NodeDrain&) const = default;
};

// From a v1 Node object; an absent or malformed field counts as not set.
NodeDrain NodeDrainOf(const nlohmann::json& node);

}  // namespace stasis::api
