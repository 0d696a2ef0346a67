// When the manager's Run loop wakes by itself (NextRunWake): what cannot notify it is looked at
// on a timer, and a due ticker is never late for it.
#include <gtest/gtest.h>

#include "controller/manager.h"

namespace stasis {
namespace {

using std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

const TimePoint kNow = TimePoint{} + std::chrono::hours(1);

TEST(NextRunWakeTest, UntilTheCachesSyncItLooksAtThemOftenAndIgnoresTickers) {
  // Tickers run only once the controllers do; one due at once must not spin the loop before.
  EXPECT_EQ(NextRunWake(kNow, /*synced=*/false, /*started=*/false, {kNow}), kNow + milliseconds(50));
}

TEST(NextRunWakeTest, OnceSyncedItWakesOnlyForTheStopFlag) {
  // A standby that has synced: the lease won wakes it, so only the stop flag is polled.
  EXPECT_EQ(NextRunWake(kNow, /*synced=*/true, /*started=*/false, {}), kNow + milliseconds(250));
  EXPECT_EQ(NextRunWake(kNow, /*synced=*/true, /*started=*/true, {}), kNow + milliseconds(250));
}

TEST(NextRunWakeTest, TheEarliestTickerDueWinsOverThePoll) {
  const std::vector<TimePoint> due = {kNow + milliseconds(200), kNow + milliseconds(120),
                                      kNow + std::chrono::seconds(60)};
  EXPECT_EQ(NextRunWake(kNow, true, true, due), kNow + milliseconds(120));
  // An overdue ticker (a tick that ran long) is due now, not at the next poll.
  EXPECT_EQ(NextRunWake(kNow, true, true, {kNow - milliseconds(5)}), kNow - milliseconds(5));
}

TEST(NextRunWakeTest, TickersFurtherThanThePollDoNotDelayIt) {
  EXPECT_EQ(NextRunWake(kNow, true, true, {kNow + std::chrono::seconds(5)}), kNow + milliseconds(250));
}

}  // namespace
}  // namespace stasis
