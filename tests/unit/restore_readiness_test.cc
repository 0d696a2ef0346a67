// Whether a RUNNING actor's restore is still finishing, and how long its wait may take
// (reconcilers/node/restore_readiness.h).
#include "reconcilers/node/restore_readiness.h"

#include <gtest/gtest.h>

#include "api/conditions.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;

const Time kT0 = Time{} + std::chrono::hours(24 * 365 * 56);

api::Actor WithRestored(api::ConditionStatus status, const char* reason, Time at) {
  api::Actor a;
  a.spec.timeouts.restore_seconds = 60;
  api::Condition c;
  c.type = api::kConditionRestored;
  c.status = status;
  c.reason = reason;
  api::SetCondition(a.status.conditions, c, at);
  return a;
}

TEST(RestoreReadinessTest, OnlyRestoredFalseWithRestoringAwaitsTheRestore) {
  EXPECT_TRUE(AwaitsRestore(WithRestored(api::ConditionStatus::kFalse, api::kReasonRestoring, kT0)));
  EXPECT_FALSE(AwaitsRestore(WithRestored(api::ConditionStatus::kTrue, api::kReasonRestoreComplete, kT0)));
  // Failed: a failed resume that is retried, not a wait.
  EXPECT_FALSE(AwaitsRestore(WithRestored(api::ConditionStatus::kFalse, "RuntimeError", kT0)));
  EXPECT_FALSE(AwaitsRestore(api::Actor{})) << "a booted sandbox has no Restored condition";
}

TEST(RestoreReadinessTest, TheWaitHasWhatIsLeftOfTheRestoreDeadline) {
  const api::Actor a = WithRestored(api::ConditionStatus::kFalse, api::kReasonRestoring, kT0);
  EXPECT_EQ(RestoreWaitBudget(a, kT0), 60s);
  EXPECT_EQ(RestoreWaitBudget(a, kT0 + 20s), 40s);
  // Past it (an agent that restarted late): the runtime is still asked once, briefly.
  EXPECT_EQ(RestoreWaitBudget(a, kT0 + 59s), kMinRestoreWait);
  EXPECT_EQ(RestoreWaitBudget(a, kT0 + 10min), kMinRestoreWait);
  // A clock behind the condition's time counts nothing as spent.
  EXPECT_EQ(RestoreWaitBudget(a, kT0 - 5s), 60s);
}

}  // namespace
}  // namespace stasis
