// A clone (spec.source) starts by restoring another actor's committed Full snapshot. Which
// snapshot, and whether this actor can run it, is decided here from what was read of the
// source — its uid from a quorum read, its committed snapshots' manifests from the store — by a
// pure function; resume.cc reads, asks, and restores (read → decide → act).
//
// Invariants:
//  - Only a snapshot whose manifest names the source's current life (its metadata.uid) is
//    chosen: a snapshot left by an earlier actor of the same name is never anyone's source.
//  - Only a Full snapshot: a Data one holds no process to restore.
//  - Without a snapshot id, the newest committed one by takenAt (a node-local one is on one
//    node's disk: a clone that names none must be able to start anywhere). With one, exactly
//    that one, committed or — where this node holds it — node-local: a warm-pool claim names
//    its pool member's pause snapshot and is pinned to the member's node.
//  - Nothing the source could not have run is restored: a CUDA snapshot needs a GPU actor, an
//    image's snapshot an actor from an image, a bundle's an actor from a bundle.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "api/actor.h"
#include "base/status.h"
#include "snapshots/manifest.h"

namespace stasis {

// Failure classes of ChooseCloneSnapshot (Status::reason()). source_not_found and
// source_snapshot_unavailable are kUnavailable (the source may be created, or suspend, later:
// retried with backoff); source_incompatible is kFailedPrecondition (a new generation).
inline constexpr char kSourceNotFound[] = "source_not_found";
inline constexpr char kSourceSnapshotUnavailable[] = "source_snapshot_unavailable";
inline constexpr char kSourceIncompatible[] = "source_incompatible";

// What was read of the source actor.
struct SourceObservation {
  bool exists = false;
  std::string uid;                           // its metadata.uid
  std::vector<SnapshotManifest> committed;   // its committed snapshots' manifests, any order
  std::vector<SnapshotManifest> local;       // its snapshots on this node's disk, any order
};

// How an actor's first start came about, for stasis_actor_start_seconds: "boot" (no source),
// "golden" (a template's golden actor), "warm" (a warm-pool member), "clone" (any other actor),
// from the source's labels; "refill" for a warm-pool member's own start (its labels), so that
// the pool's upkeep does not count as the golden starts users wait for.
std::string StartKind(bool has_source, const std::map<std::string, std::string>& source_labels,
                      const std::map<std::string, std::string>& own_labels);

// The snapshot a clone restores.
struct CloneSnapshot {
  std::string source_name;
  std::string source_uid;
  std::string snapshot_id;
  std::string image_digest;  // the manifest's: the image the clone must run on ("" = a bundle)
  std::string trigger;  // the manifest's: "Pause" | "Suspend"
  bool cuda_checkpointed = false;
  bool local = false;  // on this node's disk, not in the store
};

Result<CloneSnapshot> ChooseCloneSnapshot(const api::ActorSpec& clone, const SourceObservation& source);

// The environment of a postRestore hook (docs/api.md, "Clones"): who the actor is now, and what
// it was restored from. `restore` is "clone" or "resume".
std::vector<std::string> PostRestoreHookEnv(const api::Actor& a, const std::string& snapshot_id,
                                            const std::string& restore);

}  // namespace stasis
