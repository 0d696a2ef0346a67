// Where committed snapshots live — the store a suspended actor's snapshot goes to, and a
// resume on any node reads from. SnapshotStore owns the node-local snapshots and everything
// about them (completion, pending checksums, format upgrades); it hands a backend a complete,
// checked local snapshot to keep, and asks it for a directory runsc may restore from.
//
// Backends: FilesystemBackend (filesystem_backend.h: a directory, possibly a shared
// filesystem mounted on every node) and ObjectStoreBackend (object_store_backend.h: S3).
// Every backend keeps these invariants:
//  - a snapshot is committed only once every byte the backend took is checked against the
//    manifest and the manifest is in place last: a crash mid-put leaves nothing that looks
//    committed;
//  - Fetch returns a directory whose every chunk was verified against the manifest after the
//    backend last let anyone else write it;
//  - namespaces, names and ids reach a backend already checked (snapshot_names.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "snapshots/manifest.h"

namespace stasis {

class CommittedBackend {
 public:
  virtual ~CommittedBackend() = default;

  // Where snapshot `id` is kept, for status and logs (latestSnapshot.location; information
  // only, never read back).
  virtual std::string Location(const std::string& ns, const std::string& name, const std::string& id) const = 0;

  struct PutOutcome {
    SnapshotManifest manifest;
    std::string how;  // for the log: "linked", "copied", "already_committed"
  };
  // Keeps the complete local snapshot in `source` (its manifest `m`, names, paths and chunks
  // checked). `just_completed`: SnapshotStore hashed these very files in this same step, so a
  // backend that shares them (a hard link) need not read them again. A snapshot committed
  // before (a crash between the commit and the status write) is verified and kept.
  virtual Result<PutOutcome> Put(const std::filesystem::path& source, const SnapshotManifest& m,
                                 bool just_completed) = 0;

  struct Fetched {
    std::string dir;
    SnapshotManifest manifest;
    // While any copy of it lives, `dir` is not evicted from a bounded download cache: keep it
    // until whatever reads `dir` (runsc restore) has opened its files. Null when the backend
    // has no cache to evict from.
    std::shared_ptr<const void> in_use;
  };
  // A directory holding committed snapshot `id`, every chunk verified (snapshot_corrupt on a
  // mismatch, nothing removed; snapshot_not_found when there is none).
  virtual Result<Fetched> Fetch(const std::string& ns, const std::string& name, const std::string& id) const = 0;

  // Complete snapshots of one actor, oldest first by taken_at (manifests read, not verified).
  virtual std::vector<SnapshotManifest> List(const std::string& ns, const std::string& name) const = 0;
  // Whether committed snapshot `id` exists (its manifest is there); an error when the store
  // cannot tell (unreachable), which List would report as "no snapshots".
  virtual Result<bool> Has(const std::string& ns, const std::string& name, const std::string& id) const = 0;
  virtual Status Remove(const std::string& ns, const std::string& name, const std::string& id) = 0;
  // Whether a snapshot can be put now (store_not_writable with the reason when not).
  virtual Status CheckWritable() const = 0;
  // Removes what a crash mid-put left; returns how many.
  virtual Result<int> RemoveLeftovers() = 0;
  // The backend's directory on this node, for classifying host errors; "" when it has none.
  virtual std::string LocalRoot() const = 0;
  // Threads that hash (and copy or transfer) chunks; 0: every CPU this process may use.
  virtual void SetDigestThreads(int threads) = 0;
  // Whether a Put writes its own copy of every byte of a snapshot under `local_root` (an
  // upload; a copy onto another file system) rather than taking the local files themselves
  // (hard links): then the local files' fsyncs do nothing for the committed snapshot.
  virtual bool CommitCopies(const std::filesystem::path& local_root) const = 0;
};

}  // namespace stasis
