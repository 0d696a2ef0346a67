// SnapshotStore's node-local half: snapshots under <root>/snapshots are begun as a partial
// directory, completed by a rename after their manifest, checked before a restore, listed and
// removed.
#include <spdlog/spdlog.h>

#include <thread>

#include "base/time.h"
#include "snapshots/file_io.h"
#include "snapshots/snapshot_dirs.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kSnapshotNotFound;

// When a completion's fsyncs run, for its log line.
const char* SyncWhen(Durability d) {
  switch (d) {
    case Durability::kSynced: return "before";
    case Durability::kDeferred: return "deferred";
    case Durability::kUntilCommit: return "by_commit";
  }
  return "unknown";
}

// A partial directory that CompleteLocal may turn into `complete`.
Status CheckCompletable(const fs::path& partial, const fs::path& complete) {
  std::error_code ec;
  if (!fs::is_directory(partial, ec)) {
    return Status(Code::kNotFound, "no partial snapshot at " + partial.string(), kSnapshotNotFound);
  }
  if (fs::exists(complete, ec)) {
    return Status(Code::kAlreadyExists, "snapshot " + complete.string() + " already exists");
  }
  return OkStatus();
}

// The manifest's entries for `files`: sizes only when their checksums are pending (a deferred
// Full image is not read here at all), else sizes and chunk digests. The image is fresh in the
// page cache: hashing reads it (CPU, on `threads` threads), fsync writes it back (disk). With
// `sync_now` they overlap: one thread syncs every file while the others hash.
Status DescribeFiles(const fs::path& partial, const std::vector<fs::path>& files, bool sync_now, int threads,
                     SnapshotManifest& manifest) {
  for (const auto& rel : files) manifest.files.push_back({rel.string(), 0, {}, ""});
  if (manifest.checksums_pending) {
    for (auto& f : manifest.files) {
      std::error_code ec;
      f.size = static_cast<int64_t>(fs::file_size(partial / f.path, ec));
      if (ec) return Status(Code::kInternal, "stat " + (partial / f.path).string() + ": " + ec.message(), kIoError);
      manifest.total_bytes += f.size;
    }
    return OkStatus();
  }
  Status synced;
  std::thread syncer;
  if (sync_now) syncer = std::thread([&] {
    for (const auto& rel : files) {
      if (Status s = FsyncPath(partial / rel); !s.ok()) {
        synced = s;
        return;
      }
    }
  });
  std::vector<fs::path> paths;
  for (const auto& rel : files) paths.push_back(partial / rel);
  auto digests = HashFilesChunked(paths, manifest.chunk_bytes, threads);
  if (syncer.joinable()) syncer.join();
  if (!digests.ok()) return digests.status();
  SetChunkDigests(manifest, *digests);
  return synced;
}

// The manifest is the mark of completeness: written (and, with `sync_now`, synced together
// with the subdirectories and the directory, whose entries must be durable too) before the
// rename to `complete`.
Status Seal(const fs::path& partial, const fs::path& complete, const std::vector<fs::path>& files,
            const SnapshotManifest& manifest, bool sync_now) {
  if (Status s = WriteManifest(partial, manifest, sync_now); !s.ok()) return s;
  if (sync_now) {
    for (const auto& d : SubdirectoriesOf(files)) (void)FsyncPath(partial / d);
    if (Status s = FsyncPath(partial); !s.ok()) return s;
  }
  std::error_code ec;
  fs::rename(partial, complete, ec);
  if (ec)
    return Status(Code::kInternal, "rename " + partial.string() + ": " + ec.message(), kIoError);
  if (sync_now) return FsyncPath(complete.parent_path());
  return OkStatus();
}

}  // namespace

Result<std::string> SnapshotStore::BeginLocal(const std::string& ns, const std::string& name,
                                              const std::string& id) {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  const fs::path parent = ActorDir(local_root_, ns, name);
  const fs::path partial = PartialDir(local_root_, ns, name, id);
  std::error_code ec;
  if (fs::exists(parent / id, ec)) {
    return Status(Code::kAlreadyExists, "snapshot " + (parent / id).string() + " already exists");
  }
  fs::create_directories(parent, ec);
  if (ec)
    return Status(Code::kFailedPrecondition, "create " + parent.string() + ": " + ec.message(),
                  kIoError);
  // A leftover of an earlier attempt: runsc refuses to write over an image.
  fs::remove_all(partial, ec);
  if (!ec) fs::create_directory(partial, ec);
  if (ec)
    return Status(Code::kFailedPrecondition, "create " + partial.string() + ": " + ec.message(),
                  kIoError);
  return partial.string();
}

Result<SnapshotManifest> SnapshotStore::CompleteLocal(SnapshotManifest manifest, Durability durability) {
  const bool sync_now = durability == Durability::kSynced;
  const auto start = clock_.Now();
  if (Status s = CheckNames(manifest.ns, manifest.name, manifest.id); !s.ok()) return s;
  const fs::path partial = PartialDir(local_root_, manifest.ns, manifest.name, manifest.id);
  const fs::path complete = SnapshotDir(local_root_, manifest.ns, manifest.name, manifest.id);
  if (Status s = CheckCompletable(partial, complete); !s.ok()) return s;
  auto files = RegularFilesUnder(partial, kManifestFile);  // the manifest is rewritten
  if (!files.ok()) return files.status();

  manifest.files.clear();
  manifest.total_bytes = 0;
  manifest.format = kManifestFormatChunked;
  manifest.chunk_bytes = kDefaultChunkBytes;
  manifest.deferred_sync_boot_id = sync_now ? "" : boot_id_;
  // A deferred Full image is not read here at all: its checksums come in the background job.
  manifest.checksums_pending = durability == Durability::kDeferred && manifest.scope == "Full";
  if (Status s = DescribeFiles(partial, *files, sync_now, digest_threads_, manifest); !s.ok()) return s;
  // Microseconds: snapshots listed oldest first stay in the order they were taken when two fall
  // in one second (the id's own timestamp has seconds, its suffix is random).
  if (manifest.taken_at.empty()) manifest.taken_at = FormatMicroTime(clock_.WallNow());
  if (Status s = Seal(partial, complete, *files, manifest, sync_now); !s.ok()) return s;
  if (durability == Durability::kDeferred) EnqueueDeferred(complete, *files);
  spdlog::info(
      "component=snapshots op=complete actor={}/{} snapshot={} files={} bytes={} sync={} duration_ms={}",
      manifest.ns, manifest.name, manifest.id, manifest.files.size(), manifest.total_bytes,
      SyncWhen(durability), MillisSince(start));
  return manifest;
}

Result<SnapshotManifest> SnapshotStore::CheckLocalForRestore(const std::string& ns,
                                                             const std::string& name,
                                                             const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  const fs::path dir = LocalPath(ns, name, id);
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  const bool maybe_lost = !manifest->deferred_sync_boot_id.empty() &&
                          (manifest->deferred_sync_boot_id != boot_id_ || deferred_->Failed(dir.string()));
  if (!maybe_lost) return manifest;
  spdlog::info("component=snapshots op=verify actor={}/{} snapshot={} why=\"{}\"", ns, name, id,
               manifest->deferred_sync_boot_id != boot_id_ ? "completed before a reboot, before it was synced"
                                                           : "its background fsync failed");
  return VerifySnapshotDir(dir, ns, name, id, digest_threads_);
}

Result<SnapshotManifest> SnapshotStore::VerifyLocal(const std::string& ns, const std::string& name,
                                                    const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  return VerifySnapshotDir(LocalPath(ns, name, id), ns, name, id, digest_threads_);
}

std::vector<SnapshotManifest> SnapshotStore::ListLocal(const std::string& ns,
                                                       const std::string& name) const {
  return ListSnapshots(local_root_, ns, name);
}

Status SnapshotStore::RemoveLocal(const std::string& ns, const std::string& name,
                                  const std::string& id) {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  return RemoveSnapshotDir(ActorDir(local_root_, ns, name), id);
}

Status SnapshotStore::RemoveAllLocal(const std::string& ns, const std::string& name) {
  if (Status s = CheckNames(ns, name); !s.ok()) return s;
  return RemoveActorDir(ActorDir(local_root_, ns, name));
}

std::vector<std::pair<std::string, std::string>> SnapshotStore::LocalActors() const {
  return ActorsUnder(local_root_);
}

}  // namespace stasis
