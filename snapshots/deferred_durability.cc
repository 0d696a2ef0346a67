#include "snapshots/deferred_durability.h"

#include <fstream>

#include "snapshots/file_io.h"
#include "snapshots/manifest.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kSnapshotCorrupt;
using snapshot_reason::kSnapshotNotFound;

// `s`, or kNotFound when the snapshot in `dir` is gone: a failure because it was removed
// meanwhile is not an error.
Status UnlessRemoved(const fs::path& dir, Status s) {
  std::error_code ec;
  if (fs::exists(dir, ec)) return s;
  return Status(Code::kNotFound, "snapshot " + dir.string() + " removed", kSnapshotNotFound);
}

// Fills in the chunk digests of every file of `m` (now format 2, whatever it was completed
// as); a file whose size changed since completion is corrupt.
Status HashPendingFiles(const fs::path& dir, SnapshotManifest& m, int threads) {
  std::vector<fs::path> paths;
  for (const auto& f : m.files) paths.push_back(dir / f.path);
  auto digests = HashFilesChunked(paths, kDefaultChunkBytes, threads);
  if (!digests.ok()) return UnlessRemoved(dir, digests.status());
  for (size_t i = 0; i < m.files.size(); ++i) {
    if ((*digests)[i].size != m.files[i].size) {
      return Status(Code::kFailedPrecondition,
                    "snapshot " + dir.string() + ": " + m.files[i].path + " has " +
                        std::to_string((*digests)[i].size) + " bytes, " + std::to_string(m.files[i].size) +
                        " when it was completed",
                    kSnapshotCorrupt);
    }
  }
  m.chunk_bytes = kDefaultChunkBytes;
  SetChunkDigests(m, *digests);
  return OkStatus();
}

}  // namespace

std::string ThisBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

Status FillPendingChecksums(const fs::path& dir, int threads) {
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (!manifest->checksums_pending) return OkStatus();
  if (Status s = CheckManifestPaths(dir, *manifest); !s.ok()) return s;
  if (Status s = HashPendingFiles(dir, *manifest, threads); !s.ok()) return s;
  manifest->checksums_pending = false;
  if (Status s = ReplaceManifest(dir, *manifest); !s.ok()) return UnlessRemoved(dir, s);
  return FsyncPath(dir);
}

Status UpgradeToChunked(const fs::path& dir, const std::string& ns, const std::string& name, const std::string& id,
                        int threads) {
  auto manifest = VerifySnapshotDir(dir, ns, name, id, threads);
  if (!manifest.ok()) return manifest.status();
  if (manifest->format == kManifestFormatChunked) return OkStatus();
  if (Status s = HashPendingFiles(dir, *manifest, threads); !s.ok()) return s;
  if (Status s = ReplaceManifest(dir, *manifest); !s.ok()) return s;
  return FsyncPath(dir);
}

bool SnapshotStore::FlushDeferred(std::chrono::milliseconds timeout) { return deferred_->Flush(timeout); }

uint64_t SnapshotStore::deferred_jobs_done() const { return deferred_->synced_jobs(); }

void SnapshotStore::EnqueueDeferred(const fs::path& dir, const std::vector<fs::path>& files) {
  // The fsyncs of kSynced, in the same order, under the final name.
  std::vector<std::string> paths;
  for (const auto& rel : files) paths.push_back((dir / rel).string());
  paths.push_back((dir / kManifestFile).string());
  for (const auto& d : SubdirectoriesOf(files)) paths.push_back((dir / d).string());
  paths.push_back(dir.string());
  paths.push_back(dir.parent_path().string());
  deferred_->Enqueue(dir.string(), std::move(paths), [dir, threads = digest_threads_] { return FillPendingChecksums(dir, threads); });
}

void SnapshotStore::EnqueueDeferred(const fs::path& dir, const SnapshotManifest& m) {
  std::vector<fs::path> files;
  for (const auto& f : m.files) files.emplace_back(f.path);
  EnqueueDeferred(dir, files);
}

int SnapshotStore::ResumePendingChecksums() {
  int queued = 0;
  for (const auto& [ns, name] : LocalActors()) {
    for (const auto& m : ListLocal(ns, name)) {
      if (!m.checksums_pending || m.deferred_sync_boot_id != boot_id_) continue;
      EnqueueDeferred(LocalPath(ns, name, m.id), m);
      ++queued;
    }
  }
  return queued;
}

}  // namespace stasis
