// Snapshot retention (`stasis controller --retain N`): keep the newest N committed snapshots of
// each actor in the snapshot store and delete the older ones.
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
//    valid manifest are never touched.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/actor.h"
#include "base/status.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

// The ids of `committed` (oldest first, as SnapshotStore::ListCommitted returns them) that
// retention deletes: all but the newest `retain`, never one in `protected_ids`. retain >= 1.
std::vector<std::string> SnapshotsToDelete(const std::vector<SnapshotManifest>& committed, int retain,
                                           const std::set<std::string>& protected_ids);

// The snapshot ids of `actor` that must survive retention, or nullopt when retention must not
// touch the actor's snapshots at all now (a transition is under way, or it is being deleted).
std::optional<std::set<std::string>> ProtectedSnapshots(const api::Actor& actor);

// Reads the actor from the API server (a quorum read, not a cache): Code::kNotFound when it
// does not exist.
using ActorReader = std::function<Result<api::Actor>(const std::string& ns, const std::string& name)>;

class SnapshotRetention {
 public:
  // store: the controller's view of the snapshot store (only its store root is used).
  SnapshotRetention(SnapshotStore& store, int retain, ActorReader read_actor);

  struct Pruned {
    std::vector<std::string> deleted;  // ids, oldest first
    bool skipped = false;              // the actor is in a transition, being deleted, or gone
    std::string latest;                // status.latestSnapshot.id as read ("" without one)
  };
  // One pass over one actor: list its committed snapshots, read it, delete what
  // SnapshotsToDelete selects. Stops at the first deletion that fails.
  Result<Pruned> Prune(const std::string& ns, const std::string& name);

  int retain() const { return retain_; }

 private:
  SnapshotStore& store_;
  int retain_;
  ActorReader read_actor_;
};

}  // namespace stasis
