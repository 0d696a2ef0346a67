// Where the binder sends an actor, or why it cannot send it anywhere yet: a pure decision over
// the actor, the Workers and actors of the cache and the set of live nodes, so that every case
// is unit-tested without an API server (tests/unit/placement_test.cc).
//
// Invariant: a Placement names a node, or a reason (kReasonNoFreeWorker: some live node has a
// worker that suits the actor but every such worker is held or promised; kReasonUnschedulable:
// no live node has a worker that could ever run it) with a message that counts the candidates,
// as the kube-scheduler's "0/3 nodes are available: …" does. Never both, never neither.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "api/actor.h"
#include "api/worker.h"

namespace stasis {

// The GPU a start of `a` must bring a CUDA context back on (api/gpu_identity.h): its own latest
// snapshot's, or for a clone without one yet, its source's latest (the source found among
// `actors`). nullptr when any GPU will do: no CUDA context, no identity recorded, or a clone of
// an older snapshot of its source, which the node agent checks from the manifest instead.
const api::GpuIdentity* RestoresOnto(const api::Actor& a, const std::vector<api::Actor>& actors);

// Whether a worker can run this actor: GPU actors need that many GPUs on the worker, of the
// model and driver `restores_onto` names if it is not null; CPU actors take CPU slots only.
bool WorkerSuits(const api::Worker& w, const api::Actor& a, const api::GpuIdentity* restores_onto);
// The same for an actor's own latest snapshot (no clone source looked up).
bool WorkerSuits(const api::Worker& w, const api::Actor& a);

// Whether an actor holds a promise of a worker on its node: bound there (status.nodeName),
// wanting Running, holding none yet and not running. Place counts it against the node's free
// workers; the cluster reconciler indexes these actors (IndexPromised).
bool HoldsAWorkerPromise(const api::Actor& o);

// Whether a change of a Worker (`before` null: added; `after` null: deleted) may let an actor
// waiting to bind be placed: only a worker that is Free afterwards, and was not Free before or
// has changed what it offers (spec, labels). A worker claimed or deleted, or rewritten without
// change, cannot help an actor that waits, and requeueing every waiting actor on each of a
// burst's claims would place the same actors again and again.
bool WorkerChangeMayUnblock(const nlohmann::json* before, const nlohmann::json* after);

struct Placement {
  std::string node;     // where to bind; empty when nowhere yet
  int free = 0;         // suitable free workers there, not promised to actors bound to it
  int suitable = 0;     // suitable workers there in all
  std::string reason;   // when `node` is empty: api::kReasonNoFreeWorker or kReasonUnschedulable
  std::string message;  // for people: the counts behind the choice or the refusal
};

struct PlacementInput {
  std::vector<api::Worker> workers;  // every Worker of the cache
  std::vector<api::Actor> actors;    // every Actor of the cache (the one placed may be among them)
  std::set<std::string> live_nodes;  // nodes whose heartbeat Lease is unexpired
  // Live nodes that take no new actors: cordoned, or draining (api/node_drain.h). A paused
  // actor's snapshot still places it on its own node.
  std::set<std::string> closed_nodes;
  // A node not to choose: the one whose agent found no free worker for this actor.
  std::string avoid;
};

// A paused actor goes only to the node that holds its snapshot; any other to the live node,
// not closed, with the most suitable free workers not already promised to actors bound there
// (ties: the first node by name). A warm-pool member (label stasis.dev/warm-pool-of) only to a
// node where two or more are: it never takes the last one from an actor that is not pooled.
Placement Place(const api::Actor& a, const PlacementInput& in);

}  // namespace stasis
