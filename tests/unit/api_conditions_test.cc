// Condition semantics: lastTransitionTime moves only when status changes; reason, message
// and observedGeneration follow the latest write; time comes from the caller.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "api/actor.h"
#include "api/conditions.h"
#include "api/names.h"

namespace stasis::api {
namespace {

using std::chrono::seconds;

Time At(int64_t s) { return Time{seconds{s}}; }

Condition Ready(ConditionStatus status, const char* reason, int64_t generation = 1,
                const char* message = "") {
  return {kConditionReady, status, generation, Time{}, reason, message};
}

TEST(ApiConditionsTest, NewConditionTakesNow) {
  std::vector<Condition> cs;
  EXPECT_TRUE(SetCondition(cs, Ready(ConditionStatus::kFalse, "Resuming"), At(100)));
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].last_transition_time, At(100));
  EXPECT_EQ(cs[0].reason, "Resuming");
}

TEST(ApiConditionsTest, SameStatusKeepsTransitionTime) {
  std::vector<Condition> cs;
  SetCondition(cs, Ready(ConditionStatus::kFalse, "Resuming", 1), At(100));
  // Identical: nothing changed, nothing to write.
  EXPECT_FALSE(SetCondition(cs, Ready(ConditionStatus::kFalse, "Resuming", 1), At(200)));
  EXPECT_EQ(cs[0].last_transition_time, At(100));
  // New reason, message, generation: changed, but the transition time stays.
  EXPECT_TRUE(
      SetCondition(cs, Ready(ConditionStatus::kFalse, "Restoring", 1, "restoring"), At(300)));
  EXPECT_EQ(cs[0].last_transition_time, At(100));
  EXPECT_EQ(cs[0].reason, "Restoring");
  EXPECT_EQ(cs[0].message, "restoring");
  EXPECT_TRUE(
      SetCondition(cs, Ready(ConditionStatus::kFalse, "Restoring", 2, "restoring"), At(400)));
  EXPECT_EQ(cs[0].observed_generation, 2);
  EXPECT_EQ(cs[0].last_transition_time, At(100));
  // Even an explicit time is ignored when status does not change.
  Condition explicit_time = Ready(ConditionStatus::kFalse, "Restoring", 2, "restoring");
  explicit_time.last_transition_time = At(999);
  EXPECT_FALSE(SetCondition(cs, explicit_time, At(500)));
  EXPECT_EQ(cs[0].last_transition_time, At(100));
}

TEST(ApiConditionsTest, StatusChangeMovesTransitionTime) {
  std::vector<Condition> cs;
  SetCondition(cs, Ready(ConditionStatus::kFalse, "Resuming"), At(100));
  EXPECT_TRUE(SetCondition(cs, Ready(ConditionStatus::kTrue, "Running", 2), At(250)));
  EXPECT_EQ(cs[0].status, ConditionStatus::kTrue);
  EXPECT_EQ(cs[0].last_transition_time, At(250));
  EXPECT_EQ(cs[0].observed_generation, 2);
  // An explicit time wins over `now` when status changes.
  Condition c = Ready(ConditionStatus::kUnknown, "NodeLost", 2);
  c.last_transition_time = At(240);
  EXPECT_TRUE(SetCondition(cs, c, At(300)));
  EXPECT_EQ(cs[0].last_transition_time, At(240));
}

TEST(ApiConditionsTest, OneConditionPerType) {
  std::vector<Condition> cs;
  SetCondition(cs, Ready(ConditionStatus::kTrue, "Running"), At(1));
  SetCondition(cs, {kConditionStuck, ConditionStatus::kFalse, 1, {}, "WithinDeadline", ""}, At(2));
  SetCondition(cs, Ready(ConditionStatus::kFalse, "Pausing"), At(3));
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].type, kConditionReady);
  EXPECT_EQ(cs[1].type, kConditionStuck);
  EXPECT_EQ(FindCondition(cs, kConditionStuck)->reason, "WithinDeadline");
  EXPECT_EQ(FindCondition(cs, kConditionCheckpointFailed), nullptr);
  EXPECT_EQ(GetConditionStatus(cs, kConditionReady), ConditionStatus::kFalse);
  EXPECT_EQ(GetConditionStatus(cs, kConditionCheckpointFailed), ConditionStatus::kUnknown);
  EXPECT_FALSE(IsConditionTrue(cs, kConditionReady));
  EXPECT_TRUE(RemoveCondition(cs, kConditionStuck));
  EXPECT_FALSE(RemoveCondition(cs, kConditionStuck));
  EXPECT_EQ(cs.size(), 1u);
}

TEST(ApiConditionsTest, LongMessagesAreCutAtACharacterBoundary) {
  std::string message;
  for (int i = 0; i < 20000; ++i) message += "\xC3\xA9";  // é, two bytes: 40000 bytes
  std::vector<Condition> cs;
  SetCondition(cs, Ready(ConditionStatus::kFalse, "CheckpointFailed", 1, message.c_str()), At(1));
  const std::string& kept = cs[0].message;
  EXPECT_LE(kept.size(), static_cast<size_t>(kMaxConditionMessageBytes));
  EXPECT_GE(kept.size(), static_cast<size_t>(kMaxConditionMessageBytes) - 4);
  EXPECT_EQ(kept.substr(kept.size() - 3), "\xE2\x80\xA6");
  // Every é before the ellipsis is whole.
  const std::string body = kept.substr(0, kept.size() - 3);
  EXPECT_EQ(body.size() % 2, 0u);
  EXPECT_EQ(body.substr(body.size() - 2), "\xC3\xA9");
  EXPECT_EQ(TruncateMessage("short", 10), "short");
}

TEST(ApiConditionsTest, StatusNames) {
  EXPECT_STREQ(ToString(ConditionStatus::kTrue), "True");
  EXPECT_EQ(ParseConditionStatus("Unknown"), ConditionStatus::kUnknown);
  EXPECT_FALSE(ParseConditionStatus("true").has_value());
}

TEST(ApiConditionsTest, StateConditionsFollowTheStatusAndEveryConditionTheWritesGeneration) {
  struct Case {
    ActorState status;
    ConditionStatus paused, suspended;
    const char* reason;
  };
  const ConditionStatus T = ConditionStatus::kTrue, F = ConditionStatus::kFalse;
  for (const Case& c : {Case{ActorState::kRunning, F, F, kReasonRunning}, Case{ActorState::kPausing, F, F, kReasonPausing},
                        Case{ActorState::kPaused, T, F, kReasonPaused}, Case{ActorState::kSuspending, F, F, kReasonSuspending},
                        Case{ActorState::kSuspended, T, T, kReasonSuspended}, Case{ActorState::kResuming, F, F, kReasonResuming},
                        Case{ActorState::kFailed, F, F, kReasonFailed}}) {
    ActorStatus st;
    st.status = c.status;
    // A condition written at an older generation, by another writer.
    SetCondition(st.conditions, Condition{kConditionStuck, F, 3, {}, "NodeLost", ""}, At(1));
    SetStateConditions(st, 7, At(2));
    EXPECT_EQ(GetConditionStatus(st.conditions, kConditionPaused), c.paused) << ToString(c.status);
    EXPECT_EQ(GetConditionStatus(st.conditions, kConditionSuspended), c.suspended) << ToString(c.status);
    EXPECT_EQ(FindCondition(st.conditions, kConditionPaused)->reason, c.reason);
    for (const Condition& cond : st.conditions) EXPECT_EQ(cond.observed_generation, 7) << cond.type;
  }
  ActorStatus never;  // never started: no state to describe
  SetStateConditions(never, 1, At(1));
  EXPECT_EQ(FindCondition(never.conditions, kConditionPaused), nullptr);
}

// The reasons of actors from images are CamelCase (the CRD's reason pattern) and distinct.
TEST(ApiConditionsTest, ImageReasonsAreConditionReasons) {
  const std::vector<std::string> reasons = {kReasonImagePullFailed,   kReasonImageNotFound,
                                            kReasonUnauthorized,      kReasonPullingImage,
                                            kReasonImageNotPresent,   kReasonSnapshotImageUnavailable,
                                            kReasonBadImage};
  const std::vector<std::string> spelled = {"ImagePullFailed", "ImageNotFound", "Unauthorized",
                                            "PullingImage", "ImageNotPresent",
                                            "SnapshotImageUnavailable", "BadImage"};
  EXPECT_EQ(reasons, spelled);
  std::vector<Condition> cs;
  for (const std::string& r : reasons) {
    EXPECT_TRUE(SetCondition(cs, Ready(ConditionStatus::kFalse, r.c_str()), At(1)));
    EXPECT_EQ(cs[0].reason, r);
  }
}

// The reasons of clones (spec.source) likewise, and as their metric labels would read.
TEST(ApiConditionsTest, CloneReasonsAreConditionReasons) {
  const std::vector<std::string> reasons = {kReasonSourceNotFound, kReasonSourceSnapshotUnavailable,
                                            kReasonSourceIncompatible, kReasonPostRestoreHookFailed,
                                            kReasonRestoredFromSource};
  const std::vector<std::string> spelled = {"SourceNotFound", "SourceSnapshotUnavailable",
                                            "SourceIncompatible", "PostRestoreHookFailed",
                                            "RestoredFromSource"};
  EXPECT_EQ(reasons, spelled);
  std::vector<Condition> cs;
  for (const std::string& r : reasons) {
    EXPECT_TRUE(SetCondition(cs, Ready(ConditionStatus::kFalse, r.c_str()), At(1)));
    EXPECT_EQ(cs[0].reason, r);
  }
  EXPECT_EQ(MetricReason(kReasonSourceSnapshotUnavailable), "source_snapshot_unavailable");
  EXPECT_EQ(MetricReason(kReasonPostRestoreHookFailed), "post_restore_hook_failed");
}

}  // namespace
}  // namespace stasis::api
