// Snapshot retention (`stasis controller --retain N [--retain-min-age D]`): keep the newest N
// committed snapshots of each actor in the snapshot store (a directory or an object store) and
// delete the older ones that are at least D old.
//
// Invariants:
//  - status.latestSnapshot is never deleted, however old: a resume restores from exactly that
//    snapshot (the node agent's Resume reads status.latestSnapshot.location), so it is also the
//    snapshot being restored while the actor is RESUMING.
//  - An actor in a transition (RESUMING, PAUSING, SUSPENDING) or being deleted is not touched:
//    a restore may be reading the store, a commit may be writing a snapshot that the status
//    does not name yet, and deletion removes everything anyway.
//  - The store is listed before the actor is read (a quorum read). A snapshot committed after
//    the listing is not in it; one committed before it is either named by the status read
//    afterwards or belongs to a transition that the read sees (SUSPENDING), or it was orphaned
//    by a forced cleanup. So nothing the actor can still resume from is deleted, whatever the
//    nodes' clocks wrote into takenAt.
//  - Only complete snapshots are candidates: *.partial directories and directories without a
//    valid manifest (objects without a manifest object) are never touched; those are garbage
//    collection's (object_store_gc.h).
//  - A snapshot younger than the minimum age (takenAt within D of the controller's clock, or a
//    takenAt that does not parse) is never deleted; the actor is looked at again when the
//    oldest one held back only by its age comes of age.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/actor.h"
#include "base/status.h"
#include "base/time.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

struct RetentionPolicy {
  int retain = 1;                     // >= 1
  std::chrono::seconds min_age{0};    // 0: age does not matter
};

// The ids of `committed` (oldest first, as SnapshotStore::ListCommitted returns them) that
// retention deletes: all but the newest `retain`, never one in `protected_ids`, never one
// taken less than `min_age` before `now` (or whose takenAt does not parse). retain >= 1.
std::vector<std::string> SnapshotsToDelete(const std::vector<SnapshotManifest>& committed, int retain,
                                           const std::set<std::string>& protected_ids, Time now = {},
                                           std::chrono::seconds min_age = {});
// When the first snapshot that SnapshotsToDelete keeps only for its age becomes old enough;
// nullopt when none is kept for that reason.
std::optional<Time> RetentionRecheckAt(const std::vector<SnapshotManifest>& committed, int retain,
                                       const std::set<std::string>& protected_ids, Time now,
                                       std::chrono::seconds min_age);

// The snapshot ids of `actor` that must survive retention, or nullopt when retention must not
// touch the actor's snapshots at all now (a transition is under way, or it is being deleted).
std::optional<std::set<std::string>> ProtectedSnapshots(const api::Actor& actor);

// Reads the actor from the API server (a quorum read, not a cache): Code::kNotFound when it
// does not exist.
using ActorReader = std::function<Result<api::Actor>(const std::string& ns, const std::string& name)>;

class SnapshotRetention {
 public:
  // store: the controller's view of the snapshot store (only its store root is used).
  SnapshotRetention(SnapshotStore& store, RetentionPolicy policy, ActorReader read_actor);

  struct Pruned {
    std::vector<std::string> deleted;  // ids, oldest first
    bool skipped = false;              // the actor is in a transition, being deleted, or gone
    std::string latest;                // status.latestSnapshot.id as read ("" without one)
    std::optional<Time> recheck_at;    // a snapshot kept only for its age comes of age then
  };
  // One pass over one actor: list its committed snapshots, read it, delete what
  // SnapshotsToDelete selects. Stops at the first deletion that fails.
  // `now`: the controller's wall clock, for the minimum age.
  Result<Pruned> Prune(const std::string& ns, const std::string& name, Time now);

  int retain() const { return policy_.retain; }

 private:
  SnapshotStore& store_;
  RetentionPolicy policy_;
  ActorReader read_actor_;
};

}  // namespace stasis
