// What pulls, unpacks and the image cache report, for metrics. The images layer knows nothing
// of Prometheus: the node agent hands ImageStore an implementation that does. Thread-safe and
// fast in implementations (pulls of different images run at once).
#pragma once

#include <cstdint>
#include <string_view>

namespace stasis::images {

class ImageObserver {
 public:
  virtual ~ImageObserver() = default;
  // One image made present: the registry's bytes fetched and the seconds spent fetching;
  // `result` is "success" or the failure's reason (registry_client.h pull_reason).
  virtual void Pull(std::string_view result, int64_t bytes, double seconds) = 0;
  // Its layers unpacked: bytes written and seconds.
  virtual void Unpack(int64_t bytes, double seconds) = 0;
  // A start or restore found its image unpacked already (hit) or had to pull it (miss).
  virtual void CacheLookup(bool hit) = 0;
  // The cache's bytes on disk after a change, and one image evicted from it.
  virtual void CacheBytes(int64_t bytes) = 0;
  virtual void CacheEviction(int64_t bytes) = 0;
};

}  // namespace stasis::images
