// What the cluster controller does for one ActorTemplate (docs/templates.md), decided by a pure
// function from what it observed: the template, the golden actors it made, and whether the
// recorded golden snapshot is still in the store. template_reconciler.cc reads and acts.
//
// The golden snapshot is taken through an ordinary Actor, the golden actor
// `<template>-golden-<generation>`: created from spec.actor with snapshots forced Full (a Data
// golden would leave nothing to restore) and the template's readiness gate; suspended once the
// gate passes (or once RUNNING without one); its committed snapshot recorded in status.golden.
// Actors with templateRef are then filled in from the template and start as clones of it, or
// of a warm-pool member (warm_pool.h).
//
// Invariants:
//  - At most one golden actor per template generation; a new generation takes a new golden,
//    and an older golden actor is deleted only once the new golden is recorded and no actor
//    that has no snapshot of its own names it as its source (it may still start from it).
//  - A golden that cannot be taken (its gate timed out, its actor failed) is reported on the
//    template (GoldenReady=False), its actor deleted (its worker freed), and not tried again
//    until a new generation: no loop, no stuck actor, no held worker.
//  - A recorded golden whose snapshot is gone from the store is dropped and taken again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/actor.h"
#include "api/actor_template.h"
#include "reconcilers/cluster/warm_pool.h"

namespace stasis {

// The annotation on a golden actor naming the template generation it was made for (for people:
// the generation is also in its name, which is what the decisions use).
inline constexpr char kTemplateGenerationAnnotation[] = "stasis.dev/template-generation";

std::string GoldenActorName(const std::string& template_name, int64_t generation);

// One actor labelled golden-of=<template>.
struct GoldenActorView {
  std::string name;
  bool being_deleted = false;
  api::ActorState status = api::ActorState::kUnspecified;
  api::DesiredState desired = api::DesiredState::kRunning;
  bool gate_passed = false;     // ReadinessGate=True
  bool gate_timed_out = false;  // ReadinessGate=False ReadinessGateTimedOut
  std::string failure;          // FAILED: its Ready message
  std::optional<api::Snapshot> latest;  // status.latestSnapshot
};

struct TemplateObservation {
  int64_t generation = 0;
  bool has_gate = false;
  std::optional<api::GoldenSnapshot> recorded;  // status.golden
  // The GoldenReady condition as last written (a failure at this generation is final).
  std::optional<api::Condition> golden_ready;
  // false only when the store answered and lacks it (an unreachable store keeps the golden).
  bool recorded_in_store = true;
  std::vector<GoldenActorView> goldens;
  // Golden actors named as spec.source by an actor that has no snapshot of its own.
  std::set<std::string> needed_as_source;
  std::vector<PendingActorView> pending;  // templateRef actors still to be filled in
  int32_t warm = 0;                       // spec.warm
  std::vector<PoolMemberView> members;    // actors labelled warm-pool-of=<template>
  std::map<std::string, int> free_workers;  // per node, free workers that suit the template's actors
  // The resourceVersion of each pending actor and pool member as observed: the writes that act
  // on a decision are checked against what it was decided on, never a newer cache entry.
  std::map<std::string, std::string> resource_versions;
};

struct TemplateActions {
  std::optional<std::string> create_golden;   // create this golden actor
  std::optional<std::string> suspend_golden;  // set its desiredState to Suspended
  std::vector<std::string> delete_goldens;
  std::optional<api::GoldenSnapshot> record;  // the new status.golden
  bool clear_recorded = false;
  // Once the golden is recorded: the warm pool's upkeep, and how each waiting actor is filled
  // in (from a member, or from the golden).
  PoolActions pool;
  // GoldenReady as it should read (written when it differs).
  bool ready = false;
  std::string reason, message;
  bool recheck = false;  // look again soon: a golden is under way
};

TemplateActions DecideTemplate(const std::string& template_name, const TemplateObservation& o);

}  // namespace stasis
