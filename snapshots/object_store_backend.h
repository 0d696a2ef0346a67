// Committed snapshots in an S3-compatible object store (--snapshot-store s3://bucket/prefix),
// so that a suspended actor resumes on any node:
//   <prefix><ns>/<name>/<id>/chunks/<file index>/<chunk index>   one object per chunk
//   <prefix><ns>/<name>/<id>/manifest.json                       put last
// A snapshot exists in the store only when its manifest object does: a crash or a failure
// mid-put leaves chunk objects without a manifest, which nothing reads as a snapshot.
//
// Each chunk object is the chunk encoded by the agent's codec (chunk_codec.h: optionally zstd,
// optionally AES-256-GCM bound to the chunk's place); the manifest records the transform and
// the key's id, and is itself sealed when the chunks are encrypted (stored_manifest.h), so with
// a key the store holds no plaintext. A reader decodes by the manifest, not by its own flags;
// one whose key is not the snapshot's is refused by name (snapshot_key_mismatch) before any
// chunk is downloaded.
//
// Put reads each chunk of the local snapshot once, checks its sha256 against the manifest,
// encodes and uploads it, `transfers` at a time (memory: one chunk buffer per transfer, 8 MiB
// each, and two more with a codec). Fetch downloads into a node-local cache,
// <cache>/<ns>/<name>/<id>/, each chunk decoded and checked against the manifest as it
// arrives, then renames it complete; runsc restores from there. The cache is the agent's
// own directory and is not fsynced: a complete copy of this boot whose manifest lists the same
// chunks as the store's is used again without a download; one from an earlier boot (a power
// loss may have torn it) is downloaded again. With a bound (SetCacheBound) the cache keeps to
// it, least recently used copies evicted after each download (snapshot_cache.h); a fetched
// copy is held from eviction while the caller keeps Fetched::in_use.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "snapshots/chunk_codec.h"
#include "snapshots/committed_backend.h"
#include "snapshots/s3_client.h"
#include "snapshots/s3_location.h"
#include "snapshots/snapshot_cache.h"

namespace stasis {

class ObjectStoreBackend final : public CommittedBackend {
 public:
  // cache_root: the download cache; "" for none (the controller, which only lists and removes:
  // Fetch is refused).
  // transfers: chunks moved at once; 0 = the CPUs this process may use, at least 2 and at most
  // 16 (each transfer also hashes its chunk; on a small node more only contend). codec: how
  // this agent writes chunks (--snapshot-store-compression, --snapshot-store-encryption-key).
  ObjectStoreBackend(std::unique_ptr<S3Client> client, S3Location location, std::string cache_root,
                     int transfers = 0, ChunkCodec codec = {});

  std::string Location(const std::string& ns, const std::string& name, const std::string& id) const override;
  Result<PutOutcome> Put(const std::filesystem::path& source, const SnapshotManifest& m, bool just_completed) override;
  Result<Fetched> Fetch(const std::string& ns, const std::string& name, const std::string& id) const override;
  std::vector<SnapshotManifest> List(const std::string& ns, const std::string& name) const override;
  Result<bool> Has(const std::string& ns, const std::string& name, const std::string& id) const override;
  Status Remove(const std::string& ns, const std::string& name, const std::string& id) override;
  Status CheckWritable() const override;
  Result<int> RemoveLeftovers() override;
  std::string LocalRoot() const override { return cache_root_; }
  // --snapshot-digest-threads, when set, bounds the transfers too (each hashes its chunk).
  void SetDigestThreads(int threads) override;
  // Every chunk is uploaded.
  bool CommitCopies(const std::filesystem::path& /*local_root*/) const override { return true; }
  // --snapshot-cache-bytes: the download cache's bound (<= 0: unbounded, the default).
  void SetCacheBound(int64_t bytes);

  // The object keys (for tests and GC): the snapshot's prefix, a chunk's, its manifest's.
  std::string SnapshotPrefix(const std::string& ns, const std::string& name, const std::string& id) const;
  static std::string ChunkKey(const std::string& snapshot_prefix, size_t file, int64_t chunk);
  static std::string ManifestKey(const std::string& snapshot_prefix);

 private:
  // The store's manifest of a snapshot (snapshot_not_found when it has none), checked.
  Result<SnapshotManifest> GetManifest(const std::string& ns, const std::string& name, const std::string& id) const;
  // Keeps the snapshot just put from `source` as this node's cached copy (hard links), so that
  // a resume here does not download it; skipped, logged, where links cannot be made.
  void KeepInCache(const std::filesystem::path& source, const SnapshotManifest& m);
  // The manifest of a cached copy in `dir`: it records this boot (see Fetch).
  static Status WriteCachedManifest(const std::filesystem::path& dir, const SnapshotManifest& m);
  Status Download(const std::string& prefix, const SnapshotManifest& m, const std::filesystem::path& partial) const;
  // Where chunk `c` of `m` belongs, as its encryption binds it.
  static ChunkPlace PlaceOf(const SnapshotManifest& m, const ChunkSpan& c);
  // snapshot_corrupt (or the codec's own reason) naming the chunk of `m` that did not decode.
  Status ChunkDecodeError(const SnapshotManifest& m, const ChunkSpan& c, const Status& why) const;
  // Every chunk of `source` encoded and put; the objects' bytes added to *stored_bytes.
  Status UploadChunks(const std::filesystem::path& source, const SnapshotManifest& m, const std::string& prefix,
                      std::atomic<uint64_t>* stored_bytes);
  // One snapshot's transfer since `start`, to the client's observer (metrics) if it has one.
  void ObserveTransfer(TransferDirection d, const SnapshotManifest& m, std::chrono::steady_clock::time_point start,
                       bool ok) const;
  // Deletes every object under `prefix` (best effort after a failed put; a removal's second half).
  Status DeleteUnder(const std::string& prefix) const;

  std::unique_ptr<S3Client> client_;
  S3Location location_;
  std::string cache_root_;
  int transfers_;
  ChunkCodec codec_;
  std::unique_ptr<SnapshotCache> cache_;  // null without a cache root
};

}  // namespace stasis
