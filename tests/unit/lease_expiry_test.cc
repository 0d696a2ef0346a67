// Heartbeat expiry by observed change (lease_expiry.h): a Lease is lost only when this
// controller has seen no renewal for its duration on its own monotonic clock, whatever the
// node's clock wrote into renewTime.
#include "reconcilers/cluster/lease_expiry.h"

#include <gtest/gtest.h>

#include "tests/support/fake_clock.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

json Lease(const std::string& renew, int duration = 10, const std::string& holder = "n1") {
  return {{"spec", {{"holderIdentity", holder}, {"leaseDurationSeconds", duration}, {"renewTime", renew}}}};
}

const Clock::TimePoint kT0{std::chrono::hours(1000)};

TEST(LeaseExpiry, FirstObservationStartsTheTimer) {
  // However old the renewTime (a controller just started), the first sight is not expiry.
  const LeaseRecord r = ObserveLease(std::nullopt, LeaseRenewal(Lease("2001-01-01T00:00:00.000000Z")), 0, 10s, kT0);
  EXPECT_EQ(r.observed_at, kT0);
  EXPECT_FALSE(LeaseExpired(r, kT0));
  EXPECT_FALSE(LeaseExpired(r, kT0 + 10s));
  EXPECT_TRUE(LeaseExpired(r, kT0 + 10s + 1ms));
}

TEST(LeaseExpiry, ARenewalRestartsTheTimerAnUnchangedLeaseDoesNot) {
  LeaseRecord r = ObserveLease(std::nullopt, LeaseRenewal(Lease("a")), 0, 10s, kT0);
  r = ObserveLease(r, LeaseRenewal(Lease("a")), 0, 10s, kT0 + 8s);
  EXPECT_EQ(r.observed_at, kT0) << "seeing the same renewal again is no renewal";
  EXPECT_TRUE(LeaseExpired(r, kT0 + 11s));
  r = ObserveLease(r, LeaseRenewal(Lease("b")), 0, 10s, kT0 + 9s);
  EXPECT_EQ(r.observed_at, kT0 + 9s);
  EXPECT_FALSE(LeaseExpired(r, kT0 + 19s));
  EXPECT_TRUE(LeaseExpired(r, kT0 + 20s));
}

TEST(LeaseExpiry, ANewHolderCountsAsARenewal) {
  LeaseRecord r = ObserveLease(std::nullopt, LeaseRenewal(Lease("a", 10, "n1")), 0, 10s, kT0);
  r = ObserveLease(r, LeaseRenewal(Lease("a", 10, "n1-restarted")), 0, 10s, kT0 + 9s);
  EXPECT_EQ(r.observed_at, kT0 + 9s);
}

TEST(LeaseExpiry, ADurationChangeAppliesButIsNoRenewal) {
  LeaseRecord r = ObserveLease(std::nullopt, LeaseRenewal(Lease("a")), 0, 10s, kT0);
  r = ObserveLease(r, LeaseRenewal(Lease("a", 60)), 0, LeaseDuration(Lease("a", 60)), kT0 + 5s);
  EXPECT_EQ(r.observed_at, kT0);
  EXPECT_EQ(r.duration, 60s);
  EXPECT_FALSE(LeaseExpired(r, kT0 + 30s));
}

// A lagging cache's older copy, seen after a quorum read showed a newer renewal, is no
// renewal: only copies at least as new as the newest seen count.
TEST(LeaseExpiry, AnOlderCopyIsNoRenewal) {
  LeaseRecord r = ObserveLease(std::nullopt, LeaseRenewal(Lease("a")), 5, 10s, kT0);
  r = ObserveLease(r, LeaseRenewal(Lease("b")), 7, 10s, kT0 + 8s);  // the quorum read
  EXPECT_EQ(r.observed_at, kT0 + 8s);
  r = ObserveLease(r, LeaseRenewal(Lease("a")), 5, 10s, kT0 + 15s);  // the cache, still behind
  EXPECT_EQ(r.observed_at, kT0 + 8s);
  EXPECT_TRUE(LeaseExpired(r, kT0 + 19s));
  EXPECT_EQ(LeaseResourceVersion(json{{"metadata", {{"resourceVersion", "123"}}}}), 123);
  EXPECT_EQ(LeaseResourceVersion(json{{"metadata", {{"resourceVersion", "x1"}}}}), 0);
}

TEST(LeaseExpiry, DurationDefaultsToFortySeconds) {
  EXPECT_EQ(LeaseDuration(json{{"spec", json::object()}}), 40s);
  EXPECT_EQ(LeaseDuration(Lease("a", 7)), 7s);
}

// The node's wall clock plays no part: a renewTime minutes in the past or the future, renewed
// every period, is alive; the same Lease left alone is lost after its duration.
TEST(LeaseExpiry, TrackerIgnoresTheNodesClock) {
  testing::FakeClock clock;
  LeaseTracker tracker(clock);
  for (const auto skew : {-5min, 5min}) {
    const std::string key = "ns/skew" + std::to_string(skew.count());
    auto renewed = [&] {
      return Lease(std::to_string((clock.WallNow() + skew).time_since_epoch().count()));
    };
    for (int i = 0; i < 20; ++i) {
      EXPECT_TRUE(tracker.Observe(key, renewed()).first) << i;
      clock.Advance(5s);
    }
    const json last = renewed();
    EXPECT_TRUE(tracker.Observe(key, last).first);
    clock.Advance(10s);
    EXPECT_TRUE(tracker.Observe(key, last).first);
    clock.Advance(1s);
    EXPECT_FALSE(tracker.Observe(key, last).first);
    tracker.Forget(key);
    EXPECT_TRUE(tracker.Observe(key, last).first) << "forgotten: the next sight starts anew";
  }
}

}  // namespace
}  // namespace stasis
