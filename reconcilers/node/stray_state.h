// What the node agent may do with what it holds on this node for an actor its caches do not
// show as its own: a sandbox, node-local snapshots, a worker. A cache miss is not proof the
// actor is gone: spec.nodeName can move an actor between the agent's two field-selected
// informers (DELETED may come before ADDED), or to another node. Only a quorum read that
// answers NotFound removes state; an actor that now belongs to another node keeps what it has
// here (its sandbox, its only paused snapshot) and the agent reports it, never deletes it.
#pragma once

#include <chrono>

namespace stasis {

// How often an actor owned elsewhere whose state this node keeps is looked at again: once it
// is deleted, its state here goes.
inline constexpr std::chrono::seconds kStrayRecheck{60};

// Event reason when an actor owned elsewhere still has state on this node.
inline constexpr char kReasonLocalStateKept[] = "LocalStateKept";

// What a quorum read said of the actor.
enum class StrayLookup {
  kNotFound,        // gone from the API
  kOwnedHere,       // still ours: its ADDED event on the other informer is on its way
  kOwnedElsewhere,  // another node's now (or no node's)
  kUnreadable,      // the read failed
};

enum class StrayAction {
  kRemove,         // delete the sandbox, local snapshots, free the worker
  kKeep,           // nothing to do: the actor is ours and will be reconciled as such
  kKeepAndReport,  // leave every local thing as it is and say why (Event, log)
  kRetry,          // decide again later
};

// `has_local_state`: a sandbox directory or a node-local snapshot of the actor exists here.
StrayAction DecideStray(StrayLookup lookup, bool has_local_state);

const char* ToString(StrayAction a);

}  // namespace stasis
