// A template's warm pool (spec.warm, docs/templates.md), decided by a pure function from what the
// template reconciler observed: its pool members, the actors waiting for the template, and the
// recorded golden snapshot. template_reconciler.cc reads and acts.
//
// A pool member is an ordinary Actor, `<template>-warm-<k>`, labelled warm-pool-of=<template>:
// a clone of the golden actor, started, then paused (which frees its worker and leaves a
// node-local pause snapshot). An actor created from the template claims a paused member: the
// member is annotated claimed-by=<actor>, and the actor is filled in with spec.source naming
// the member's pause snapshot and spec.nodeName the member's node, so that its first start is
// the agent's resume of a local snapshot. Once the claimer has started (or is gone, or was
// given another source), the member is deleted and the pool refills: not before, so that no
// refill competes with the claimer's restore.
//
// Invariants:
//  - A member is claimed by at most one actor (the claim is a write with the member's
//    resourceVersion as precondition), and a claimed member is never counted in the pool,
//    paused again, or deleted before its claimer has started from it.
//  - An actor is filled in from a member only when one is ready on a node it may run on and
//    that node has a free worker; otherwise from the golden snapshot (a miss): a pool never
//    delays an actor.
//  - Members of an earlier golden, failed members and members beyond spec.warm are deleted
//    unless claimed. Members start only where they leave a free worker to others: the binder
//    places a pool member only on a node with two free workers (placement.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/actor.h"
#include "api/actor_template.h"

namespace stasis {

// The annotation on a pool member naming the actor that claimed it.
inline constexpr char kClaimedByAnnotation[] = "stasis.dev/claimed-by";

std::string PoolMemberName(const std::string& template_name, int index);

// What became of a member's claimer.
enum class Claimer {
  kNone,     // unclaimed
  kPending,  // the claimer still waits to be filled in
  kUsing,    // the claimer names this member as its source and has not started yet
  kDone,     // the claimer started, is gone, or names another source: the member may go
};

// What became of `claimer`, the actor that claimed `member`, among the namespace's actors.
Claimer ClaimerOf(const std::string& member, const std::string& claimer,
                  const std::map<std::string, api::Actor>& all);

// One actor labelled warm-pool-of=<template>.
struct PoolMemberView {
  std::string name;
  std::string source;  // spec.source.actorName: the golden it was restored from
  bool being_deleted = false;
  api::ActorState status = api::ActorState::kUnspecified;
  api::DesiredState desired = api::DesiredState::kRunning;
  std::string claimed_by;
  Claimer claimer = Claimer::kNone;
  std::optional<api::Snapshot> latest;
};

// An actor with templateRef to this template, not yet filled in.
struct PendingActorView {
  std::string name;
  std::string node_name;  // its own spec.nodeName pin, "" when none
};

// An actor to fill in from a member's pause snapshot.
struct PoolClaim {
  std::string actor;
  std::string member;
  std::string node;         // where the member's snapshot is: the actor is pinned there
  std::string snapshot_id;  // the member's pause snapshot
  bool already_claimed = false;  // the member already names this actor (an earlier fill failed)
};

struct PoolActions {
  std::vector<std::string> create;  // new members
  std::vector<std::string> pause;   // members RUNNING: set desiredState Paused
  std::vector<std::string> remove;  // members to delete
  std::vector<PoolClaim> claims;
  std::vector<std::string> from_golden;  // pending actors filled in from the golden (misses when warm > 0)
  int ready = 0;     // members paused and unclaimed after these claims (status.warmReady)
  bool filling = false;  // members are on their way: look again soon
};

// `free_workers`: per node, the free workers that suit the template's actors. A claim pins its
// actor to the member's node, so a member is claimed only where one is free.
PoolActions DecidePool(const std::string& template_name, int32_t warm, const api::GoldenSnapshot& golden,
                       const std::vector<PoolMemberView>& members, const std::vector<PendingActorView>& pending,
                       std::map<std::string, int> free_workers);

}  // namespace stasis
