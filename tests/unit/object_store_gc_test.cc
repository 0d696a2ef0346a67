// Garbage collection of an object store, the decision alone (hand-made listings, no store):
// which snapshot prefixes and uploads go, and which must stay — young ones, unread manifests,
// manifests without an owner, keys that are not a snapshot's.
#include "snapshots/object_store_gc.h"

#include "reconcilers/cluster/store_gc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stasis {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

Time At(const char* t) { return *ParseTime(t); }

const Time kNow = At("2026-01-01T12:00:00Z");
constexpr auto kGrace = std::chrono::seconds(3600);
const Time kOld = At("2026-01-01T10:00:00Z");    // two hours before kNow
const Time kYoung = At("2026-01-01T11:30:00Z");  // half an hour before

S3Object Obj(const std::string& key, Time t) { return S3Object{key, 1, "\"e\"", t}; }

StoredSnapshot Snap(const std::string& name, const std::string& id, Time newest, bool manifest,
                    std::optional<std::string> owner = std::nullopt) {
  StoredSnapshot s;
  s.ns = "default";
  s.name = name;
  s.id = id;
  s.newest = newest;
  s.has_manifest = manifest;
  s.owner_uid = std::move(owner);
  return s;
}

// (name, id, reason) of each planned deletion.
std::vector<std::string> Victims(const std::vector<StoredSnapshot>& snaps, const GcPlan& plan) {
  std::vector<std::string> out;
  for (const auto& d : plan.snapshots) out.push_back(snaps[d.snapshot].name + "/" + snaps[d.snapshot].id + ":" + d.reason);
  return out;
}

TEST(GroupSnapshotsTest, GroupsBySnapshotPrefixWithItsNewestTimeAndManifest) {
  auto groups = GroupSnapshots(
      {Obj("p/default/a/s1/chunks/0/0", kOld), Obj("p/default/a/s1/chunks/0/1", kYoung),
       Obj("p/default/a/s1/manifest.json", kOld), Obj("p/default/b/s2/chunks/0/0", kOld),
       // Not a snapshot's: the write probe, a foreign object, an invalid name, another prefix.
       Obj("p/.stasis-write-check-1-2", kOld), Obj("p/readme", kOld), Obj("p/Default/a/s1/x", kOld),
       Obj("p/default/a/s1", kOld), Obj("q/default/a/s9/chunks/0/0", kOld)},
      "p/");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "a");
  EXPECT_EQ(groups[0].id, "s1");
  EXPECT_EQ(groups[0].keys.size(), 3u);
  EXPECT_EQ(groups[0].newest, kYoung);
  EXPECT_TRUE(groups[0].has_manifest);
  EXPECT_EQ(groups[1].name, "b");
  EXPECT_EQ(groups[1].newest, kOld);
  EXPECT_FALSE(groups[1].has_manifest);
}

TEST(GroupSnapshotsTest, AnObjectWithoutATimeMakesItsSnapshotTimeless) {
  auto groups = GroupSnapshots({Obj("default/a/s1/chunks/0/0", kOld), Obj("default/a/s1/chunks/0/1", Time{})}, "");
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].newest, Time{});
  EXPECT_FALSE(PastGrace(groups[0].newest, kNow, kGrace));
}

TEST(PlanObjectStoreGcTest, CollectsOnlyWhatIsPastTheGrace) {
  const LiveActors live = {{{"default", "a"}, "uid-a"}};
  std::vector<StoredSnapshot> snaps = {
      Snap("a", "old-incomplete", kOld, false),     Snap("a", "young-incomplete", kYoung, false),
      Snap("gone", "old", kOld, true),              Snap("gone", "young", kYoung, true),
      Snap("a", "mine", kOld, true, "uid-a"),       Snap("a", "earlier-owner", kOld, true, "uid-old"),
      Snap("a", "young-earlier", kYoung, true, "uid-old"), Snap("a", "unread", kOld, true),
      Snap("a", "no-owner-recorded", kOld, true, ""),      Snap("a", "timeless", Time{}, false)};
  const auto plan = PlanObjectStoreGc(snaps, live, {}, kNow, kGrace);
  EXPECT_THAT(Victims(snaps, plan), ElementsAre("a/old-incomplete:incomplete", "gone/old:actor_gone",
                                                "a/earlier-owner:owner_replaced"));
  EXPECT_THAT(plan.uploads, IsEmpty());
}

TEST(PlanObjectStoreGcTest, TheGraceIsInclusiveAtItsEnd) {
  const auto snaps = std::vector<StoredSnapshot>{Snap("a", "edge", kNow - kGrace, false),
                                                 Snap("a", "just-inside", kNow - kGrace + 1s, false)};
  EXPECT_THAT(Victims(snaps, PlanObjectStoreGc(snaps, {}, {}, kNow, kGrace)), ElementsAre("a/edge:incomplete"));
}

TEST(PlanObjectStoreGcTest, AbortsUploadsBegunBeforeTheGrace) {
  const std::vector<MultipartUpload> uploads = {
      {"p/default/a/s1/chunks/0/0", "u-old", kOld}, {"p/default/a/s2/chunks/0/0", "u-young", kYoung},
      {"p/default/a/s3/chunks/0/0", "u-timeless", Time{}}};
  const auto plan = PlanObjectStoreGc({}, {}, uploads, kNow, kGrace);
  ASSERT_EQ(plan.uploads.size(), 1u);
  EXPECT_EQ(plan.uploads[0].upload_id, "u-old");
}

TEST(PlanObjectStoreGcTest, NoActorsAtAllStillSparesYoungSnapshots) {
  // An empty actor list (every actor deleted) collects only what is past the grace.
  const auto snaps = std::vector<StoredSnapshot>{Snap("a", "s1", kOld, true), Snap("a", "s2", kYoung, true)};
  EXPECT_THAT(Victims(snaps, PlanObjectStoreGc(snaps, {}, {}, kNow, kGrace)), ElementsAre("a/s1:actor_gone"));
}

TEST(StoreGcPeriodTest, AQuarterOfTheGraceBetweenTenSecondsAndTenMinutes) {
  EXPECT_EQ(StoreGcPeriod(std::chrono::hours(1)), std::chrono::minutes(10));
  EXPECT_EQ(StoreGcPeriod(std::chrono::minutes(20)), std::chrono::minutes(5));
  EXPECT_EQ(StoreGcPeriod(std::chrono::seconds(20)), std::chrono::seconds(10));
  EXPECT_EQ(StoreGcPeriod(std::chrono::hours(24)), std::chrono::minutes(10));
}

}  // namespace
}  // namespace stasis
