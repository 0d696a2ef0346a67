// A snapshot's manifest: what the snapshot is (actor, scope, trigger, runtime, when) and the
// files it is made of (path, size, the sha256 of each fixed-size chunk: chunk_digest.h), stored
// as manifest.json in its directory. The manifest is the mark of completeness: a directory
// without a readable one is no snapshot.
//
// Format 2 (written now) holds chunk digests and one sha256 over the chunk lists, and, for an
// object store's copy, how its chunks are stored (compression, encryption and the key's id:
// store_transform.h; absent means none, as in every manifest written before); format 1
// (read, for snapshots taken before) holds one sha256 per whole file. A manifest of a newer
// format than this code knows is snapshot_corrupt, with the format named.
// Invariants: every path a manifest lists is relative, normal, inside its snapshot and not
// the manifest itself (it is read from disk, and a tampered one must not make the agent hash,
// copy or link outside); a manifest that fails to parse is snapshot_corrupt, never a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"
#include "snapshots/chunk_digest.h"
#include "snapshots/store_transform.h"

namespace stasis {

inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr int kManifestFormatWholeFile = 1;
inline constexpr int kManifestFormatChunked = 2;

struct SnapshotFile {
  std::string path;  // relative to the snapshot directory
  int64_t size = 0;
  // Format 2: the sha256 (lowercase hex) of each of the manifest's chunk_bytes-sized chunks.
  std::vector<std::string> chunks;
  // Format 1: the sha256 of the whole file.
  std::string sha256;
};

// The GPU a CUDA checkpoint was taken on (the node agent's discovery; api/gpu_identity.h says
// what a restore compares), and the UUIDs of its devices, which a restore onto other GPUs of the
// same model maps from.
struct SnapshotGpu {
  std::string model;
  std::string driver_version;
  std::string cuda_version;
  std::vector<std::string> devices;
  bool operator==(const SnapshotGpu&) const = default;
};

struct SnapshotManifest {
  int format = kManifestFormatChunked;
  int64_t chunk_bytes = kDefaultChunkBytes;  // format 2
  // Format 2: sha256 over every file's path, size and chunk digests (ChunkListSha256): one
  // digest that names the image's content.
  std::string chunk_list_sha256;
  std::string id;
  std::string ns, name;  // the actor
  // The actor's metadata.uid when the snapshot was taken: a restore into an actor of the same
  // name but another life (deleted and created again) is refused. Empty in manifests written
  // before it was recorded (accepted, with a log line: snapshot_store.h).
  std::string owner_uid;
  std::string scope;     // "Full" | "Data"
  std::string trigger;   // "Pause" | "Suspend"
  std::string runtime_version;
  // An actor from an OCI image: the manifest digest ("sha256:…") of the image whose root
  // filesystem the snapshot was taken on (a restore needs that same root filesystem). Empty for
  // a bundle actor, and in manifests written before it was recorded; written only when set.
  std::string image_digest;
  bool cuda_checkpointed = false;
  // The actor asked for the GPU fast path (spec.gpu.fastSnapshot) when this checkpoint was
  // taken: the request, not what the checkpoint did (the workload's log has one line per stage
  // from the fast-snapshot library, staged or fallback). Written only when set; absent in
  // manifests written before it was recorded, which read as false.
  bool gpu_fast_snapshot = false;
  // Written only when set: with a CUDA checkpoint taken on a GPU whose identity was known.
  SnapshotGpu gpu;
  // RFC 3339, with microseconds since they order snapshots (older manifests: whole seconds).
  std::string taken_at;
  double duration_seconds = 0;  // of the checkpoint that made it
  std::vector<SnapshotFile> files;
  int64_t total_bytes = 0;
  // Durability::kDeferred and kUntilCommit: the boot (/proc/sys/kernel/random/boot_id) it was
  // completed in, before its bytes were on disk. Empty: everything was fsynced before it was
  // complete.
  std::string deferred_sync_boot_id;
  // Durability::kDeferred, scope Full: the files' digests are not computed yet (files[].chunks
  // empty); the background job fills them in.
  bool checksums_pending = false;
  // An object store's copy (format 2): how each chunk object is encoded (chunk_codec.h), and the
  // id of the key it was encrypted with (encryption_key.h; never the key). Chunk digests are
  // always of the plaintext.
  Compression compression = Compression::kNone;
  Encryption encryption = Encryption::kNone;
  std::string key_id;
};

// manifest.json's text, in m.format.
std::string ManifestText(const SnapshotManifest& m);

// The sha256 over the chunk lists: for each file in order, "<path>\n<size>\n" and one
// "<chunk sha256>\n" per chunk.
std::string ChunkListSha256(const std::vector<SnapshotFile>& files);

// Sets every file's chunks from `digests` (in the same order), the sizes, total_bytes and
// chunk_list_sha256; the manifest becomes format 2.
void SetChunkDigests(SnapshotManifest& m, const std::vector<ChunkedDigest>& digests);

// snapshot_corrupt: chunk `index` of `f` hashed to `got`, not to the manifest's digest; the
// chunk and its bytes named. `where` names the snapshot (a directory, a store location).
Status ChunkMismatchError(const std::string& where, const SnapshotManifest& m, const SnapshotFile& f, size_t index,
                          const std::string& got);

// snapshot_corrupt unless the file on disk (its `digest`) is the one the manifest lists:
// same size, same chunks (format 2) — the first chunk that differs is named with its bytes.
Status CheckFileDigest(const std::filesystem::path& dir, const SnapshotManifest& m, const SnapshotFile& f,
                       const ChunkedDigest& digest);

// The manifest of the snapshot in `dir`: kNotFound snapshot_not_found when `dir` does not
// exist, kFailedPrecondition snapshot_corrupt when its manifest is missing or invalid.
Result<SnapshotManifest> ReadManifest(const std::filesystem::path& dir);

// A manifest from its text (an object store's copy); `where` names it in errors
// (kFailedPrecondition snapshot_corrupt when it does not parse).
Result<SnapshotManifest> ParseManifest(const std::string& text, const std::string& where);

// snapshot_corrupt unless a format-2 manifest agrees with itself: a chunk size within bounds,
// as many well-formed chunk digests as each file's size needs, chunkListSha256 matching. `dir`
// names the snapshot in the message.
Status CheckChunkLayout(const std::filesystem::path& dir, const SnapshotManifest& m);

// Writes `m` as a new <dir>/manifest.json (removing an old one first), synced if `sync`.
Status WriteManifest(const std::filesystem::path& dir, const SnapshotManifest& m, bool sync);

// Rewrites <dir>/manifest.json: a new file, synced, renamed over the old, so that a reader
// sees one or the other.
Status ReplaceManifest(const std::filesystem::path& dir, const SnapshotManifest& m);

// kFailedPrecondition snapshot_corrupt: "snapshot <dir>: <why>".
Status SnapshotCorruptError(const std::filesystem::path& dir, const std::string& why);

// snapshot_corrupt unless the manifest names this actor and snapshot.
Status CheckManifestNames(const std::filesystem::path& dir, const SnapshotManifest& m,
                          const std::string& ns, const std::string& name, const std::string& id);

// snapshot_corrupt unless every path the manifest lists is safe (see the invariants above).
Status CheckManifestPaths(const std::filesystem::path& dir, const SnapshotManifest& m);

// Reads the snapshot in `dir` and checks every file its manifest lists: present, same size,
// same digests, adding up to totalBytes. One whose checksums were never computed is
// unverifiable (snapshot_corrupt). Format 2 is hashed chunk by chunk on up to `threads`
// threads (0: every CPU this process may use); format 1 file by file (a whole-file sha256 is
// sequential).
Result<SnapshotManifest> VerifySnapshotDir(const std::filesystem::path& dir, const std::string& ns,
                                           const std::string& name, const std::string& id,
                                           int threads = 0);

// snapshot_owner_mismatch unless the manifest was written for the actor with `uid`. A manifest
// without an owner (written before owners were recorded) passes: the caller logs it.
Status CheckManifestOwner(const std::filesystem::path& dir, const SnapshotManifest& m,
                          const std::string& uid);

}  // namespace stasis
