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

api::Actor WithSnapshot(api::SnapshotScope scope, bool cuda) {
  api::Actor a;
  a.status.latest_snapshot = api::Snapshot{};
  a.status.latest_snapshot->scope = scope;
  a.status.latest_snapshot->cuda_checkpointed = cuda;
  return a;
}

TEST(RestoreReadinessTest, OnlyACudaSnapshotsRestoreFinishesAfterTheRuntimes) {
  EXPECT_TRUE(RestoresCudaState(WithSnapshot(api::SnapshotScope::kFull, true), std::nullopt));
  EXPECT_FALSE(RestoresCudaState(WithSnapshot(api::SnapshotScope::kFull, false), std::nullopt));
  EXPECT_FALSE(RestoresCudaState(api::Actor{}, std::nullopt)) << "nothing to restore";
  // A clone starting from its source: the source snapshot's flag, not its own (it has none).
  CloneSnapshot source;
  source.cuda_checkpointed = true;
  EXPECT_TRUE(RestoresCudaState(api::Actor{}, source));
  source.cuda_checkpointed = false;
  EXPECT_FALSE(RestoresCudaState(WithSnapshot(api::SnapshotScope::kFull, true), source));
}

TEST(RestoreReadinessTest, AfterARestartOnlyARestoreThatMayHoldCudaStateIsAskedAbout) {
  EXPECT_TRUE(MayStillBeRestoring(WithSnapshot(api::SnapshotScope::kFull, true)));
  EXPECT_FALSE(MayStillBeRestoring(WithSnapshot(api::SnapshotScope::kFull, false)));
  EXPECT_FALSE(MayStillBeRestoring(WithSnapshot(api::SnapshotScope::kData, true))) << "a Data snapshot boots";
  api::Actor clone;
  clone.status.cloned_from = api::ClonedFrom{"source", "uid", "20260101T000000Z-0001"};
  EXPECT_FALSE(MayStillBeRestoring(clone)) << "a CPU clone";
  clone.spec.gpu.count = 1;
  EXPECT_TRUE(MayStillBeRestoring(clone)) << "a GPU clone's source snapshot is not recorded: asked";
  api::Actor booted;
  booted.spec.gpu.count = 1;
  EXPECT_FALSE(MayStillBeRestoring(booted)) << "booted from the bundle";
}

}  // namespace
}  // namespace stasis
