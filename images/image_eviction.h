// Which unpacked images the node removes to stay under --image-cache-bytes: a pure planner
// (the image store gathers the entries and removes what it returns).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/time.h"

namespace stasis::images {

struct CachedImage {
  std::string digest;  // the manifest digest, the cache key
  int64_t bytes = 0;   // on disk
  Time last_used;      // the last start or restore from it (or its unpack)
  bool in_use = false;  // an actor on this node runs it, or a snapshot here was taken on it
};

// The digests to remove, least recently used first, until the rest fit in `budget` bytes
// (0: no budget, nothing removed). An image in use is never chosen, even when the images in
// use alone exceed the budget. Ties in last_used are broken by digest, so the plan is stable.
std::vector<std::string> PlanImageEviction(const std::vector<CachedImage>& images, int64_t budget);

}  // namespace stasis::images
