// Stuck detection, with hand-made times: no clock, no sleeping.
#include "reconcilers/cluster/stuck_detector.h"

#include <gtest/gtest.h>

namespace stasis {
namespace {

using namespace std::chrono_literals;
using api::ActorState;

Time T(int seconds) { return Time(std::chrono::seconds(1'800'000'000 + seconds)); }

api::Actor InState(ActorState s, std::optional<int> started = std::nullopt) {
  api::Actor a;
  a.metadata.name = "a";
  a.metadata.namespace_ = "ns";
  a.spec.timeouts.checkpoint_seconds = 60;
  a.spec.timeouts.restore_seconds = 120;
  a.status.status = s;
  a.status.node_name = "node-a";
  if (started) a.status.transition_start_time = T(*started);
  return a;
}

TEST(StuckDetectorTest, TransitionWithinItsDeadlineIsNotStuck) {
  auto a = InState(ActorState::kSuspending, 0);
  EXPECT_FALSE(DetectStuck(a, T(60 + 30), 30s, true));  // exactly at the deadline
  EXPECT_FALSE(DetectStuck(a, T(10), 30s, true));
}

TEST(StuckDetectorTest, TransitionPastTimeoutPlusGraceIsStuckOnDeadline) {
  auto a = InState(ActorState::kSuspending, 0);
  auto v = DetectStuck(a, T(91), 30s, true);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->reason, api::kReasonDeadlineExceeded);
  EXPECT_NE(v->message.find("STATUS_SUSPENDING"), std::string::npos);
}

TEST(StuckDetectorTest, ResumeUsesTheRestoreTimeout) {
  auto a = InState(ActorState::kResuming, 0);
  EXPECT_FALSE(DetectStuck(a, T(120 + 30), 30s, true));
  EXPECT_TRUE(DetectStuck(a, T(151), 30s, true));
  auto p = InState(ActorState::kPausing, 0);
  EXPECT_TRUE(DetectStuck(p, T(91), 30s, true));
}

TEST(StuckDetectorTest, RestingStatusesAreNeverStuckOnDeadline) {
  for (auto s : {ActorState::kRunning, ActorState::kPaused, ActorState::kSuspended, ActorState::kFailed}) {
    auto a = InState(s, 0);  // a stale transitionStartTime must not matter
    EXPECT_FALSE(DetectStuck(a, T(100000), 30s, true)) << api::ToString(s);
  }
}

TEST(StuckDetectorTest, LostNodeStrandsRunningAndTransitioningActors) {
  for (auto s : {ActorState::kRunning, ActorState::kResuming, ActorState::kSuspending}) {
    auto v = DetectStuck(InState(s, 0), T(1), 30s, false);
    ASSERT_TRUE(v) << api::ToString(s);
    EXPECT_EQ(v->reason, api::kReasonNodeLost);
  }
  // At rest on a dead node: nothing to clean, the actor can resume elsewhere.
  EXPECT_FALSE(DetectStuck(InState(ActorState::kSuspended), T(1), 30s, false));
  // A worker still recorded counts as occupying the node.
  auto held = InState(ActorState::kPaused);
  held.status.worker_name = "node-a-slot0";
  EXPECT_TRUE(DetectStuck(held, T(1), 30s, false));
  // No node known: no verdict on liveness.
  EXPECT_FALSE(DetectStuck(InState(ActorState::kRunning), T(1), 30s, std::nullopt));
}

// An in-between status without transitionStartTime has no deadline to overrun: the agent
// writes the start with every *ING status, so only a status written by hand (or lost with a
// partial write) lacks it, and the agent that owns the actor recovers any *ING it reads. A
// lost node still strands it.
TEST(StuckDetectorTest, ATransitionWithoutAStartTimeIsStuckOnlyOnALostNode) {
  for (auto s : {ActorState::kPausing, ActorState::kSuspending, ActorState::kResuming}) {
    EXPECT_FALSE(DetectStuck(InState(s), T(100000), 30s, true)) << api::ToString(s);
    auto v = DetectStuck(InState(s), T(100000), 30s, false);
    ASSERT_TRUE(v) << api::ToString(s);
    EXPECT_EQ(v->reason, api::kReasonNodeLost);
  }
}

}  // namespace
}  // namespace stasis
