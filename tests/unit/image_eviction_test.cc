// The image cache's eviction plan (images/image_eviction.h), without a disk: least recently
// used first until the rest fit, images in use never chosen but counted, ties broken by
// digest, and no budget removing nothing.
#include "images/image_eviction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stasis::images {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

CachedImage Image(const std::string& digest, int64_t bytes, int used_at, bool in_use = false) {
  return CachedImage{digest, bytes, Time(std::chrono::seconds(used_at)), in_use};
}

TEST(ImageEvictionTest, LeastRecentlyUsedGoFirstUntilTheRestFit) {
  const std::vector<CachedImage> images = {Image("sha256:c", 100, 30), Image("sha256:a", 100, 10),
                                           Image("sha256:b", 100, 20), Image("sha256:d", 100, 40)};
  EXPECT_THAT(PlanImageEviction(images, 250), ElementsAre("sha256:a", "sha256:b"));
}

TEST(ImageEvictionTest, NothingGoesWhenTheCacheFitsExactly) {
  const std::vector<CachedImage> images = {Image("sha256:a", 100, 10), Image("sha256:b", 150, 20)};
  EXPECT_THAT(PlanImageEviction(images, 250), IsEmpty());
  EXPECT_THAT(PlanImageEviction(images, 249), ElementsAre("sha256:a"));
}

TEST(ImageEvictionTest, AnImageInUseIsSkippedAndTheNextOldestGoesInstead) {
  const std::vector<CachedImage> images = {Image("sha256:a", 100, 10, /*in_use=*/true), Image("sha256:b", 100, 20),
                                           Image("sha256:c", 100, 30)};
  EXPECT_THAT(PlanImageEviction(images, 200), ElementsAre("sha256:b"));
}

TEST(ImageEvictionTest, ImagesInUseOverTheBudgetStayAndEverythingElseGoes) {
  const std::vector<CachedImage> images = {Image("sha256:a", 300, 10, true), Image("sha256:b", 100, 20),
                                           Image("sha256:c", 50, 5)};
  EXPECT_THAT(PlanImageEviction(images, 200), ElementsAre("sha256:c", "sha256:b"));
}

TEST(ImageEvictionTest, EqualLastUseIsOrderedByDigest) {
  const std::vector<CachedImage> images = {Image("sha256:z", 100, 10), Image("sha256:m", 100, 10),
                                           Image("sha256:a", 100, 10)};
  EXPECT_THAT(PlanImageEviction(images, 100), ElementsAre("sha256:a", "sha256:m"));
}

TEST(ImageEvictionTest, NoBudgetRemovesNothing) {
  const std::vector<CachedImage> images = {Image("sha256:a", 1 << 30, 10)};
  EXPECT_THAT(PlanImageEviction(images, 0), IsEmpty());
}

}  // namespace
}  // namespace stasis::images
