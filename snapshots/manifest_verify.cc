// VerifySnapshotDir: a snapshot read back against its manifest. Format 2 is hashed by chunk on
// every core (chunk_digest.h); format 1 (one sha256 per file) file by file, as it was written.
#include <algorithm>

#include "base/parallel.h"

#include "snapshots/file_io.h"
#include "snapshots/manifest.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Status CheckPresent(const fs::path& dir, const SnapshotFile& f) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(dir / f.path, ec))) {
    return SnapshotCorruptError(dir, f.path + " is missing");
  }
  return OkStatus();
}

// Format 1: one listed file against the disk: present, same size, same sha256.
Status VerifyWholeFile(const fs::path& dir, const SnapshotFile& f) {
  if (Status s = CheckPresent(dir, f); !s.ok()) return s;
  auto digest = HashFile(dir / f.path);
  if (!digest.ok()) return digest.status();
  if (digest->size != f.size) {
    return SnapshotCorruptError(dir, f.path + " has " + std::to_string(digest->size) + " bytes, manifest says " +
                                         std::to_string(f.size));
  }
  if (digest->sha256 != f.sha256) {
    return SnapshotCorruptError(dir, f.path + " sha256 " + digest->sha256 + " does not match the manifest's " +
                                         f.sha256);
  }
  return OkStatus();
}

// Format 1: `threads` files at a time; the first failure in the manifest's order is returned,
// so the answer does not depend on which thread finished first (ParallelFor).
Status VerifyWholeFiles(const fs::path& dir, const std::vector<SnapshotFile>& files, int threads) {
  return ParallelFor(files.size(), threads, [&](size_t i, size_t) { return VerifyWholeFile(dir, files[i]); });
}

Status VerifyChunkedFiles(const fs::path& dir, const SnapshotManifest& m, int threads) {
  if (Status s = CheckChunkLayout(dir, m); !s.ok()) return s;
  std::vector<fs::path> paths;
  for (const auto& f : m.files) {
    if (Status s = CheckPresent(dir, f); !s.ok()) return s;
    paths.push_back(dir / f.path);
  }
  auto digests = HashFilesChunked(paths, m.chunk_bytes, threads);
  if (!digests.ok()) return digests.status();
  for (size_t i = 0; i < m.files.size(); ++i) {
    if (Status s = CheckFileDigest(dir, m, m.files[i], (*digests)[i]); !s.ok()) return s;
  }
  return OkStatus();
}

}  // namespace

Status CheckChunkLayout(const fs::path& dir, const SnapshotManifest& m) {
  if (m.chunk_bytes < kMinChunkBytes || m.chunk_bytes > kMaxChunkBytes) {
    return SnapshotCorruptError(dir, "chunkBytes " + std::to_string(m.chunk_bytes) + " is out of bounds");
  }
  for (const auto& f : m.files) {
    if (static_cast<int64_t>(f.chunks.size()) != ChunkCount(f.size, m.chunk_bytes)) {
      return SnapshotCorruptError(dir, f.path + " lists " + std::to_string(f.chunks.size()) + " chunks, its size needs " +
                                           std::to_string(ChunkCount(f.size, m.chunk_bytes)));
    }
    if (!std::all_of(f.chunks.begin(), f.chunks.end(), IsSha256Hex)) {
      return SnapshotCorruptError(dir, f.path + " lists a chunk digest that is no sha256");
    }
  }
  if (ChunkListSha256(m.files) != m.chunk_list_sha256) {
    return SnapshotCorruptError(dir, "chunkListSha256 does not match the files' chunks");
  }
  return OkStatus();
}

Status ChunkMismatchError(const std::string& where, const SnapshotManifest& m, const SnapshotFile& f, size_t index,
                          const std::string& got) {
  const int64_t begin = static_cast<int64_t>(index) * m.chunk_bytes;
  const int64_t end = std::min(begin + m.chunk_bytes, f.size);
  return SnapshotCorruptError(where, f.path + " sha256 of chunk " + std::to_string(index) + " (bytes " +
                                         std::to_string(begin) + "–" + std::to_string(end - 1) + ") " + got +
                                         " does not match the manifest's " + f.chunks[index]);
}

Status CheckFileDigest(const fs::path& dir, const SnapshotManifest& m, const SnapshotFile& f,
                       const ChunkedDigest& digest) {
  if (digest.size != f.size) {
    return SnapshotCorruptError(dir, f.path + " has " + std::to_string(digest.size) + " bytes, manifest says " +
                                         std::to_string(f.size));
  }
  for (size_t i = 0; i < f.chunks.size(); ++i) {
    const std::string got = i < digest.chunks.size() ? digest.chunks[i] : "";
    if (got != f.chunks[i]) return ChunkMismatchError(dir.string(), m, f, i, got);
  }
  if (digest.chunks.size() != f.chunks.size()) {
    return SnapshotCorruptError(dir, f.path + " has " + std::to_string(digest.chunks.size()) + " chunks, manifest lists " +
                                         std::to_string(f.chunks.size()));
  }
  return OkStatus();
}

Result<SnapshotManifest> VerifySnapshotDir(const fs::path& dir, const std::string& ns, const std::string& name,
                                           const std::string& id, int threads) {
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (Status s = CheckManifestNames(dir, *manifest, ns, name, id); !s.ok()) return s;
  if (manifest->checksums_pending) {
    return SnapshotCorruptError(dir, "its checksums were never computed (completed without them in boot " +
                                         manifest->deferred_sync_boot_id +
                                         "; the node rebooted before they were): unverifiable");
  }
  if (Status s = CheckManifestPaths(dir, *manifest); !s.ok()) return s;
  int64_t total = 0;
  for (const auto& f : manifest->files) total += f.size;
  if (total != manifest->total_bytes) return SnapshotCorruptError(dir, "file sizes do not add up to totalBytes");
  if (manifest->files.empty()) return manifest;
  const Status verified = manifest->format == kManifestFormatWholeFile
                              ? VerifyWholeFiles(dir, manifest->files, threads)
                              : VerifyChunkedFiles(dir, *manifest, threads);
  if (!verified.ok()) return verified;
  return manifest;
}

}  // namespace stasis
