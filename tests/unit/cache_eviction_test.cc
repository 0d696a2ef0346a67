// The download cache's eviction decision (snapshots/cache_eviction.h), without a disk: least
// recently used first until what stays fits, copies in use never chosen but counted, a total
// equal to the bound kept whole, and no bound (0) evicting nothing.
#include "snapshots/cache_eviction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stasis {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::chrono::system_clock::time_point At(int seconds) {
  return std::chrono::system_clock::time_point(std::chrono::seconds(seconds));
}

CacheEntry Entry(const std::string& key, int64_t bytes, int used_at, bool in_use = false) {
  return CacheEntry{key, bytes, At(used_at), in_use};
}

TEST(CacheEvictionTest, LeastRecentlyUsedGoFirstUntilTheRestFits) {
  // Listed out of order: the scan's order is the directory's, not the uses'.
  const std::vector<CacheEntry> entries = {Entry("ns/c/s1", 100, 30), Entry("ns/a/s1", 100, 10),
                                           Entry("ns/b/s1", 100, 20), Entry("ns/d/s1", 100, 40)};
  const EvictionPlan plan = PlanCacheEviction(entries, 250);
  EXPECT_THAT(plan.evict, ElementsAre(1, 2));  // a (10), then b (20): c and d fit in 250
  EXPECT_EQ(plan.total_bytes, 400);
  EXPECT_EQ(plan.remaining_bytes, 200);
  EXPECT_TRUE(plan.bound_met);
}

TEST(CacheEvictionTest, AnEntryInUseIsSkippedAndTheNextOldestGoesInstead) {
  const std::vector<CacheEntry> entries = {Entry("ns/a/s1", 100, 10, /*in_use=*/true), Entry("ns/b/s1", 100, 20),
                                           Entry("ns/c/s1", 100, 30)};
  const EvictionPlan plan = PlanCacheEviction(entries, 200);
  EXPECT_THAT(plan.evict, ElementsAre(1));
  EXPECT_EQ(plan.remaining_bytes, 200);
  EXPECT_TRUE(plan.bound_met);
}

TEST(CacheEvictionTest, WhatIsInUseAloneOverTheBoundLeavesItUnmetAndEverythingElseGone) {
  const std::vector<CacheEntry> entries = {Entry("ns/a/s1", 300, 10, true), Entry("ns/b/s1", 100, 20),
                                           Entry("ns/c/s1.partial", 50, 0, true)};
  const EvictionPlan plan = PlanCacheEviction(entries, 200);
  EXPECT_THAT(plan.evict, ElementsAre(1));
  EXPECT_EQ(plan.remaining_bytes, 350);
  EXPECT_FALSE(plan.bound_met);
}

TEST(CacheEvictionTest, ATotalExactlyAtTheBoundIsKeptAndOneByteOverEvicts) {
  std::vector<CacheEntry> entries = {Entry("ns/a/s1", 100, 10), Entry("ns/b/s1", 100, 20)};
  EvictionPlan plan = PlanCacheEviction(entries, 200);
  EXPECT_THAT(plan.evict, IsEmpty());
  EXPECT_EQ(plan.remaining_bytes, 200);
  EXPECT_TRUE(plan.bound_met);
  entries[1].bytes = 101;
  plan = PlanCacheEviction(entries, 200);
  EXPECT_THAT(plan.evict, ElementsAre(0));
  EXPECT_EQ(plan.remaining_bytes, 101);
  // Evicting stops as soon as the rest fits: exactly the bound left is enough.
  plan = PlanCacheEviction({Entry("ns/a/s1", 50, 1), Entry("ns/b/s1", 50, 2), Entry("ns/c/s1", 100, 3)}, 150);
  EXPECT_THAT(plan.evict, ElementsAre(0));
  EXPECT_EQ(plan.remaining_bytes, 150);
}

TEST(CacheEvictionTest, NoBoundEvictsNothingAndAnEmptyCacheNeedsNothing) {
  const std::vector<CacheEntry> entries = {Entry("ns/a/s1", 1LL << 40, 10), Entry("ns/b/s1", 1LL << 40, 20)};
  for (int64_t unbounded : {int64_t{0}, int64_t{-1}}) {
    const EvictionPlan plan = PlanCacheEviction(entries, unbounded);
    EXPECT_THAT(plan.evict, IsEmpty());
    EXPECT_EQ(plan.remaining_bytes, 2LL << 40);
    EXPECT_TRUE(plan.bound_met);
  }
  EXPECT_THAT(PlanCacheEviction({}, 1).evict, IsEmpty());
}

TEST(CacheEvictionTest, EqualLastUsesAreBrokenByKeySoAPassIsRepeatable) {
  const std::vector<CacheEntry> entries = {Entry("ns/b/s1", 100, 10), Entry("ns/a/s1", 100, 10),
                                           Entry("ns/c/s1", 100, 10)};
  EXPECT_THAT(PlanCacheEviction(entries, 100).evict, ElementsAre(1, 0));
}

TEST(CacheEvictionTest, ASingleCopyLargerThanTheBoundGoesWhenNotInUse) {
  EXPECT_THAT(PlanCacheEviction({Entry("ns/a/s1", 500, 10)}, 100).evict, ElementsAre(0));
  const EvictionPlan held = PlanCacheEviction({Entry("ns/a/s1", 500, 10, true)}, 100);
  EXPECT_THAT(held.evict, IsEmpty());
  EXPECT_FALSE(held.bound_met);
}

}  // namespace
}  // namespace stasis
