// A CUDA snapshot's restore is over only when the runtime says so (runsc wait -restore, after
// runsc restore returned): the node agent's reconciler against a real kube-apiserver with the
// fake runtime driver (reconcilers/node/restore_readiness.h, finish_restore.cc). The same with
// real runsc: AGpuActorIsReadyOnlyOnceItsRestoreHasFinished in tests/e2e/node_gpu_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <chrono>
#include <string>
#include <thread>

#include "tests/support/actor_reconciler_fixture.h"

namespace stasis {
namespace {

using testing::FakeRuntimeDriver;
using Call = FakeRuntimeDriver::Call;

class CudaRestoreTest : public testing::ActorReconcilerTest {
 protected:
  // Sets one condition in the API as an earlier agent's write would have left it.
  void PatchCondition(const char* type, bool status, const char* reason) {
    api::Actor a = Get();
    api::Condition c;
    c.type = type;
    c.status = status ? api::ConditionStatus::kTrue : api::ConditionStatus::kFalse;
    c.reason = reason;
    c.message = "set by the test";
    api::SetCondition(a.status.conditions, c, std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    PatchStatus({{"conditions", api::ActorTypedJson(a)["status"]["conditions"]}});
  }
  // A PAUSED actor whose snapshot holds a CUDA context, as a GPU checkpoint records it (the
  // restore path does not depend on the actor's GPUs, which this test's node has none of).
  void PauseWithCudaSnapshot() {
    Create("Running");
    ASSERT_TRUE(Settle("STATUS_RUNNING"));
    Desire("Paused");
    ASSERT_TRUE(Settle("STATUS_PAUSED"));
    PatchStatus({{"latestSnapshot", {{"cudaCheckpointed", true}}}});
    ASSERT_TRUE(Get().status.latest_snapshot->cuda_checkpointed);
  }
  double Sum(const std::string& family, const std::map<std::string, std::string>& want) {
    return testing::SampleSum(registry_, family, want);
  }
  double RestoreUsableCount(const std::string& result) {
    return Sum("stasis_snapshot_duration_seconds", {{"operation", "restore_usable"}, {"result", result}});
  }
};

// A CUDA snapshot's restore ends after runsc restore returned: the agent waits for it before
// Ready (restore_readiness.h). A restore without CUDA state is Restored at once, a boot has no
// Restored condition.
TEST_F(CudaRestoreTest, ACudaRestoreIsReadyOnlyOnceTheRuntimeHasFinishedIt) {
  PauseWithCudaSnapshot();
  EXPECT_EQ(Reason(api::kConditionRestored), "") << "booted: nothing restored";
  Desire("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const auto calls = driver_.Calls();
  const auto restore = std::find(calls.begin(), calls.end(), "Restore " + SandboxId());
  ASSERT_NE(restore, calls.end());
  EXPECT_NE(std::find(restore, calls.end(), "WaitRestored " + SandboxId()), calls.end())
      << "Ready without waiting for the restore to finish";
  EXPECT_TRUE(ConditionTrue(api::kConditionRestored));
  EXPECT_EQ(Reason(api::kConditionRestored), api::kReasonRestoreComplete);
  EXPECT_TRUE(ConditionTrue(api::kConditionReady));
  EXPECT_EQ(RestoreUsableCount("success"), 1);
  EXPECT_EQ(Sum("stasis_snapshot_operations_total", {{"operation", "restore"}, {"result", "success"}}), 1)
      << "counted once, when it finished";

  // The same actor's next restore, of a snapshot without CUDA state: Restored at once.
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  ASSERT_FALSE(Get().status.latest_snapshot->cuda_checkpointed);
  Desire("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(driver_.CountCalls("WaitRestored"), 1);
  EXPECT_EQ(Reason(api::kConditionRestored), api::kReasonRestoreComplete);
  EXPECT_TRUE(ConditionTrue(api::kConditionReady));
}

// The restore fails after runsc restore returned (runsc kills the sandbox): a failed resume —
// the sandbox deleted, the worker freed, PAUSED on the same snapshot, retried — never a RUNNING
// actor that cannot run.
TEST_F(CudaRestoreTest, ACudaRestoreThatFailsAfterRunningIsAFailedResume) {
  NewReconciler(RuntimeDrivers{&driver_, nullptr}, 5, std::chrono::milliseconds(1));
  PauseWithCudaSnapshot();
  const std::string snapshot = Get().status.latest_snapshot->id;
  driver_.FailNext(Call::kWaitRestored,
                   Status(Code::kInternal, "runsc wait -restore: exit 128: post restore work failed", "runtime_error"));
  Desire("Running");
  EXPECT_FALSE(Reconcile().ok()) << "retried with backoff";
  EXPECT_EQ(StatusName(), "STATUS_PAUSED");
  EXPECT_EQ(Get().status.latest_snapshot->id, snapshot);
  EXPECT_EQ(Reason(api::kConditionRestored), "RuntimeError");
  EXPECT_EQ(Reason(api::kConditionReady), "RuntimeError");
  EXPECT_FALSE(HoldsWorker());
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kNotFound);
  EXPECT_EQ(RestoreUsableCount("error"), 1);
  EXPECT_EQ(Sum("stasis_snapshot_operations_total", {{"operation", "restore"}, {"result", "error"}}), 1);
  EXPECT_EQ(Sum("stasis_snapshot_operations_total", {{"operation", "restore"}, {"result", "success"}}), 0)
      << "a restore that failed after RUNNING is not also a success";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(Reason(api::kConditionRestored), api::kReasonRestoreComplete);
  EXPECT_TRUE(ConditionTrue(api::kConditionReady));
}

// An agent that restarted while a restore was finishing (RUNNING, Restored=False Restoring)
// waits for it; a pause asked for meanwhile starts only after it.
TEST_F(CudaRestoreTest, ARestoreStillFinishingAfterARestartIsWaitedForBeforeAPause) {
  PauseWithCudaSnapshot();
  Desire("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  PatchCondition(api::kConditionRestored, false, api::kReasonRestoring);
  PatchCondition(api::kConditionReady, false, api::kReasonRestoring);
  Desire("Paused");
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
  EXPECT_EQ(driver_.CountCalls("WaitRestored"), 2);
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 1) << "only the first pause's";
  EXPECT_EQ(Reason(api::kConditionRestored), api::kReasonRestoreComplete);
  EXPECT_TRUE(ConditionTrue(api::kConditionReady));
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 2);
}

}  // namespace
}  // namespace stasis
