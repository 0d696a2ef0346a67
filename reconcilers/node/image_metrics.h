// The image metrics of the node agent (docs/metrics.md, "Images"): pulls and their bytes and
// seconds, unpacks, cache lookups, the cache's size and evictions. The image cache reports them
// through images::ImageObserver; label values are small fixed sets, never an image name.
// Every series a rate() is taken of exists from construction on, at zero (as SnapshotMetrics
// says why): each pull result, both lookup results.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "images/image_observer.h"

namespace stasis {

class ImageMetrics final : public images::ImageObserver {
 public:
  explicit ImageMetrics(prometheus::Registry& registry);

  // result: "success" or a pull failure's reason (images/registry_client.h pull_reason, or
  // bad_layer, platform_not_found, unpack_failed): stasis_image_pulls_total{result}; a success
  // also observes stasis_image_pull_seconds and adds stasis_image_pull_bytes_total.
  void Pull(std::string_view result, int64_t bytes, double seconds) override;
  void Unpack(int64_t bytes, double seconds) override;
  void CacheLookup(bool hit) override;
  void CacheBytes(int64_t bytes) override;
  void CacheEviction(int64_t bytes) override;

 private:
  prometheus::Family<prometheus::Counter>& pulls_;
  prometheus::Histogram& pull_seconds_;
  prometheus::Counter& pull_bytes_;
  prometheus::Histogram& unpack_seconds_;
  prometheus::Counter& unpacked_bytes_;
  prometheus::Family<prometheus::Counter>& lookups_;
  prometheus::Gauge& cache_bytes_;
  prometheus::Counter& evictions_;
};

}  // namespace stasis
