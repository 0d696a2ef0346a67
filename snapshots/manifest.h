// A snapshot's manifest: what the snapshot is (actor, scope, trigger, runtime, when) and the
// files it is made of (path, size, sha256), stored as manifest.json in its directory. The
// manifest is the mark of completeness: a directory without a readable one is no snapshot.
// Invariants: every path a manifest lists is relative, normal, inside its snapshot and not
// the manifest itself (it is read from disk, and a tampered one must not make the agent hash,
// copy or link outside); a manifest that fails to parse is snapshot_corrupt, never a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

inline constexpr char kManifestFile[] = "manifest.json";

struct SnapshotFile {
  std::string path;  // relative to the snapshot directory
  int64_t size = 0;
  std::string sha256;  // lowercase hex
};

struct SnapshotManifest {
  std::string id;
  std::string ns, name;  // the actor
  // The actor's metadata.uid when the snapshot was taken: a restore into an actor of the same
  // name but another life (deleted and created again) is refused. Empty in manifests written
  // before it was recorded (accepted, with a log line: snapshot_store.h).
  std::string owner_uid;
  std::string scope;     // "Full" | "Data"
  std::string trigger;   // "Pause" | "Suspend"
  std::string runtime_version;
  bool cuda_checkpointed = false;
  std::string taken_at;  // RFC 3339
  double duration_seconds = 0;  // of the checkpoint that made it
  std::vector<SnapshotFile> files;
  int64_t total_bytes = 0;
  // Durability::kDeferred: the boot (/proc/sys/kernel/random/boot_id) it was completed in,
  // before its bytes were on disk. Empty: everything was fsynced before it was complete.
  std::string deferred_sync_boot_id;
  // Durability::kDeferred, scope Full: the files' sha256 are not computed yet (files[].sha256
  // empty); the background job fills them in.
  bool checksums_pending = false;
};

// manifest.json's text (format version 1).
std::string ManifestText(const SnapshotManifest& m);

// The manifest of the snapshot in `dir`: kNotFound snapshot_not_found when `dir` does not
// exist, kFailedPrecondition snapshot_corrupt when its manifest is missing or invalid.
Result<SnapshotManifest> ReadManifest(const std::filesystem::path& dir);

// Writes `m` as a new <dir>/manifest.json (removing an old one first), synced if `sync`.
Status WriteManifest(const std::filesystem::path& dir, const SnapshotManifest& m, bool sync);

// Rewrites <dir>/manifest.json: a new file, synced, renamed over the old, so that a reader
// sees one or the other.
Status ReplaceManifest(const std::filesystem::path& dir, const SnapshotManifest& m);

// snapshot_corrupt unless the manifest names this actor and snapshot.
Status CheckManifestNames(const std::filesystem::path& dir, const SnapshotManifest& m,
                          const std::string& ns, const std::string& name, const std::string& id);

// snapshot_corrupt unless every path the manifest lists is safe (see the invariants above).
Status CheckManifestPaths(const std::filesystem::path& dir, const SnapshotManifest& m);

// Reads the snapshot in `dir` and checks every file its manifest lists: present, same size,
// same sha256, adding up to totalBytes. One whose checksums were never computed is
// unverifiable (snapshot_corrupt). The files are hashed on up to `threads` threads at once
// (one file per thread: sha256 of one file is sequential, and the kernel's read-ahead already
// overlaps each file's reads with its hashing).
Result<SnapshotManifest> VerifySnapshotDir(const std::filesystem::path& dir, const std::string& ns,
                                           const std::string& name, const std::string& id,
                                           int threads = 4);

// snapshot_owner_mismatch unless the manifest was written for the actor with `uid`. A manifest
// without an owner (written before owners were recorded) passes: the caller logs it.
Status CheckManifestOwner(const std::filesystem::path& dir, const SnapshotManifest& m,
                          const std::string& uid);

}  // namespace stasis
