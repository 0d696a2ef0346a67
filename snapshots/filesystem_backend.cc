#include "snapshots/filesystem_backend.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "snapshots/chunk_digest.h"
#include "snapshots/file_io.h"
#include "snapshots/snapshot_dirs.h"
#include "snapshots/snapshot_names.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kStoreNotWritable;

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

FilesystemBackend::FilesystemBackend(std::string root, bool link_same_fs)
    : root_(std::move(root)), link_same_fs_(link_same_fs) {}

bool FilesystemBackend::CommitCopies(const fs::path& local_root) const {
  if (!link_same_fs_) return true;
  std::error_code ec;
  // Either not there yet: a link may come, so the local files must be durable themselves.
  if (!fs::exists(local_root, ec) || !fs::exists(root_, ec)) return false;
  return !SameFileSystem(local_root, root_);
}

std::string FilesystemBackend::Location(const std::string& ns, const std::string& name, const std::string& id) const {
  return SnapshotDir(root_, ns, name, id).string();
}

Result<CommittedBackend::PutOutcome> FilesystemBackend::Put(const fs::path& source, const SnapshotManifest& m,
                                                            bool just_completed) {
  const fs::path parent = ActorDir(root_, m.ns, m.name);
  const fs::path partial = PartialDir(root_, m.ns, m.name, m.id);
  const fs::path complete = SnapshotDir(root_, m.ns, m.name, m.id);
  std::error_code ec;
  if (fs::exists(complete, ec)) {
    auto existing = Fetch(m.ns, m.name, m.id);
    if (!existing.ok()) return existing.status();
    return PutOutcome{std::move(existing->manifest), "already_committed"};
  }
  if (Status s = CheckWritable(); !s.ok()) return s;
  if (Status s = MakeEmptyPartial(parent, partial); !s.ok()) return s;
  // On the node's own file system the store takes the image's files by hard link: no byte is
  // copied. Across file systems every chunk is copied once, hashed as it is read.
  bool link = link_same_fs_ && SameFileSystem(source, partial);
  const bool link_at_start = link;
  Status put = PutFiles(source, partial, m, just_completed, link, digest_threads_);
  if (put.ok()) put = SealCommit(source, partial, complete, m);
  if (!put.ok()) {
    // A failed commit leaves nothing in the store, not even a partial directory.
    fs::remove_all(partial, ec);
    return put;
  }
  return PutOutcome{m, link_at_start && link ? "linked" : "copied"};
}

Result<CommittedBackend::Fetched> FilesystemBackend::Fetch(const std::string& ns, const std::string& name,
                                                           const std::string& id) const {
  const std::string dir = Location(ns, name, id);
  auto manifest = VerifySnapshotDir(dir, ns, name, id, digest_threads_);
  if (!manifest.ok()) return manifest.status();
  return Fetched{dir, std::move(*manifest), nullptr};
}

std::vector<SnapshotManifest> FilesystemBackend::List(const std::string& ns, const std::string& name) const {
  return ListSnapshots(root_, ns, name);
}

Result<bool> FilesystemBackend::Has(const std::string& ns, const std::string& name, const std::string& id) const {
  std::error_code ec;
  // A store that is not mounted (or not reachable) cannot say a snapshot is gone.
  if (!fs::is_directory(root_, ec)) {
    return Status(Code::kUnavailable, "snapshot store " + root_ + " is not a directory" + (ec ? ": " + ec.message() : ""));
  }
  const bool found = fs::exists(ActorDir(root_, ns, name) / id / kManifestFile, ec);
  if (ec) return Status(Code::kUnavailable, "snapshot store " + root_ + ": " + ec.message());
  return found;
}

Status FilesystemBackend::Remove(const std::string& ns, const std::string& name, const std::string& id) {
  return RemoveSnapshotDir(ActorDir(root_, ns, name), id);
}

Result<int> FilesystemBackend::RemoveLeftovers() { return RemovePartialsUnder(root_); }

Status FilesystemBackend::CheckWritable() const {
  auto not_writable = [&](const std::string& why) {
    return Status(Code::kFailedPrecondition,
                  "snapshot store " + root_ + " is not writable: " + why, kStoreNotWritable);
  };
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) {
    return not_writable(fs::exists(root_, ec) ? "not a directory" : "does not exist");
  }
  // Root passes permission bits, so only a real create/write/sync/unlink tells (read-only
  // mounts, immutable directories, full or broken shared filesystems).
  const fs::path probe =
      fs::path(root_) / (".stasis-write-check-" + std::to_string(getpid()) + "-" +
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
