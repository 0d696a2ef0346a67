// What SnapshotStore's two halves share: its construction (a directory store becomes a
// FilesystemBackend), the paths it hands out, and the start-up sweep of both. The halves
// themselves are local_store.cc and committed_store.cc.
#include "snapshots/snapshot_store.h"

#include "snapshots/deferred_durability.h"
#include "snapshots/filesystem_backend.h"
#include "snapshots/snapshot_dirs.h"

namespace stasis {

namespace {

std::unique_ptr<CommittedBackend> DirectoryStore(std::string root, bool link_same_fs) {
  if (root.empty()) return nullptr;
  return std::make_unique<FilesystemBackend>(std::move(root), link_same_fs);
}

}  // namespace

SnapshotStore::SnapshotStore(std::string local_root, std::string store_root, bool link_same_fs,
                             std::string boot_id, Clock& clock)
    : SnapshotStore(std::move(local_root), DirectoryStore(std::move(store_root), link_same_fs), std::move(boot_id),
                    clock) {}

SnapshotStore::SnapshotStore(std::string local_root, std::unique_ptr<CommittedBackend> committed, std::string boot_id,
                             Clock& clock)
    : local_root_(std::move(local_root)), committed_(std::move(committed)),
      boot_id_(boot_id.empty() ? ThisBootId() : std::move(boot_id)), clock_(clock),
      deferred_(std::make_unique<DeferredSync>()) {}

void SnapshotStore::set_digest_threads(int threads) {
  digest_threads_ = threads;
  if (committed_) committed_->SetDigestThreads(threads);
}

std::string SnapshotStore::LocalPath(const std::string& ns, const std::string& name,
                                     const std::string& id) const {
  return SnapshotDir(local_root_, ns, name, id).string();
}

std::string SnapshotStore::StorePath(const std::string& ns, const std::string& name,
                                     const std::string& id) const {
  return committed_ ? committed_->Location(ns, name, id) : "";
}

Result<int> SnapshotStore::RemovePartials() {
  int removed = RemovePartialsUnder(local_root_);
  if (committed_) {
    auto leftovers = committed_->RemoveLeftovers();
    if (!leftovers.ok()) return leftovers.status();
    removed += *leftovers;
  }
  return removed;
}

long long SnapshotStore::MillisSince(Clock::TimePoint start) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - start).count();
}

}  // namespace stasis
