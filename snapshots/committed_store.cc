// SnapshotStore's committed half: snapshots put into the store (--snapshot-store) from the
// node-local ones, by hard link on one file system or a hashed copy across, every file
// checked against the manifest before the rename that commits it; verified, listed, removed.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "snapshots/chunk_digest.h"
#include "snapshots/deferred_durability.h"
#include "snapshots/file_io.h"
#include "snapshots/snapshot_dirs.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kNoStore;
using snapshot_reason::kSnapshotCorrupt;
using snapshot_reason::kStoreNotWritable;

Status NoStore() {
  return Status(Code::kFailedPrecondition, "no snapshot store configured", kNoStore);
}

// An empty <partial> under <parent>, a leftover of an earlier attempt removed first.
Status MakeEmptyPartial(const fs::path& parent, const fs::path& partial) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (!ec) fs::remove_all(partial, ec);
  if (!ec) fs::create_directory(partial, ec);
  if (ec) {
    return Status(Code::kFailedPrecondition, "create " + partial.string() + ": " + ec.message(),
                  kStoreNotWritable);
  }
  return OkStatus();
}

bool SameFileSystem(const fs::path& a, const fs::path& b) {
  struct stat a_st {}, b_st {};
  return stat(a.c_str(), &a_st) == 0 && stat(b.c_str(), &b_st) == 0 && a_st.st_dev == b_st.st_dev;
}

// Hard-links every file of `m` from `source` into `partial` while links work (`link`, cleared
// for this and every later file the first time one fails); returns the indexes of the files
// that were not linked.
Result<std::vector<size_t>> LinkFiles(const fs::path& source, const fs::path& partial, const SnapshotManifest& m,
                                      bool& link) {
  std::vector<size_t> unlinked;
  for (size_t i = 0; i < m.files.size(); ++i) {
    const fs::path to = partial / m.files[i].path;
    std::error_code ec;
    fs::create_directories(to.parent_path(), ec);
    if (ec) {
      return Status(Code::kFailedPrecondition, "create " + to.parent_path().string() + ": " + ec.message(),
                    kStoreNotWritable);
    }
    if (link && ::link((source / m.files[i].path).c_str(), to.c_str()) == 0) continue;
    if (link) {
      spdlog::info("component=snapshots op=commit actor={}/{} snapshot={} link_failed=\"{}\" action=copy", m.ns,
                   m.name, m.id, std::strerror(errno));
      link = false;
    }
    unlinked.push_back(i);
  }
  return unlinked;
}

// Each of `digests` (of the files `which`) against the manifest.
Status CheckDigests(const fs::path& source, const SnapshotManifest& m, const std::vector<size_t>& which,
                    const std::vector<ChunkedDigest>& digests) {
  for (size_t k = 0; k < which.size(); ++k) {
    if (Status s = CheckFileDigest(source, m, m.files[which[k]], digests[k]); !s.ok()) return s;
  }
  return OkStatus();
}

// Puts every file of `m` from `source` into `partial` — hard links on one file system, else
// copies — and checks what was read against the manifest: the copies (hashed chunk by chunk as
// they are read, on `threads` threads) and the links of files that rested on the node; the
// files CompleteLocal hashed in this same step (`just_completed`) are not read again. A
// kDeferred snapshot's linked files may not be on disk yet: they are fsynced.
Status PutFiles(const fs::path& source, const fs::path& partial, const SnapshotManifest& m, bool just_completed,
                bool& link, int threads) {
  auto unlinked = LinkFiles(source, partial, m, link);
  if (!unlinked.ok()) return unlinked.status();
  std::vector<size_t> linked;
  std::vector<fs::path> linked_paths, from, to;
  for (size_t i = 0, k = 0; i < m.files.size(); ++i) {
    if (k < unlinked->size() && (*unlinked)[k] == i) {
      ++k;
      from.push_back(source / m.files[i].path);
      to.push_back(partial / m.files[i].path);
      continue;
    }
    linked.push_back(i);
    linked_paths.push_back(partial / m.files[i].path);
  }
  if (!just_completed && !linked.empty()) {
    auto digests = HashFilesChunked(linked_paths, m.chunk_bytes, threads);
    if (!digests.ok()) return digests.status();
    if (Status s = CheckDigests(source, m, linked, *digests); !s.ok()) return s;
  }
  if (!m.deferred_sync_boot_id.empty()) {
    for (const auto& p : linked_paths) {
      if (Status s = FsyncPath(p); !s.ok()) return s;
    }
  }
  if (from.empty()) return OkStatus();
  auto copied = CopyFilesChunked(from, to, m.chunk_bytes, threads);
  if (!copied.ok()) return copied.status();
  return CheckDigests(source, m, *unlinked, *copied);
}

// Copies the manifest last, syncs every directory entry, and renames `partial` to `complete`:
// only then is the snapshot committed.
Status SealCommit(const fs::path& source, const fs::path& partial, const fs::path& complete,
                  const SnapshotManifest& m) {
  if (auto copied = CopyFileHashed(source / kManifestFile, partial / kManifestFile); !copied.ok()) {
    return copied.status();
  }
  std::vector<fs::path> files;
  for (const auto& f : m.files) files.emplace_back(f.path);
  for (const auto& d : SubdirectoriesOf(files)) (void)FsyncPath(partial / d);
  if (Status s = FsyncPath(partial); !s.ok()) return s;
  std::error_code ec;
  fs::rename(partial, complete, ec);
  if (ec) return Status(Code::kInternal, "rename " + partial.string() + ": " + ec.message(), kIoError);
  return FsyncPath(complete.parent_path());
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
  if (store_root_.empty()) return fail(NoStore());
  auto local = ReadForCommit(ns, name, id);
  if (!local.ok()) return fail(local.status());

  const fs::path source = LocalPath(ns, name, id);
  const fs::path parent = ActorDir(store_root_, ns, name);
  const fs::path partial = PartialDir(store_root_, ns, name, id);
  const fs::path complete = SnapshotDir(store_root_, ns, name, id);
  std::error_code ec;
  if (fs::exists(complete, ec)) {
    // Committed before (a crash between the rename and the status update): verify, keep.
    auto existing = VerifyCommitted(ns, name, id);
    if (!existing.ok()) return fail(existing.status());
    return existing;
  }
  if (Status s = CheckStoreWritable(); !s.ok()) return fail(s);
  if (Status s = MakeEmptyPartial(parent, partial); !s.ok()) return fail(s);
  // On the node's own file system the store takes the image's files by hard link: no byte is
  // copied. Across file systems every file is copied once, hashed as it is read.
  const bool link_at_start = link_same_fs_ && SameFileSystem(source, partial);
  bool link = link_at_start;
  Status put = PutFiles(source, partial, *local, just_completed, link, digest_threads_);
  if (put.ok()) put = SealCommit(source, partial, complete, *local);
  if (!put.ok()) {
    // A failed commit leaves nothing in the store, not even a partial directory.
    fs::remove_all(partial, ec);
    return fail(std::move(put));
  }
  spdlog::info(
      "component=snapshots op=commit actor={}/{} snapshot={} result=ok bytes={} linked={} duration_ms={}",
      ns, name, id, local->total_bytes, link_at_start && link, MillisSince(start));
  return local;
}

Result<SnapshotManifest> SnapshotStore::VerifyCommitted(const std::string& ns,
                                                        const std::string& name,
                                                        const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (store_root_.empty()) return NoStore();
  return VerifySnapshotDir(StorePath(ns, name, id), ns, name, id, digest_threads_);
}

std::vector<SnapshotManifest> SnapshotStore::ListCommitted(const std::string& ns,
                                                           const std::string& name) const {
  return ListSnapshots(store_root_, ns, name);
}

Status SnapshotStore::RemoveCommitted(const std::string& ns, const std::string& name,
                                      const std::string& id) {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (store_root_.empty()) return NoStore();
  return RemoveSnapshotDir(ActorDir(store_root_, ns, name), id);
}

Status SnapshotStore::CheckStoreWritable() const {
  if (store_root_.empty()) return NoStore();
  auto not_writable = [&](const std::string& why) {
    return Status(Code::kFailedPrecondition,
                  "snapshot store " + store_root_ + " is not writable: " + why, kStoreNotWritable);
  };
  std::error_code ec;
  if (!fs::is_directory(store_root_, ec)) {
    return not_writable(fs::exists(store_root_, ec) ? "not a directory" : "does not exist");
  }
  // Root passes permission bits, so only a real create/write/sync/unlink tells (read-only
  // mounts, immutable directories, full or broken shared filesystems).
  const fs::path probe =
      fs::path(store_root_) / (".stasis-write-check-" + std::to_string(getpid()) + "-" +
                               std::to_string(std::random_device{}()));
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return not_writable(Errno("create " + probe.filename().string()));
  const bool wrote = write(fd, "x", 1) == 1 && fsync(fd) == 0;
  const std::string write_error = wrote ? "" : Errno("write " + probe.filename().string());
  close(fd);
  if (unlink(probe.c_str()) != 0) return not_writable(Errno("unlink " + probe.filename().string()));
  if (!wrote) return not_writable(write_error);
  return OkStatus();
}

}  // namespace stasis
