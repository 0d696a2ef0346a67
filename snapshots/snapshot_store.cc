// What SnapshotStore's two halves share: its construction, the paths it hands out, and the
// start-up sweep of both roots. The halves themselves are local_store.cc and
// committed_store.cc.
#include "snapshots/snapshot_store.h"

#include "snapshots/deferred_durability.h"
#include "snapshots/snapshot_dirs.h"

namespace stasis {

SnapshotStore::SnapshotStore(std::string local_root, std::string store_root, bool link_same_fs,
                             std::string boot_id, Clock& clock)
    : local_root_(std::move(local_root)), store_root_(std::move(store_root)),
      link_same_fs_(link_same_fs), boot_id_(boot_id.empty() ? ThisBootId() : std::move(boot_id)),
      clock_(clock), deferred_(std::make_unique<DeferredSync>()) {}

std::string SnapshotStore::LocalPath(const std::string& ns, const std::string& name,
                                     const std::string& id) const {
  return SnapshotDir(local_root_, ns, name, id).string();
}

std::string SnapshotStore::StorePath(const std::string& ns, const std::string& name,
                                     const std::string& id) const {
  return SnapshotDir(store_root_, ns, name, id).string();
}

Result<int> SnapshotStore::RemovePartials() {
  return RemovePartialsUnder(local_root_) + RemovePartialsUnder(store_root_);
}

long long SnapshotStore::MillisSince(Clock::TimePoint start) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - start).count();
}

}  // namespace stasis
