// Snapshots on disk, so that a snapshot that is not complete can never be mistaken for one
// that is. Node-local snapshots live under <root>/snapshots/<namespace>/<name>/<id>/; the
// snapshot store (a directory, possibly a shared filesystem mounted on every node) under
// <store>/<namespace>/<name>/<id>/.
//
// Invariants:
//  - A snapshot is written into <id>.partial/ and renamed to <id>/ only after its manifest
//    (files, sizes, sha256, scope, trigger, runtime version, cuda flag) is written. With
//    Durability::kSynced everything is fsynced before the rename. With kDeferred (a Pause:
//    the status write need not wait for the disk) the fsyncs run in the background after it,
//    and the manifest records the boot it was written in: only a reboot can lose what the
//    page cache held (a crashed or killed agent cannot), so a restore of a deferred snapshot
//    from an earlier boot, or one whose background fsync failed, verifies every checksum first.
//    A deferred Full snapshot's checksums are computed in the background too, before its
//    fsyncs (its manifest says checksumsPending until then, and is rewritten, synced, with
//    them): on the boot it was written in, nothing reads it but runsc, which would not look
//    at a checksum; what needs them — a commit to the store, a restore after a reboot — waits
//    for them, computes them, or (a reboot came first) refuses the snapshot as unverifiable.
//    kUntilCommit (a Suspend into a store that writes its own copy of every byte: an object
//    store, a directory on another file system) hashes as kSynced does but syncs nothing and
//    records the boot as kDeferred does: the store's copy is the one that must be durable, and
//    the local one is removed once it is. A commit of it that fails queues kDeferred's fsyncs,
//    and the snapshot rests on the node as a pause's would.
//  - A committed snapshot is handed to the store's backend (committed_backend.h) only complete,
//    with every checksum and in the current manifest format; the backend checks every byte it
//    takes against the manifest and puts the manifest last (a directory store: as <id>.partial/
//    by hard link or a hashed copy, then renamed; filesystem_backend.h); only then is it
//    returned as committed.
//  - *.partial directories are leftovers of a crash and are removed at start-up.
//  - Namespaces, names and ids are checked (DNS-1123 / our id alphabet) before they become
//    path components; no path escapes its root.
//
// The class is the one face of the snapshots on disk; its parts live by job: the node-local
// half in local_store.cc, the committed half in committed_store.cc (on a CommittedBackend), kDeferred's background
// work in deferred_durability.cc, on top of manifest.h, file_io.h, snapshot_names.h and
// snapshot_dirs.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "snapshots/committed_backend.h"
#include "snapshots/deferred_sync.h"
#include "snapshots/manifest.h"
#include "snapshots/snapshot_names.h"

namespace stasis {

enum class Durability {
  kSynced,       // fsynced before CompleteLocal returns
  kDeferred,     // fsynced in the background after it returns (see the invariants above)
  kUntilCommit,  // hashed, not fsynced: a failed commit queues the fsyncs (the invariants above)
};

class SnapshotStore {
 public:
  // local_root: <root>/snapshots; store_root: --snapshot-store (may be empty: no store).
  // link_same_fs: commit by hard link when both are on one file system (false: always copy).
  // boot_id: this machine's boot; "" reads /proc/sys/kernel/random/boot_id (tests pass one to
  // play a reboot). clock: the wall time a manifest completed without taken_at records, and
  // the durations logged.
  SnapshotStore(std::string local_root, std::string store_root, bool link_same_fs = true,
                std::string boot_id = "", Clock& clock = RealClock::Get());
  // The same with any backend for committed snapshots (nullptr: no store).
  SnapshotStore(std::string local_root, std::unique_ptr<CommittedBackend> committed, std::string boot_id = "",
                Clock& clock = RealClock::Get());

  // Creates an empty <local>/<ns>/<name>/<id>.partial/ and returns its path.
  Result<std::string> BeginLocal(const std::string& ns, const std::string& name,
                                 const std::string& id);
  // Hashes every file in the partial directory, writes manifest.json, renames the directory
  // to <id>/. kSynced: the files are fsynced meanwhile in a second thread, the manifest and the
  // directories before and after the rename. kDeferred: the same fsyncs are queued after the
  // rename — and for scope Full the hashing too (checksums_pending; a Data snapshot is hashed
  // here: every restore of one verifies it). kUntilCommit: hashed here, no fsync (Commit queues
  // them if it fails). `manifest.files` and `total_bytes` are filled in.
  Result<SnapshotManifest> CompleteLocal(SnapshotManifest manifest,
                                         Durability durability = Durability::kSynced);
  // A complete local snapshot as a restore may trust it without reading it: one completed with
  // kDeferred in an earlier boot, or whose background job failed, is verified first
  // (kFailedPrecondition "snapshot_corrupt" when it does not match its manifest, or has no
  // checksums to match: unverifiable).
  Result<SnapshotManifest> CheckLocalForRestore(const std::string& ns, const std::string& name,
                                                const std::string& id) const;
  // The image directory a restore of snapshot `id` reads, and its manifest, checked before
  // anything reads it. The directory is derived here from the names — the store's copy when
  // `committed`, else this node's — never taken from the actor's status (whoever can write
  // the status could otherwise make the node restore any directory); `id` must be a snapshot
  // id (no '/', no ".."). The manifest must name this actor and, when it records one, the
  // actor's `owner_uid` (snapshot_owner_mismatch: an earlier actor of the same name; an old
  // manifest without one is accepted and logged). A committed snapshot has every checksum
  // verified (snapshot_corrupt on a mismatch, nothing removed); a local one when `verify_local`
  // (a Data snapshot: always), else as CheckLocalForRestore says.
  struct RestoreSource {
    std::string dir;
    SnapshotManifest manifest;
    // Keeps a cached copy in `dir` from eviction while held: until the restore has opened it.
    std::shared_ptr<const void> in_use;
  };
  Result<RestoreSource> CheckForRestore(const std::string& ns, const std::string& name,
                                        const std::string& id, bool committed,
                                        const std::string& owner_uid, bool verify_local = false) const;
  // Waits until the background jobs (checksums, fsyncs) queued so far are done; false on timeout.
  bool FlushDeferred(std::chrono::milliseconds timeout);
  // How many background jobs have run to their end (tests read what was queued from it).
  uint64_t deferred_jobs_done() const;
  // Queues the checksums (and fsyncs) of local snapshots of this boot whose manifest still
  // says checksumsPending: an agent stopped before its background job ran. Returns how many.
  int ResumePendingChecksums();
  // Puts a complete local snapshot into the store (hard links on one file system, else a copy
  // hashed as it is read), checks every file against the manifest, renames. `just_completed`:
  // the caller completed it in this same step (CompleteLocal hashed these very files), so a
  // hard-linked file is not read again; a copy is always hashed. Either way every file is on
  // disk in the store before the rename (a hard link of a kDeferred file is fsynced).
  // A failed commit of a snapshot completed in this boot without its fsyncs (kUntilCommit)
  // queues them: the snapshot stays on the node, as durable as a pause's.
  Result<SnapshotManifest> Commit(const std::string& ns, const std::string& name,
                                  const std::string& id, bool just_completed = false);
  // How a Suspend's snapshot is completed before its commit: kUntilCommit where the store
  // writes its own copy of every byte (CommittedBackend::CommitCopies), else kSynced — a
  // directory store on this file system takes the local files themselves, by hard link.
  Durability SuspendDurability() const;
  // Reads and verifies a complete snapshot (local or committed) against its manifest.
  Result<SnapshotManifest> VerifyLocal(const std::string& ns, const std::string& name,
                                       const std::string& id) const;
  Result<SnapshotManifest> VerifyCommitted(const std::string& ns, const std::string& name,
                                           const std::string& id) const;

  std::string LocalPath(const std::string& ns, const std::string& name, const std::string& id) const;
  std::string StorePath(const std::string& ns, const std::string& name, const std::string& id) const;

  // Complete snapshots (manifest present), oldest first by taken_at.
  std::vector<SnapshotManifest> ListLocal(const std::string& ns, const std::string& name) const;
  std::vector<SnapshotManifest> ListCommitted(const std::string& ns, const std::string& name) const;
  // Whether committed snapshot `id` exists; an error (never false) when the store cannot tell.
  Result<bool> HasCommitted(const std::string& ns, const std::string& name, const std::string& id) const;

  Status RemoveLocal(const std::string& ns, const std::string& name, const std::string& id);
  Status RemoveCommitted(const std::string& ns, const std::string& name, const std::string& id);
  // Removes everything of one actor on this node (deletion); the store is left to retention.
  Status RemoveAllLocal(const std::string& ns, const std::string& name);
  // The actors (namespace, name) that have a directory under the local root.
  std::vector<std::pair<std::string, std::string>> LocalActors() const;
  // Removes every *.partial directory under both roots; returns how many.
  Result<int> RemovePartials();

  // How many threads hash, copy and verify a snapshot's chunks (0, the default: every CPU this
  // process may use).
  void set_digest_threads(int threads);

  // Whether the store exists and a file can be created and removed in it.
  Status CheckStoreWritable() const;

  const std::string& local_root() const { return local_root_; }
  // The store's directory on this node ("" when it has none: no store, or not a directory).
  std::string store_root() const { return committed_ ? committed_->LocalRoot() : ""; }

 private:
  std::string local_root_;
  std::unique_ptr<CommittedBackend> committed_;  // nullptr: no store
  int digest_threads_ = 0;
  std::string boot_id_;
  Clock& clock_;
  std::unique_ptr<DeferredSync> deferred_;  // kDeferred's background checksums and fsyncs
  // The background job of a kDeferred snapshot in `dir`: checksums if pending, then fsyncs.
  // `files` are relative to `dir`; they, the manifest, their subdirectories, `dir` and its
  // parent are fsynced after the checksums.
  void EnqueueDeferred(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& files);
  // The same for every file `m` lists.
  void EnqueueDeferred(const std::filesystem::path& dir, const SnapshotManifest& m);
  // The local manifest of a snapshot about to be committed, its checksums computed if they
  // are still pending, its names and paths checked.
  Result<SnapshotManifest> ReadForCommit(const std::string& ns, const std::string& name,
                                         const std::string& id);
  // Milliseconds on clock_ since `start`, for the logs.
  long long MillisSince(Clock::TimePoint start) const;
};

}  // namespace stasis
