// Snapshot retention: which committed snapshots go (pure selection, hand-made fixtures), and
// deletion for real in a snapshot-store directory built by SnapshotStore itself, with the actor
// as the API server would return it injected through the reader.
#include "reconcilers/cluster/snapshot_retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using api::ActorState;

// The controller's clock in these tests: a day after every fixture's takenAt.
const Time kNow = *ParseTime("2026-01-02T00:00:00Z");

SnapshotManifest At(const std::string& id, const std::string& taken_at) {
  SnapshotManifest m;
  m.id = id;
  m.taken_at = taken_at;
  return m;
}

// Five committed snapshots, oldest first, as ListCommitted orders them.
std::vector<SnapshotManifest> Five() {
  return {At("s1", "2026-01-01T00:00:01Z"), At("s2", "2026-01-01T00:00:02Z"),
          At("s3", "2026-01-01T00:00:03Z"), At("s4", "2026-01-01T00:00:04Z"),
          At("s5", "2026-01-01T00:00:05Z")};
}

api::Actor ActorIn(ActorState s, const std::string& latest = "") {
  api::Actor a;
  a.metadata.namespace_ = "default";
  a.metadata.name = "counter";
  a.status.status = s;
  if (!latest.empty()) {
    a.status.latest_snapshot = api::Snapshot{};
    a.status.latest_snapshot->id = latest;
  }
  return a;
}

TEST(SnapshotsToDeleteTest, KeepsTheNewestN) {
  EXPECT_THAT(SnapshotsToDelete(Five(), 2, {}), ElementsAre("s1", "s2", "s3"));
  EXPECT_THAT(SnapshotsToDelete(Five(), 1, {}), ElementsAre("s1", "s2", "s3", "s4"));
  EXPECT_THAT(SnapshotsToDelete(Five(), 5, {}), IsEmpty());
  EXPECT_THAT(SnapshotsToDelete(Five(), 9, {}), IsEmpty());
  EXPECT_THAT(SnapshotsToDelete({}, 1, {}), IsEmpty());
}

TEST(SnapshotsToDeleteTest, AProtectedSnapshotIsNeverDeletedHoweverOld) {
  // The oldest is latestSnapshot (its newer siblings were orphaned, or written by a node whose
  // clock is ahead): it stays, and it does not count against N.
  EXPECT_THAT(SnapshotsToDelete(Five(), 2, {"s1"}), ElementsAre("s2", "s3"));
  EXPECT_THAT(SnapshotsToDelete(Five(), 1, {"s1", "s3"}), ElementsAre("s2", "s4"));
  EXPECT_THAT(SnapshotsToDelete(Five(), 1, {"s1", "s2", "s3", "s4"}), IsEmpty());
}

TEST(SnapshotsToDeleteTest, RetainBelowOneDeletesNothing) {
  // The flag refuses 0; should a caller pass it anyway, nothing is read as "keep none".
  EXPECT_THAT(SnapshotsToDelete(Five(), 0, {}), IsEmpty());
  EXPECT_THAT(SnapshotsToDelete(Five(), -3, {}), IsEmpty());
}

TEST(SnapshotsToDeleteTest, AYoungerSnapshotThanTheMinimumAgeIsKept) {
  // s1..s5 were taken at 00:00:01..05; at 00:00:10 with a 7 s minimum age s1..s3 are of age.
  const Time now = *ParseTime("2026-01-01T00:00:10Z");
  EXPECT_THAT(SnapshotsToDelete(Five(), 1, {}, now, std::chrono::seconds(7)), ElementsAre("s1", "s2", "s3"));
  EXPECT_EQ(RetentionRecheckAt(Five(), 1, {}, now, std::chrono::seconds(7)), *ParseTime("2026-01-01T00:00:11Z"));
  // Nothing young beyond N: no recheck needed.
  EXPECT_THAT(SnapshotsToDelete(Five(), 3, {}, now, std::chrono::seconds(7)), ElementsAre("s1", "s2"));
  EXPECT_EQ(RetentionRecheckAt(Five(), 3, {}, now, std::chrono::seconds(7)), std::nullopt);
  // Everything younger: nothing goes, and the oldest comes of age first.
  EXPECT_THAT(SnapshotsToDelete(Five(), 1, {}, now, std::chrono::hours(1)), IsEmpty());
  EXPECT_EQ(RetentionRecheckAt(Five(), 1, {}, now, std::chrono::hours(1)), *ParseTime("2026-01-01T01:00:01Z"));
  // A protected snapshot is not waited for.
  EXPECT_EQ(RetentionRecheckAt(Five(), 4, {"s1"}, now, std::chrono::hours(1)), std::nullopt);
  // No minimum age: the clock does not matter.
  EXPECT_THAT(SnapshotsToDelete(Five(), 4, {}, Time{}, std::chrono::seconds(0)), ElementsAre("s1"));
  EXPECT_EQ(RetentionRecheckAt(Five(), 1, {}, now, std::chrono::seconds(0)), std::nullopt);
}

TEST(SnapshotsToDeleteTest, ATakenAtThatDoesNotParseIsNeverOldEnough) {
  auto five = Five();
  five[0].taken_at = "";
  five[1].taken_at = "yesterday";
  const Time now = *ParseTime("2026-06-01T00:00:00Z");
  EXPECT_THAT(SnapshotsToDelete(five, 1, {}, now, std::chrono::seconds(1)), ElementsAre("s3", "s4"));
  EXPECT_EQ(RetentionRecheckAt(five, 1, {}, now, std::chrono::seconds(1)), std::nullopt);
}

TEST(ProtectedSnapshotsTest, LatestSnapshotOfAnActorAtRestOrRunning) {
  for (auto s : {ActorState::kRunning, ActorState::kSuspended, ActorState::kPaused,
                 ActorState::kFailed, ActorState::kUnspecified}) {
    auto p = ProtectedSnapshots(ActorIn(s, "s2"));
    ASSERT_TRUE(p) << api::ToString(s);
    EXPECT_THAT(*p, UnorderedElementsAre("s2")) << api::ToString(s);
  }
  auto none = ProtectedSnapshots(ActorIn(ActorState::kSuspended));
  ASSERT_TRUE(none);
  EXPECT_THAT(*none, IsEmpty());
}

TEST(ProtectedSnapshotsTest, HandsOffDuringATransitionOrADeletion) {
  // RESUMING restores latestSnapshot; SUSPENDING/PAUSING may be committing one the status does
  // not name yet.
  for (auto s : {ActorState::kResuming, ActorState::kSuspending, ActorState::kPausing}) {
    EXPECT_FALSE(ProtectedSnapshots(ActorIn(s, "s2"))) << api::ToString(s);
  }
  auto deleted = ActorIn(ActorState::kSuspended, "s2");
  deleted.metadata.deletion_timestamp = Time(std::chrono::seconds(1'800'000'000));
  EXPECT_FALSE(ProtectedSnapshots(deleted));
}

// A real store directory, filled the way the node agent fills it: checkpoint into a partial
// local directory, complete it (manifest, rename), commit it (verified copy, rename).
class SnapshotRetentionTest : public ::testing::Test {
 protected:
  SnapshotRetentionTest()
      : local_("stasis-retention-local-"),
        store_dir_("stasis-retention-store-"),
        agent_view_(local_.path().string(), store_dir_.path().string()),
        controller_view_("", store_dir_.path().string()) {}

  void Commit(const std::string& id, const std::string& taken_at) {
    auto dir = agent_view_.BeginLocal("default", "counter", id);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    std::ofstream(fs::path(*dir) / "pages.img") << "pages of " << id;
    SnapshotManifest m;
    m.id = id;
    m.ns = "default";
    m.name = "counter";
    m.scope = "Full";
    m.trigger = "Suspend";
    m.taken_at = taken_at;
    ASSERT_TRUE(agent_view_.CompleteLocal(m).ok());
    auto committed = agent_view_.Commit("default", "counter", id);
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    ASSERT_TRUE(agent_view_.RemoveLocal("default", "counter", id).ok());
  }

  void CommitFive() {
    for (int i = 1; i <= 5; ++i) Commit("s" + std::to_string(i), "2026-01-01T00:00:0" + std::to_string(i) + "Z");
  }

  // What is in the actor's store directory, complete or not.
  std::set<std::string> OnDisk() const {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store_dir_.path() / "default" / "counter", ec)) {
      out.insert(e.path().filename().string());
    }
    return out;
  }

  // A reader that returns `actor` and counts its calls.
  ActorReader Returns(const api::Actor& actor) {
    return [this, actor](const std::string& ns, const std::string& name) -> Result<api::Actor> {
      ++reads_;
      EXPECT_EQ(ns, "default");
      EXPECT_EQ(name, "counter");
      return actor;
    };
  }

  testing::TempDir local_, store_dir_;
  SnapshotStore agent_view_, controller_view_;
  int reads_ = 0;
};

TEST_F(SnapshotRetentionTest, DeletesAllButTheNewestNAndNeverLatestSnapshotEvenWhenOld) {
  CommitFive();
  SnapshotRetention retention(controller_view_, RetentionPolicy{2}, Returns(ActorIn(ActorState::kSuspended, "s1")));
  auto r = retention.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->skipped);
  EXPECT_EQ(r->latest, "s1");
  EXPECT_THAT(r->deleted, ElementsAre("s2", "s3"));
  EXPECT_EQ(OnDisk(), (std::set<std::string>{"s1", "s4", "s5"}));
  // What is left is still complete and verifies.
  for (const char* id : {"s1", "s4", "s5"}) {
    EXPECT_TRUE(controller_view_.VerifyCommitted("default", "counter", id).ok()) << id;
  }
  // A second pass has nothing left to do.
  r = retention.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->deleted, IsEmpty());
  EXPECT_EQ(OnDisk(), (std::set<std::string>{"s1", "s4", "s5"}));
}

TEST_F(SnapshotRetentionTest, TheSnapshotBeingRestoredIsNeverDeleted) {
  // RESUMING from s2 (its latestSnapshot, which is what the agent restores): with N=1 every
  // other snapshot would go, yet nothing is touched while the restore may be reading.
  CommitFive();
  SnapshotRetention retention(controller_view_, RetentionPolicy{1}, Returns(ActorIn(ActorState::kResuming, "s2")));
  auto r = retention.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->skipped);
  EXPECT_THAT(r->deleted, IsEmpty());
  EXPECT_EQ(OnDisk().size(), 5u);

  // Once RUNNING from it, s2 is still latestSnapshot and stays; the others beyond N=1 go.
  SnapshotRetention after(controller_view_, RetentionPolicy{1}, Returns(ActorIn(ActorState::kRunning, "s2")));
  r = after.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->deleted, ElementsAre("s1", "s3", "s4"));
  EXPECT_EQ(OnDisk(), (std::set<std::string>{"s2", "s5"}));
}

TEST_F(SnapshotRetentionTest, PartialAndManifestlessDirectoriesAreUntouched) {
  CommitFive();
  // A commit in progress (or a crash's leftover: the node agent removes those at start-up) and
  // a directory that never got a manifest are not snapshots retention may judge.
  const fs::path actor_dir = store_dir_.path() / "default" / "counter";
  fs::create_directories(actor_dir / "s0.partial");
  std::ofstream(actor_dir / "s0.partial" / "pages.img") << "being copied";
  fs::create_directories(actor_dir / "s00");
  std::ofstream(actor_dir / "s00" / "pages.img") << "no manifest";
  SnapshotRetention retention(controller_view_, RetentionPolicy{1}, Returns(ActorIn(ActorState::kSuspended, "s5")));
  auto r = retention.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(r->deleted, ElementsAre("s1", "s2", "s3", "s4"));
  EXPECT_EQ(OnDisk(), (std::set<std::string>{"s0.partial", "s00", "s5"}));
  EXPECT_TRUE(fs::exists(actor_dir / "s0.partial" / "pages.img"));
  EXPECT_TRUE(fs::exists(actor_dir / "s00" / "pages.img"));
}

TEST_F(SnapshotRetentionTest, AtMostNSnapshotsIsNotEvenARead) {
  Commit("s1", "2026-01-01T00:00:01Z");
  Commit("s2", "2026-01-01T00:00:02Z");
  SnapshotRetention retention(controller_view_, RetentionPolicy{2}, Returns(ActorIn(ActorState::kSuspended, "s2")));
  auto r = retention.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->deleted, IsEmpty());
  EXPECT_EQ(reads_, 0);
  EXPECT_EQ(OnDisk().size(), 2u);
}

TEST_F(SnapshotRetentionTest, TheStoreIsListedBeforeTheActorIsRead) {
  // A commit lands between the listing and the read, from a node whose clock is behind: its
  // takenAt is the oldest of all. The read still names s5 (the agent has not written the new
  // status yet), so only the listing's order keeps the new snapshot safe.
  CommitFive();
  SnapshotRetention retention(
      controller_view_, RetentionPolicy{1}, [&](const std::string&, const std::string&) -> Result<api::Actor> {
        ++reads_;
        Commit("s0-skewed", "2025-12-31T23:59:59Z");
        return ActorIn(ActorState::kSuspended, "s5");
      });
  auto r = retention.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(reads_, 1);
  EXPECT_THAT(r->deleted, ElementsAre("s1", "s2", "s3", "s4"));
  EXPECT_EQ(OnDisk(), (std::set<std::string>{"s0-skewed", "s5"}));
}

TEST_F(SnapshotRetentionTest, AGoneActorOrAFailedReadDeletesNothing) {
  CommitFive();
  SnapshotRetention gone(controller_view_, RetentionPolicy{1}, [](const std::string&, const std::string&) -> Result<api::Actor> {
    return Status(Code::kNotFound, "actors.stasis.dev \"counter\" not found");
  });
  auto r = gone.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->skipped);
  EXPECT_EQ(OnDisk().size(), 5u);

  SnapshotRetention unreachable(controller_view_, RetentionPolicy{1},
                                [](const std::string&, const std::string&) -> Result<api::Actor> {
                                  return Status(Code::kUnavailable, "connection refused");
                                });
  r = unreachable.Prune("default", "counter", kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(OnDisk().size(), 5u);
}

TEST_F(SnapshotRetentionTest, TheMinimumAgeKeepsYoungSnapshotsAndSaysWhenToLookAgain) {
  CommitFive();
  // At 00:00:10 with a 7 s minimum age only s1..s3 are old enough; s4 comes of age at 00:00:11.
  SnapshotRetention retention(controller_view_, RetentionPolicy{1, std::chrono::seconds(7)},
                              Returns(ActorIn(ActorState::kSuspended, "s5")));
  auto r = retention.Prune("default", "counter", *ParseTime("2026-01-01T00:00:10Z"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(r->deleted, ElementsAre("s1", "s2", "s3"));
  EXPECT_EQ(r->recheck_at, *ParseTime("2026-01-01T00:00:11Z"));
  EXPECT_EQ(OnDisk(), (std::set<std::string>{"s4", "s5"}));
  r = retention.Prune("default", "counter", *ParseTime("2026-01-01T00:00:11Z"));
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->deleted, ElementsAre("s4"));
  EXPECT_EQ(r->recheck_at, std::nullopt);
  EXPECT_EQ(OnDisk(), (std::set<std::string>{"s5"}));
}

TEST_F(SnapshotRetentionTest, ADeletedActorIsLeftToItsDeletion) {
  CommitFive();
  auto a = ActorIn(ActorState::kSuspended, "s5");
  a.metadata.deletion_timestamp = Time(std::chrono::seconds(1'800'000'000));
  SnapshotRetention retention(controller_view_, RetentionPolicy{1}, Returns(a));
  auto r = retention.Prune("default", "counter", kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->skipped);
  EXPECT_EQ(OnDisk().size(), 5u);
}

}  // namespace
}  // namespace stasis
