#include "reconcilers/node/image_metrics.h"

#include <string>

#include "images/image_reasons.h"
#include "reconcilers/node/snapshot_metrics.h"

namespace stasis {
namespace {

// Every result a pull can end with, created at zero.
constexpr const char* kPullResults[] = {
    "success",
    images::pull_reason::kImageNotFound,
    images::pull_reason::kUnauthorized,
    images::pull_reason::kRegistryUnavailable,
    images::pull_reason::kDigestMismatch,
    images::pull_reason::kBadManifest,
    images::pull_reason::kBadLayer,
    images::pull_reason::kPlatformNotFound,
    images::pull_reason::kUnpackFailed};

}  // namespace

ImageMetrics::ImageMetrics(prometheus::Registry& registry)
    : pulls_(prometheus::BuildCounter()
                 .Name("stasis_image_pulls_total")
                 .Help("Images pulled into the node's cache, by result")
                 .Register(registry)),
      pull_seconds_(prometheus::BuildHistogram()
                        .Name("stasis_image_pull_seconds")
                        .Help("Duration of successful pulls: resolve, fetch, verify and unpack")
                        .Register(registry)
                        .Add({}, DurationBuckets())),
      pull_bytes_(prometheus::BuildCounter()
                      .Name("stasis_image_pull_bytes_total")
                      .Help("Bytes of layers fetched from registries")
                      .Register(registry)
                      .Add({})),
      unpack_seconds_(prometheus::BuildHistogram()
                          .Name("stasis_image_unpack_seconds")
                          .Help("Seconds spent applying one image's layers")
                          .Register(registry)
                          .Add({}, DurationBuckets())),
      unpacked_bytes_(prometheus::BuildCounter()
                          .Name("stasis_image_unpacked_bytes_total")
                          .Help("Bytes of regular files written by unpacking layers")
                          .Register(registry)
                          .Add({})),
      lookups_(prometheus::BuildCounter()
                   .Name("stasis_image_cache_lookups_total")
                   .Help("Starts and restores that found their image unpacked (hit) or pulled it (miss)")
                   .Register(registry)),
      cache_bytes_(prometheus::BuildGauge()
                       .Name("stasis_image_cache_bytes")
                       .Help("Bytes on disk of the node's unpacked images")
                       .Register(registry)
                       .Add({})),
      evictions_(prometheus::BuildCounter()
                     .Name("stasis_image_cache_evictions_total")
                     .Help("Unpacked images removed, least recently used first, to keep --image-cache-bytes")
                     .Register(registry)
                     .Add({})) {
  for (const char* result : kPullResults) pulls_.Add({{"result", result}});
  lookups_.Add({{"result", "hit"}});
  lookups_.Add({{"result", "miss"}});
}

void ImageMetrics::Pull(std::string_view result, int64_t bytes, double seconds) {
  pulls_.Add({{"result", std::string(result)}}).Increment();
  if (result != "success") return;
  pull_seconds_.Observe(seconds);
  pull_bytes_.Increment(static_cast<double>(bytes));
}

void ImageMetrics::Unpack(int64_t bytes, double seconds) {
  unpack_seconds_.Observe(seconds);
  unpacked_bytes_.Increment(static_cast<double>(bytes));
}

void ImageMetrics::CacheLookup(bool hit) { lookups_.Add({{"result", hit ? "hit" : "miss"}}).Increment(); }

void ImageMetrics::CacheBytes(int64_t bytes) { cache_bytes_.Set(static_cast<double>(bytes)); }

void ImageMetrics::CacheEviction(int64_t) { evictions_.Increment(); }

}  // namespace stasis
