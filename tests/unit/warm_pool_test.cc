#include "reconcilers/cluster/warm_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stasis {
namespace {

using api::ActorState;
using api::DesiredState;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

const api::GoldenSnapshot kGolden{"t-golden-1", "g1", 1};

PoolMemberView Member(const std::string& name, ActorState status, DesiredState desired,
                      const std::string& node = "") {
  PoolMemberView m;
  m.name = name;
  m.source = kGolden.actor_name;
  m.status = status;
  m.desired = desired;
  if (!node.empty()) {
    api::Snapshot s;
    s.id = "p-" + name;
    s.node_name = node;
    s.scope = api::SnapshotScope::kFull;
    m.latest = s;
  }
  return m;
}

PoolMemberView ReadyOn(const std::string& name, const std::string& node) {
  return Member(name, ActorState::kPaused, DesiredState::kPaused, node);
}

std::map<std::string, int> Free(int n1, int n2 = 0) { return {{"n1", n1}, {"n2", n2}}; }

TEST(WarmPoolTest, AnEmptyPoolIsFilledAndRunningMembersArePaused) {
  auto act = DecidePool("t", 3, kGolden, {}, {}, Free(4));
  EXPECT_THAT(act.create, ElementsAre("t-warm-0", "t-warm-1", "t-warm-2"));
  EXPECT_TRUE(act.filling);
  EXPECT_EQ(act.ready, 0);

  auto next = DecidePool("t", 3, kGolden,
                         {Member("t-warm-0", ActorState::kRunning, DesiredState::kRunning),
                          Member("t-warm-1", ActorState::kResuming, DesiredState::kRunning),
                          ReadyOn("t-warm-2", "n1")},
                         {}, Free(4));
  EXPECT_THAT(next.create, IsEmpty());
  EXPECT_THAT(next.pause, ElementsAre("t-warm-0"));
  EXPECT_EQ(next.ready, 1);
  EXPECT_TRUE(next.filling);

  auto full = DecidePool("t", 2, kGolden, {ReadyOn("t-warm-0", "n1"), ReadyOn("t-warm-1", "n2")}, {}, Free(4));
  EXPECT_THAT(full.create, IsEmpty());
  EXPECT_THAT(full.remove, IsEmpty());
  EXPECT_EQ(full.ready, 2);
  EXPECT_FALSE(full.filling);
}

TEST(WarmPoolTest, AnActorClaimsAReadyMemberAndThePoolRefillsOnceItStarted) {
  auto act = DecidePool("t", 2, kGolden, {ReadyOn("t-warm-0", "n1"), ReadyOn("t-warm-1", "n2")}, {{"a", ""}},
                        Free(0, 1));
  ASSERT_EQ(act.claims.size(), 1u);
  EXPECT_EQ(act.claims[0].actor, "a");
  EXPECT_EQ(act.claims[0].member, "t-warm-1") << "the member on the node with a free worker";
  EXPECT_EQ(act.claims[0].node, "n2");
  EXPECT_EQ(act.claims[0].snapshot_id, "p-t-warm-1");
  EXPECT_FALSE(act.claims[0].already_claimed);
  EXPECT_THAT(act.from_golden, IsEmpty());
  EXPECT_EQ(act.ready, 1);
  EXPECT_THAT(act.create, IsEmpty()) << "no refill beside the claimer's restore";

  PoolMemberView claimed = ReadyOn("t-warm-1", "n2");
  claimed.claimed_by = "a";
  claimed.claimer = Claimer::kUsing;
  EXPECT_THAT(DecidePool("t", 2, kGolden, {ReadyOn("t-warm-0", "n1"), claimed}, {}, Free(0, 0)).create, IsEmpty());
  claimed.claimer = Claimer::kDone;
  auto started = DecidePool("t", 2, kGolden, {ReadyOn("t-warm-0", "n1"), claimed}, {}, Free(0, 0));
  EXPECT_THAT(started.remove, ElementsAre("t-warm-1"));
  EXPECT_THAT(started.create, ElementsAre("t-warm-2")) << "a new name: the claimed member still exists";
}

TEST(WarmPoolTest, WithoutAFittingMemberTheActorStartsFromTheGolden) {
  // Nothing ready yet, a member on another node than the actor's pin, a node with no free
  // worker: each is a miss, never a wait.
  EXPECT_THAT(DecidePool("t", 1, kGolden, {Member("t-warm-0", ActorState::kResuming, DesiredState::kRunning)},
                         {{"a", ""}}, Free(4))
                  .from_golden,
              ElementsAre("a"));
  EXPECT_THAT(DecidePool("t", 1, kGolden, {ReadyOn("t-warm-0", "n1")}, {{"a", "n2"}}, Free(4, 4)).from_golden,
              ElementsAre("a"));
  auto busy = DecidePool("t", 1, kGolden, {ReadyOn("t-warm-0", "n1")}, {{"a", ""}, {"b", ""}}, Free(1));
  ASSERT_EQ(busy.claims.size(), 1u) << "one free worker on n1: one claim there";
  EXPECT_THAT(busy.from_golden, ElementsAre("b"));
}

TEST(WarmPoolTest, AClaimIsKeptUntilItsClaimerHasStarted) {
  PoolMemberView claimed = ReadyOn("t-warm-0", "n1");
  claimed.claimed_by = "a";
  claimed.claimer = Claimer::kPending;
  // An earlier fill of "a" failed after the claim: the same member again, no second claim.
  auto again = DecidePool("t", 1, kGolden, {claimed}, {{"a", ""}}, Free(1));
  ASSERT_EQ(again.claims.size(), 1u);
  EXPECT_EQ(again.claims[0].member, "t-warm-0");
  EXPECT_TRUE(again.claims[0].already_claimed);
  EXPECT_THAT(again.create, IsEmpty()) << "it keeps its place until its claimer has started";
  EXPECT_EQ(again.ready, 0) << "but it is not ready for anyone else";
  EXPECT_THAT(again.remove, IsEmpty());

  claimed.claimer = Claimer::kUsing;
  auto using_it = DecidePool("t", 1, kGolden, {claimed, ReadyOn("t-warm-1", "n1")}, {}, Free(1));
  EXPECT_THAT(using_it.remove, IsEmpty()) << "its claimer has not restored from it yet";
  EXPECT_THAT(using_it.pause, IsEmpty());
  EXPECT_EQ(using_it.ready, 1);

  claimed.claimer = Claimer::kDone;
  EXPECT_THAT(DecidePool("t", 1, kGolden, {claimed, ReadyOn("t-warm-1", "n1")}, {}, Free(1)).remove,
              ElementsAre("t-warm-0"));
}

TEST(WarmPoolTest, StaleFailedAndSurplusMembersGo) {
  PoolMemberView stale = ReadyOn("t-warm-0", "n1");
  stale.source = "t-golden-0";
  PoolMemberView failed = Member("t-warm-1", ActorState::kFailed, DesiredState::kRunning);
  PoolMemberView going = ReadyOn("t-warm-2", "n1");
  going.being_deleted = true;
  auto act = DecidePool("t", 1, kGolden, {stale, failed, going}, {}, Free(2));
  EXPECT_THAT(act.remove, UnorderedElementsAre("t-warm-0", "t-warm-1"));
  EXPECT_THAT(act.create, ElementsAre("t-warm-3")) << "no name of a member still being deleted";

  auto shrink = DecidePool("t", 1, kGolden,
                           {ReadyOn("t-warm-0", "n1"), Member("t-warm-1", ActorState::kResuming, DesiredState::kRunning),
                            ReadyOn("t-warm-2", "n1")},
                           {}, Free(2));
  EXPECT_THAT(shrink.remove, UnorderedElementsAre("t-warm-1", "t-warm-2")) << "starting members go first";
  EXPECT_EQ(shrink.ready, 1);

  auto off = DecidePool("t", 0, kGolden, {ReadyOn("t-warm-0", "n1")}, {}, Free(2));
  EXPECT_THAT(off.remove, ElementsAre("t-warm-0"));
  EXPECT_FALSE(off.filling);
}

}  // namespace
}  // namespace stasis

namespace stasis {
namespace {

// A claimer of member "t-warm-1": filled in (bundle and source set) unless `pending`.
api::Actor ClaimingActor(const std::string& source, ActorState status = ActorState::kUnspecified,
                   bool pending = false) {
  api::Actor a;
  a.metadata.name = "c";
  a.spec.template_ref = api::LocalObjectReference{"t"};
  if (!pending) {
    a.spec.bundle = "/bundles/b";
    a.spec.source = api::ActorSourceRef{source, "p-1"};
  }
  a.status.status = status;
  return a;
}

TEST(ClaimerOfTest, SaysWhatBecameOfTheClaimer) {
  const std::string m = "t-warm-1";
  EXPECT_EQ(ClaimerOf(m, "", {}), Claimer::kNone);
  EXPECT_EQ(ClaimerOf(m, "c", {}), Claimer::kDone) << "a claimer that is gone frees the member";
  EXPECT_EQ(ClaimerOf(m, "c", {{"c", ClaimingActor(m, ActorState::kUnspecified, true)}}), Claimer::kPending);
  EXPECT_EQ(ClaimerOf(m, "c", {{"c", ClaimingActor(m, ActorState::kResuming)}}), Claimer::kUsing);
  EXPECT_EQ(ClaimerOf(m, "c", {{"c", ClaimingActor(m, ActorState::kRunning)}}), Claimer::kDone);
  EXPECT_EQ(ClaimerOf(m, "c", {{"c", ClaimingActor("t-golden-1")}}), Claimer::kDone)
      << "filled in from another source (a miss went to the golden)";
  api::Actor with_snapshot = ClaimingActor(m, ActorState::kPaused);
  with_snapshot.status.latest_snapshot = api::Snapshot{};
  EXPECT_EQ(ClaimerOf(m, "c", {{"c", with_snapshot}}), Claimer::kDone)
      << "a claimer with a snapshot of its own no longer needs the member's";
}

}  // namespace
}  // namespace stasis
