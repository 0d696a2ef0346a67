// SnapshotStore's committed half: a complete local snapshot, its checksums computed and its
// manifest in the current format, handed to the store's backend (committed_backend.h); and the
// store's snapshots verified, listed and removed through it.
#include <spdlog/spdlog.h>

#include "snapshots/deferred_durability.h"
#include "snapshots/snapshot_names.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;

Status NoStore() {
  return Status(Code::kFailedPrecondition, "no snapshot store configured", snapshot_reason::kNoStore);
}

}  // namespace

Result<SnapshotManifest> SnapshotStore::ReadForCommit(const std::string& ns, const std::string& name,
                                                      const std::string& id) {
  const fs::path source = LocalPath(ns, name, id);
  auto local = ReadManifest(source);
  if (!local.ok()) return local.status();
  if (local->checksums_pending) {
    // A paused snapshot whose background checksums have not come yet: wait for them; if its
    // job failed or ran in an agent that stopped, compute them here — on the boot it was
    // written in (what VerifySnapshotDir refuses after a reboot: nothing can vouch for those
    // bytes).
    if (local->deferred_sync_boot_id != boot_id_) return VerifySnapshotDir(source, ns, name, id, digest_threads_).status();
    (void)deferred_->Flush(std::chrono::minutes(10));
    if (Status s = FillPendingChecksums(source, digest_threads_); !s.ok()) return s;
    local = ReadManifest(source);
    if (!local.ok()) return local.status();
  }
  if (Status s = CheckManifestNames(source, *local, ns, name, id); !s.ok()) return s;
  if (Status s = CheckManifestPaths(source, *local); !s.ok()) return s;
  if (local->format == kManifestFormatWholeFile) {
    // Taken before manifests had chunks: the store holds only chunked manifests, so it is
    // verified as it was written and given its chunks first (a second read, once).
    if (Status s = UpgradeToChunked(source, ns, name, id, digest_threads_); !s.ok()) return s;
    local = ReadManifest(source);
  }
  return local;
}

Result<SnapshotManifest> SnapshotStore::Commit(const std::string& ns, const std::string& name,
                                               const std::string& id, bool just_completed) {
  const auto start = clock_.Now();
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  auto fail = [&](Status s) {
    spdlog::warn(
        "component=snapshots op=commit actor={}/{} snapshot={} result=error reason={} "
        "duration_ms={} error=\"{}\"",
        ns, name, id, s.reason(), MillisSince(start), s.message());
    return s;
  };
  if (!committed_) return fail(NoStore());
  auto local = ReadForCommit(ns, name, id);
  if (!local.ok()) return fail(local.status());
  auto put = committed_->Put(LocalPath(ns, name, id), *local, just_completed);
  if (!put.ok()) {
    // Completed for this commit without its fsyncs (kUntilCommit): it now rests on the node.
    if (just_completed && !local->deferred_sync_boot_id.empty() && local->deferred_sync_boot_id == boot_id_) {
      EnqueueDeferred(LocalPath(ns, name, id), *local);
    }
    return fail(put.status());
  }
  spdlog::info(
      "component=snapshots op=commit actor={}/{} snapshot={} result=ok bytes={} how={} duration_ms={}",
      ns, name, id, put->manifest.total_bytes, put->how, MillisSince(start));
  return std::move(put->manifest);
}

Durability SnapshotStore::SuspendDurability() const {
  return committed_ && committed_->CommitCopies(local_root_) ? Durability::kUntilCommit : Durability::kSynced;
}

Result<SnapshotManifest> SnapshotStore::VerifyCommitted(const std::string& ns, const std::string& name,
                                                        const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (!committed_) return NoStore();
  auto fetched = committed_->Fetch(ns, name, id);
  if (!fetched.ok()) return fetched.status();
  return std::move(fetched->manifest);
}

std::vector<SnapshotManifest> SnapshotStore::ListCommitted(const std::string& ns, const std::string& name) const {
  if (!committed_) return {};
  return committed_->List(ns, name);
}

Result<bool> SnapshotStore::HasCommitted(const std::string& ns, const std::string& name, const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (!committed_) return NoStore();
  return committed_->Has(ns, name, id);
}

Status SnapshotStore::RemoveCommitted(const std::string& ns, const std::string& name, const std::string& id) {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (!committed_) return NoStore();
  return committed_->Remove(ns, name, id);
}

Status SnapshotStore::CheckStoreWritable() const {
  if (!committed_) return NoStore();
  return committed_->CheckWritable();
}

}  // namespace stasis
