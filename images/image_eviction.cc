#include "images/image_eviction.h"

#include <algorithm>

namespace stasis::images {

std::vector<std::string> PlanImageEviction(const std::vector<CachedImage>& images, int64_t budget) {
  if (budget <= 0) return {};
  int64_t total = 0;
  std::vector<const CachedImage*> candidates;
  for (const auto& image : images) {
    total += image.bytes;
    if (!image.in_use) candidates.push_back(&image);
  }
  std::sort(candidates.begin(), candidates.end(), [](const CachedImage* a, const CachedImage* b) {
    return a->last_used != b->last_used ? a->last_used < b->last_used : a->digest < b->digest;
  });
  std::vector<std::string> evict;
  // Images in use count toward the total but are never chosen: when they alone exceed the
  // budget, everything else goes and the cache stays over it until they are released.
  for (const CachedImage* image : candidates) {
    if (total <= budget) break;
    evict.push_back(image->digest);
    total -= image->bytes;
  }
  return evict;
}

}  // namespace stasis::images
