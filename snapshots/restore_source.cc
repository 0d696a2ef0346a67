// SnapshotStore::CheckForRestore: where a restore reads a snapshot from and whether it may.
// The path comes from the names alone, the manifest must be this actor's (this life of it),
// and a committed image is read in full against its checksums before runsc sees it: the store
// may be a shared file system that other nodes, and other hands, write to.
#include <spdlog/spdlog.h>

#include "snapshots/snapshot_dirs.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

Result<SnapshotStore::RestoreSource> SnapshotStore::CheckForRestore(const std::string& ns, const std::string& name,
                                                                    const std::string& id, bool committed,
                                                                    const std::string& owner_uid,
                                                                    bool verify_local) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (committed && !committed_) {
    return Status(Code::kFailedPrecondition, "no snapshot store configured", snapshot_reason::kNoStore);
  }
  const auto start = clock_.Now();
  const bool verify = committed || verify_local;
  std::string dir = LocalPath(ns, name, id);
  Result<SnapshotManifest> manifest = SnapshotManifest{};
  std::shared_ptr<const void> in_use;
  if (committed) {
    auto fetched = committed_->Fetch(ns, name, id);
    if (!fetched.ok()) return fetched.status();
    dir = std::move(fetched->dir);
    manifest = std::move(fetched->manifest);
    in_use = std::move(fetched->in_use);
  } else {
    manifest = verify_local ? VerifySnapshotDir(dir, ns, name, id, digest_threads_) : CheckLocalForRestore(ns, name, id);
  }
  if (!manifest.ok()) return manifest.status();
  if (Status s = CheckManifestOwner(dir, *manifest, owner_uid); !s.ok()) return s;
  if (manifest->owner_uid.empty()) {
    spdlog::info("component=snapshots op=restore_check actor={}/{} snapshot={} owner=unrecorded action=accept", ns,
                 name, id);
  }
  if (verify) {
    spdlog::info("component=snapshots op=verify actor={}/{} snapshot={} bytes={} duration_ms={}", ns, name, id,
                 manifest->total_bytes, MillisSince(start));
  }
  return RestoreSource{dir, std::move(*manifest), std::move(in_use)};
}

}  // namespace stasis
