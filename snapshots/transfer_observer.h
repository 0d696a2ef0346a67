// What object-store transfers and the download cache (snapshot_cache.h) report, for metrics. The snapshots layer knows nothing of
// Prometheus: the node agent hands S3Client an implementation (SnapshotMetrics) that does.
// Called from transfer threads concurrently: implementations are thread-safe and fast.
#pragma once

#include <cstdint>
#include <string_view>

namespace stasis {

enum class TransferDirection { kUpload, kDownload };

inline constexpr const char* DirectionName(TransferDirection d) {
  return d == TransferDirection::kUpload ? "upload" : "download";
}

class TransferObserver {
 public:
  virtual ~TransferObserver() = default;
  // The bytes one successful request carried: an object or part put, an object got.
  virtual void ObjectBytes(TransferDirection direction, uint64_t bytes) = 0;
  // One snapshot's whole transfer (every chunk and the manifest): its bytes and seconds.
  virtual void SnapshotTransfer(TransferDirection direction, uint64_t bytes, double seconds, bool ok) = 0;
  // A request sent again after a retryable failure; `op` as S3Client names it (put, get, list…).
  virtual void Retry(std::string_view op) = 0;
  // One compressed snapshot's successful upload: its chunks' bytes before compression and as
  // stored (after compression, and encryption where set). Not called for an uncompressed
  // upload, so that fleet-wide ratios are those of compressed snapshots only. A no-op by
  // default, as the cache's below.
  virtual void Compressed(uint64_t /*plain_bytes*/, uint64_t /*stored_bytes*/) {}
  // The download cache's bytes on disk after a pass of its bound, and one copy evicted from it.
  // No-ops by default: a transfer-only observer (a benchmark's) need not care.
  virtual void CacheBytes(uint64_t /*bytes*/) {}
  virtual void CacheEviction(uint64_t /*bytes*/) {}
};

}  // namespace stasis
