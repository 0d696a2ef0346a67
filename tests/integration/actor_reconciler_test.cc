// The node agent's reconciler against a real kube-apiserver, with the fake runtime driver
// (tests/support/fake_runtime_driver.h) in place of runsc: every action transitions.h can
// decide — checkpoint, resume, recovery of an interrupted transition, cleanup of a dead
// sandbox — and every failure class a runtime reports, each asserted on the Actor the API
// server holds (status, conditions, worker) and on the calls the runtime saw. The same paths
// with real runsc are in tests/e2e/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "tests/support/actor_reconciler_fixture.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::ActorReconcilerTest;
using testing::ControlPlane;
using testing::FakeRuntimeDriver;
using testing::kActor;
using testing::RecordedEvents;
using Call = FakeRuntimeDriver::Call;

TEST_F(ActorReconcilerTest, RunsPausesResumesAndSuspendsThroughTheDriver) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(driver_.CountCalls("Run"), 1);
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 1);
  EXPECT_EQ(Get().status.latest_snapshot->node_name, node_);
  EXPECT_EQ(Get().status.worker_name, "");
  EXPECT_TRUE(fs::is_empty(root_ / "run")) << "the checkpointed sandbox's root or owner file was left";
  Desire("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(driver_.CountCalls("Restore"), 1);
  Desire("Suspended");
  ASSERT_TRUE(Settle("STATUS_SUSPENDED"));
  EXPECT_EQ(Get().status.latest_snapshot->node_name, "") << "a suspend commits its snapshot to the store";
}

TEST_F(ActorReconcilerTest, ACheckpointTheSandboxSurvivesKeepsItRunningAndBacksOff) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  driver_.FailNext(Call::kCheckpoint, Status(Code::kInternal, "save refused", "runtime_error"));
  Desire("Paused");
  auto r = Reconcile();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
  EXPECT_TRUE(ConditionTrue(api::kConditionCheckpointFailed));
  EXPECT_EQ(Reason(api::kConditionCheckpointFailed), "RuntimeError");
  // The retry waits out its backoff: no second checkpoint at once.
  auto waited = Reconcile();
  ASSERT_TRUE(waited.ok());
  EXPECT_GT(waited->requeue_after.count(), 0);
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 1);
}

TEST_F(ActorReconcilerTest, ACheckpointPastItsDeadlineIsCleanedUpThoughItRuns) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  driver_.FailNext(Call::kCheckpoint, Status(Code::kDeadlineExceeded, "checkpoint timed out", "timeout"));
  Desire("Suspended");
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED") << "no earlier snapshot to rest on";
  EXPECT_EQ(Reason(api::kConditionReady), "Timeout");
  EXPECT_EQ(ForcedCleanups("timeout"), 1) << "counted under the condition's reason (docs/metrics.md)";
  EXPECT_TRUE(ConditionTrue(api::kConditionCheckpointFailed));
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kNotFound) << "the suspect sandbox was deleted";
  EXPECT_EQ(Get().status.worker_name, "");
  EXPECT_FALSE(HoldsWorker()) << "the worker was freed";
}

TEST_F(ActorReconcilerTest, NvproxyLiveClientsRestsOnThePreviousSnapshotWithItsReason) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  Desire("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const std::string kept = Get().status.latest_snapshot->id;
  // As runsc without -cuda-checkpoint-path does on a live CUDA context: the save fails and
  // the sandbox dies with it.
  driver_.FailNext(Call::kCheckpoint, Status(Code::kFailedPrecondition, "nvproxy: live clients", "nvproxy_live_clients"));
  driver_.SetStateAfterFailedCheckpoint(SandboxState::kStopped);
  Desire("Suspended");
  (void)Reconcile();
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_SUSPENDED") << "rests on its previous snapshot";
  EXPECT_EQ(a.status.latest_snapshot->id, kept);
  EXPECT_EQ(Reason(api::kConditionCheckpointFailed), "NvproxyLiveClients");
  EXPECT_EQ(Reason(api::kConditionReady), "NvproxyLiveClients");
  EXPECT_EQ(ForcedCleanups("nvproxy_live_clients"), 1);
  EXPECT_TRUE(ConditionTrue(api::kConditionCheckpointFailed));
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 2) << "never retried";
  EXPECT_FALSE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, ASandboxThatDiesWhileRunningIsCleanedUp) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  driver_.SetState(SandboxId(), SandboxState::kStopped);
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonSandboxDied);
  EXPECT_EQ(ForcedCleanups("sandbox_died"), 1);
  EXPECT_FALSE(ConditionTrue(api::kConditionCheckpointFailed)) << "no checkpoint was asked";
  EXPECT_FALSE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, AResumeOfAnImageFromAnotherRuntimeBuildFailsTheActor) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  driver_.FailNext(Call::kRestore, Status(Code::kFailedPrecondition, "image from go-other", "version_mismatch"));
  Desire("Running");
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), "VersionMismatch");
  EXPECT_FALSE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, ATransientResumeFailureRestsWhereItWasAndBacksOff) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  driver_.FailNext(Call::kRestore, Status(Code::kInternal, "restore failed", "runtime_error"));
  Desire("Running");
  EXPECT_FALSE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_PAUSED");
  EXPECT_EQ(Reason(api::kConditionReady), "RuntimeError");
  auto waited = Reconcile();
  ASSERT_TRUE(waited.ok());
  EXPECT_GT(waited->requeue_after.count(), 0);
  EXPECT_EQ(driver_.CountCalls("Restore"), 1) << "the retry waits out its backoff";
}

TEST_F(ActorReconcilerTest, ARuntimeThisNodeDoesNotRunFailsTheActor) {
  Create("Running", "microvm");
  (void)Reconcile();
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonRuntimeUnavailable);
  EXPECT_EQ(driver_.CountCalls("Run"), 0);
}

TEST_F(ActorReconcilerTest, ARuntimeWithoutCudaCheckpointIsRefusedByThePreflight) {
  CreateRunningGpuActor();
  driver_.SetSupportsCuda(false);
  Desire("Suspended");
  auto r = Reconcile();
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->requeue_after.count(), 0) << "the preflight is tried again later";
  EXPECT_EQ(StatusName(), "STATUS_RUNNING") << "the workload keeps running";
  EXPECT_FALSE(ConditionTrue(api::kConditionCudaCheckpointReady));
  EXPECT_EQ(Reason(api::kConditionCudaCheckpointReady), "RuntimeLacksCudaCheckpoint");
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 0);
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kRunning);
}

TEST_F(ActorReconcilerTest, APreflightOnADeadSandboxCleansItUp) {
  CreateRunningGpuActor();
  driver_.SetState(SandboxId(), SandboxState::kStopped);  // died since the last liveness check
  Desire("Suspended");
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_FAILED") << "no snapshot to rest on";
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonSandboxDied);
  EXPECT_EQ(driver_.CountCalls("Exec"), 1);
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 0);
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kNotFound);
  EXPECT_FALSE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, AnUnusableSnapshotDirKeepsItRunning) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  // The node's snapshot directory is not a directory any more.
  fs::remove_all(root_ / "snapshots");
  std::ofstream(root_ / "snapshots") << "not a directory";
  Desire("Paused");
  EXPECT_FALSE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
  EXPECT_TRUE(ConditionTrue(api::kConditionCheckpointFailed));
  EXPECT_EQ(Reason(api::kConditionCheckpointFailed), api::kReasonSnapshotDirUnusable);
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 0) << "no checkpoint without a place for its image";
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kRunning);
  EXPECT_TRUE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, ASnapshotThatCannotBeCompletedIsCleanedUp) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  // The checkpoint succeeds, then its image directory is gone before the manifest is sealed.
  driver_.SetAfterCheckpoint([](const std::string& dir) { fs::remove_all(dir); });
  Desire("Paused");
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_FAILED") << "the sandbox was stopped by its checkpoint; nothing to rest on";
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonSnapshotIncomplete);
  EXPECT_EQ(ForcedCleanups("snapshot_incomplete"), 1);
  EXPECT_EQ(ForcedCleanups("sandbox_died"), 0);
  EXPECT_TRUE(ConditionTrue(api::kConditionCheckpointFailed));
  EXPECT_FALSE(Get().status.latest_snapshot.has_value());
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kNotFound);
  EXPECT_FALSE(HoldsWorker());
}

// A filesystem call that throws (one without an error_code) ends the reconcile as a value the
// work queue retries, never a throw, with a Warning Event naming the host's error.
TEST_F(ActorReconcilerTest, AHostExceptionIsAWarningEventNotAThrow) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  driver_.SetAfterCheckpoint([](const std::string& dir) {
    throw fs::filesystem_error("cannot write", dir, std::make_error_code(std::errc::no_space_on_device));
  });
  Desire("Paused");
  Result<ReconcileOutcome> r = Status(Code::kInternal, "not reconciled");
  ASSERT_NO_THROW(r = Reconcile());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "host_error");
  const auto warnings = events_.Warnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings.back().rfind(std::string(api::kReasonHostDiskFull) + ": host error: ", 0), 0u) << warnings.back();
  driver_.SetAfterCheckpoint(nullptr);
  ASSERT_NO_THROW(r = Reconcile());  // the retry recovers the interrupted pause
  EXPECT_NE(StatusName(), "STATUS_PAUSING");
}

TEST_F(ActorReconcilerTest, APausedSnapshotIsCommittedOnSuspend) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  const std::string id = Get().status.latest_snapshot->id;
  Desire("Suspended");
  ASSERT_TRUE(Reconcile().ok());
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_SUSPENDED");
  EXPECT_EQ(a.status.latest_snapshot->id, id) << "the paused snapshot, not a new one";
  EXPECT_EQ(a.status.latest_snapshot->node_name, "");
  EXPECT_EQ(a.status.latest_snapshot->location, store_->StorePath(ns_, kActor, id));
  EXPECT_TRUE(store_->ListLocal(ns_, kActor).empty()) << "the local copy is dropped";
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 1);
}

TEST_F(ActorReconcilerTest, ADeletedSnapshotFailsTheResume) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  ASSERT_TRUE(store_->RemoveLocal(ns_, kActor, Get().status.latest_snapshot->id).ok());
  Desire("Running");
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_FAILED") << "a snapshot that is gone can never be restored";
  EXPECT_EQ(Reason(api::kConditionReady), "SnapshotNotFound");
  EXPECT_EQ(driver_.CountCalls("Restore"), 0);
  EXPECT_FALSE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, AnInvalidSpecStoredUnderAnOlderCrdFailsTheActor) {
  // The CRD's rule on spec.bundle is dropped for a moment, as a CRD older than the agent would
  // lack it: the server stores an Actor the agent's validator refuses.
  auto& cp = ControlPlane::Get();
  const std::string rule = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/bundle/x-kubernetes-validations";
  ASSERT_TRUE(cp.Kubectl({"patch", "crd", "actors.stasis.dev", "--type=json", "-p",
                          R"([{"op":"remove","path":")" + rule + R"("}])"}).success());
  json body = {{"apiVersion", "stasis.dev/v1alpha1"}, {"kind", "Actor"},
               {"metadata", {{"name", kActor}, {"namespace", ns_}}},
               {"spec", {{"bundle", "relative/bundle"}, {"nodeName", node_}, {"desiredState", "Running"}}}};
  bool created = false;
  for (int i = 0; i < 100 && !created; ++i) {  // until the server validates with the new schema
    created = client_->Create(kActorType, ns_, body).ok();
    if (!created) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(cp.InstallStasisApi(), "");
  ASSERT_TRUE(created);
  (void)Reconcile();
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonInvalidSpec);
  EXPECT_NE(Message(api::kConditionReady).find("bundle must be an absolute path"), std::string::npos)
      << Message(api::kConditionReady);
  EXPECT_EQ(driver_.CountCalls("Run"), 0);
  EXPECT_FALSE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, ANewGenerationAtRestIsOnlyAcknowledged) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  const auto calls = driver_.Calls().size();
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"spec", {{"timeouts", {{"checkpointSeconds", 7}}}}}}).ok());
  ASSERT_TRUE(Reconcile().ok());
  const api::Actor a = Get();
  EXPECT_EQ(a.status.observed_generation, a.metadata.generation);
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_PAUSED");
  EXPECT_EQ(driver_.Calls().size(), calls) << "nothing asked of the runtime";
}

TEST_F(ActorReconcilerTest, AResumeWithEveryWorkerHeldWaitsForOne) {
  ASSERT_TRUE(workers_->Claim(api::ActorRef{ns_, "other"}).ok());  // the node's only worker
  Create("Running");
  auto r = Reconcile();
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->requeue_after.count(), 0) << "tried again later";
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonNoFreeWorker);
  EXPECT_NE(StatusName(), "STATUS_FAILED") << "a worker frees one day";
  EXPECT_EQ(driver_.CountCalls("Run"), 0);
  ASSERT_TRUE(workers_->Free(api::ActorRef{ns_, "other"}).ok());
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_TRUE(HoldsWorker());
}

TEST_F(ActorReconcilerTest, ASnapshotOnAnotherNodeIsNotResumedHere) {
  Create("Paused");
  ASSERT_TRUE(Settle("STATUS_SUSPENDED"));  // never started
  PatchStatus({{"status", "STATUS_PAUSED"},
               {"latestSnapshot", {{"id", "s1"}, {"trigger", "Pause"}, {"scope", "Full"},
                                   {"location", "/elsewhere"}, {"nodeName", "other-node"}}}});
  Desire("Running");
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_PAUSED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonSnapshotOnOtherNode);
  EXPECT_FALSE(HoldsWorker()) << "no worker is claimed for it";
}

TEST_F(ActorReconcilerTest, AnInterruptedResumeWhoseSandboxRunsIsRecoveredAsRunning) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  PatchStatus({{"status", "STATUS_RESUMING"}, {"transitionStartTime", "2026-01-01T00:00:00Z"}});
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
  EXPECT_EQ(Reason(api::kConditionProgressing), api::kReasonResumed);
  EXPECT_EQ(driver_.CountCalls("Run") + driver_.CountCalls("Restore"), 1) << "not started twice";
}

TEST_F(ActorReconcilerTest, AnInterruptedPauseWhoseWorkloadRunsPausesAgain) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"spec", {{"desiredState", "Paused"}}}}).ok());
  PatchStatus({{"status", "STATUS_PAUSING"}, {"transitionStartTime", "2026-01-01T00:00:00Z"}});
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
  EXPECT_EQ(Reason(api::kConditionProgressing), api::kReasonCheckpointInterrupted);
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
}

TEST_F(ActorReconcilerTest, AnInterruptedPauseThatCompletedItsSnapshotAdoptsIt) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  // The agent died after the snapshot was complete, before the PAUSED write.
  const std::string id = CompleteLocalSnapshot("Pause");
  ASSERT_FALSE(id.empty());
  driver_.SetState(SandboxId(), SandboxState::kStopped);
  Desire("Paused");
  PatchStatus({{"status", "STATUS_PAUSING"}, {"transitionStartTime", "2026-01-01T00:00:00Z"}});
  ASSERT_TRUE(Reconcile().ok());
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_PAUSED");
  ASSERT_TRUE(a.status.latest_snapshot);
  EXPECT_EQ(a.status.latest_snapshot->id, id);
  EXPECT_EQ(a.status.latest_snapshot->node_name, node_) << "the local copy";
  EXPECT_EQ(Reason(api::kConditionProgressing), api::kReasonRecovered);
  EXPECT_EQ(Message(api::kConditionProgressing), "adopted complete snapshot " + id);
  EXPECT_FALSE(HoldsWorker());
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 0) << "adopted, not taken again";
  EXPECT_FALSE(fs::exists(root_ / "run" / SandboxId())) << "the stopped sandbox's root was left";
  EXPECT_FALSE(fs::exists(root_ / "run" / (SandboxId() + ".actor"))) << "its owner file was left";
}

TEST_F(ActorReconcilerTest, AnInterruptedSuspendAdoptsItsCommittedSnapshot) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  // The agent died after the commit, before the SUSPENDED write: only the store has it.
  const std::string id = CompleteLocalSnapshot("Suspend");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(store_->Commit(ns_, kActor, id, /*just_completed=*/true).ok());
  ASSERT_TRUE(store_->RemoveLocal(ns_, kActor, id).ok());
  driver_.SetState(SandboxId(), SandboxState::kStopped);
  Desire("Suspended");
  PatchStatus({{"status", "STATUS_SUSPENDING"}, {"transitionStartTime", "2026-01-01T00:00:00Z"}});
  ASSERT_TRUE(Reconcile().ok());
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_SUSPENDED");
  ASSERT_TRUE(a.status.latest_snapshot);
  EXPECT_EQ(a.status.latest_snapshot->id, id);
  EXPECT_EQ(a.status.latest_snapshot->node_name, "") << "the committed copy";
  EXPECT_EQ(Reason(api::kConditionProgressing), api::kReasonRecovered);
  EXPECT_EQ(Message(api::kConditionProgressing), "adopted committed snapshot " + id);
  EXPECT_FALSE(HoldsWorker());
  EXPECT_FALSE(fs::exists(root_ / "run" / SandboxId())) << "the stopped sandbox's root was left";
  EXPECT_FALSE(fs::exists(root_ / "run" / (SandboxId() + ".actor"))) << "its owner file was left";
}

TEST_F(ActorReconcilerTest, ACommitRetriedOnceTheStoreIsBackClearsCommitFailed) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  // The store goes away (its mount point now a dangling link).
  fs::rename(root_ / "store", root_ / "store-away");
  fs::create_directory_symlink(root_ / "nowhere", root_ / "store");
  Desire("Suspended");
  EXPECT_FALSE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_PAUSED") << "nothing is lost: the snapshot stays on the node";
  EXPECT_TRUE(ConditionTrue(api::kConditionCommitFailed));
  EXPECT_EQ(Reason(api::kConditionCommitFailed), api::kReasonStoreUnavailable);
  fs::remove(root_ / "store");
  fs::rename(root_ / "store-away", root_ / "store");
  ASSERT_TRUE(Reconcile().ok());
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_SUSPENDED");
  EXPECT_EQ(api::FindCondition(a.status.conditions, api::kConditionCommitFailed), nullptr);
  EXPECT_EQ(a.status.latest_snapshot->node_name, "");
  EXPECT_TRUE(api::IsConditionTrue(a.status.conditions, api::kConditionSuspended));
}

TEST_F(ActorReconcilerTest, ASandboxFrozenForADataArchiveWithoutASnapshotIsThawed) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  driver_.SetState(SandboxId(), SandboxState::kPaused);
  Desire("Paused");
  PatchStatus({{"status", "STATUS_PAUSING"}, {"transitionStartTime", "2026-01-01T00:00:00Z"}});
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(driver_.CountCalls("Thaw"), 1);
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kRunning);
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
}

TEST_F(ActorReconcilerTest, ASandboxOfADeletedActorIsRemoved) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  ASSERT_TRUE(fs::exists(root_ / "run" / SandboxId()));
  // Gone from the cache (its finalizer removed by hand, as if another agent had cleaned it).
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"metadata", {{"finalizers", nullptr}}}}).ok());
  ASSERT_TRUE(client_->Delete(kActorType, ns_, kActor).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kNotFound);
  EXPECT_FALSE(fs::exists(root_ / "run" / SandboxId()));
  EXPECT_FALSE(HoldsWorker());
}

// Host errors (reconcilers/node/host_errors.h), with the texts the real programs print.
// An unwritable log directory fails each start the same way: one condition, one Event, retried
// with backoff until the bound; then the condition says it gave up and nothing is tried until
// the spec changes, when it starts.
TEST_F(ActorReconcilerTest, AHostErrorIsRetriedABoundedNumberOfTimes) {
  NewReconciler(RuntimeDrivers{&driver_, nullptr}, /*host_error_attempts=*/3, std::chrono::milliseconds(1));
  const std::string log = (root_ / "logs" / (SandboxId() + ".log")).string();
  const Status unwritable(Code::kInternal, "runsc run: cannot start runsc: " + log + ": Read-only file system",
                          "runtime_error");
  // Exactly as many failures as the bound: a fourth attempt would start the sandbox.
  for (int i = 0; i < 3; ++i) driver_.FailNext(Call::kRun, unwritable);
  Create("Running");
  for (int i = 0; i < 12; ++i) {
    (void)Reconcile();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // past the 1 ms backoff
  }
  EXPECT_EQ(driver_.CountCalls("Run"), 3) << "bounded: --host-error-attempts";
  api::Actor a = Get();
  EXPECT_NE(std::string(api::ToString(a.status.status)), "STATUS_RUNNING");
  EXPECT_NE(std::string(api::ToString(a.status.status)), "STATUS_FAILED") << "an unwritable directory can be fixed";
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonHostPathNotWritable);
  const api::Condition* ready = api::FindCondition(a.status.conditions, api::kConditionReady);
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->message.rfind("not retried until the spec changes (failed 3 times in a row): ", 0), 0u) << ready->message;
  EXPECT_NE(ready->message.find(log + ": Read-only file system"), std::string::npos) << ready->message;
  // One Event for the failure, one when it gave up: a retry that fails the same way says nothing.
  const auto warnings = events_.Warnings();
  ASSERT_EQ(warnings.size(), 2u) << ::testing::PrintToString(warnings);
  EXPECT_EQ(warnings[0], "ResumeFailed: " + unwritable.message());
  EXPECT_EQ(warnings[1].rfind("ResumeFailed: not retried until the spec changes", 0), 0u) << warnings[1];
  EXPECT_FALSE(HoldsWorker());

  // A new generation (the operator fixed the host and touched the spec) tries again.
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"spec", {{"timeouts", {{"restoreSeconds", 61}}}}}}).ok());
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
}

// A path the kernel refuses as too long never gets shorter: a resume fails the actor at the
// first attempt, and keeps its snapshot, from which a new generation resumes.
TEST_F(ActorReconcilerTest, APermanentHostErrorFailsTheResumeAndKeepsTheSnapshot) {
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  const api::Snapshot kept = *Get().status.latest_snapshot;
  const std::string lock = (root_ / "run" / SandboxId() / (SandboxId() + "_sandbox:" + SandboxId() + ".lock")).string();
  driver_.FailNext(Call::kRestore,
                   Status(Code::kInternal, "runsc restore: exit 128: cannot lock container metadata file: acquiring lock on \"" +
                                               lock + "\": open " + lock + ": file name too long", "runtime_error"));
  Desire("Running");
  (void)Reconcile();
  (void)Reconcile();
  api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonHostPathTooLong);
  EXPECT_EQ(driver_.CountCalls("Restore"), 1) << "never retried at this generation";
  ASSERT_TRUE(a.status.latest_snapshot);
  EXPECT_EQ(a.status.latest_snapshot->id, kept.id);
  EXPECT_TRUE(fs::exists(kept.location + "/manifest.json")) << "a host error never costs a snapshot";
  ASSERT_EQ(events_.Warnings().size(), 1u);
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"spec", {{"timeouts", {{"restoreSeconds", 61}}}}}}).ok());
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(driver_.CountCalls("Restore"), 2) << "restored from the kept snapshot";
}

// A full disk fails the checkpoint while the sandbox lives: it keeps running, with the reason,
// retried at most --host-error-attempts times.
TEST_F(ActorReconcilerTest, ADiskFullCheckpointKeepsRunningWithBoundedRetries) {
  NewReconciler(RuntimeDrivers{&driver_, nullptr}, /*host_error_attempts=*/2, std::chrono::milliseconds(1));
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const Status full(Code::kInternal, "runsc checkpoint: exit 128: checkpoint failed: checkpointing container \"" +
                                         SandboxId() + "\": statefile.NewWriter failed: no space left on device",
                    "runtime_error");
  for (int i = 0; i < 2; ++i) driver_.FailNext(Call::kCheckpoint, full);  // a third attempt would pause it
  Desire("Paused");
  for (int i = 0; i < 8; ++i) {
    (void)Reconcile();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 2);
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
  EXPECT_EQ(driver_.StateOf(SandboxId()), SandboxState::kRunning);
  EXPECT_EQ(Reason(api::kConditionCheckpointFailed), api::kReasonHostDiskFull);
  EXPECT_TRUE(HoldsWorker());
  EXPECT_EQ(events_.Warnings().size(), 2u) << ::testing::PrintToString(events_.Warnings());
}

// The snapshot store read-only (a read-only bind mount: root passes permission bits): the
// suspend's commit fails with HostPathNotWritable, the snapshot stays on the node (PAUSED),
// one Event per new message; after --host-error-attempts the commit is not tried again until
// the spec changes, and then it commits.
TEST_F(ActorReconcilerTest, AReadOnlyStoreStopsCommitRetriesAtTheBound) {
  NewReconciler(RuntimeDrivers{&driver_, nullptr}, /*host_error_attempts=*/2);
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  const std::string store = (root_ / "store").string();
  struct Unmount {
    std::string dir;
    ~Unmount() { umount2(dir.c_str(), MNT_DETACH); }
  } unmount{store};
  ASSERT_EQ(mount(store.c_str(), store.c_str(), nullptr, MS_BIND, nullptr), 0);
  ASSERT_EQ(mount(nullptr, store.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0);
  Desire("Suspended");
  for (int i = 0; i < 5; ++i) (void)Reconcile();
  api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_PAUSED") << "the snapshot stays on the node";
  EXPECT_EQ(a.status.latest_snapshot->node_name, node_);
  EXPECT_TRUE(fs::exists(a.status.latest_snapshot->location + "/manifest.json"));
  EXPECT_EQ(Reason(api::kConditionCommitFailed), api::kReasonHostPathNotWritable);
  const api::Condition* failed = api::FindCondition(a.status.conditions, api::kConditionCommitFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->message.rfind("not retried until the spec changes (failed 2 times in a row): ", 0), 0u) << failed->message;
  EXPECT_NE(failed->message.find("Read-only file system"), std::string::npos) << failed->message;
  EXPECT_EQ(events_.Warnings().size(), 2u) << ::testing::PrintToString(events_.Warnings());

  ASSERT_EQ(umount2(store.c_str(), 0), 0);
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_PAUSED") << "given up: not tried again at this generation";
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"spec", {{"timeouts", {{"restoreSeconds", 61}}}}}}).ok());
  ASSERT_TRUE(Settle("STATUS_SUSPENDED"));
  EXPECT_EQ(Get().status.latest_snapshot->node_name, "") << "committed";
}

}  // namespace
}  // namespace stasis

namespace stasis {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A bundle outside --bundle-root (bundle_confinement.h): FAILED with BundleNotAllowed and a
// Warning Event before any worker is claimed or the runtime called; its snapshot is kept.
TEST_F(ActorReconcilerTest, ABundleOutsideTheRootsFailsTheActor) {
  PausedOnALocalSnapshot();
  const std::string id = Get().status.latest_snapshot->id;
  const fs::path outside = root_ / "elsewhere";
  fs::create_directories(outside / "rootfs");
  std::ofstream(outside / "config.json") << R"({"root": {"path": "rootfs"}})";
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"spec", {{"bundle", outside.string()}, {"desiredState", "Running"}}}}).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonBundleNotAllowed);
  EXPECT_THAT(Message(api::kConditionReady), HasSubstr("not under an allowed bundle root"));
  EXPECT_THAT(events_.Warnings(), Contains(HasSubstr(std::string(api::kReasonBundleNotAllowed) + ": bundle " +
                                                     outside.string())));
  EXPECT_FALSE(HoldsWorker());
  EXPECT_EQ(driver_.CountCalls("Run") + driver_.CountCalls("Restore"), 0);
  ASSERT_TRUE(Get().status.latest_snapshot.has_value()) << "the snapshot is kept";
  EXPECT_EQ(Get().status.latest_snapshot->id, id);
  EXPECT_TRUE(fs::exists(store_->LocalPath(ns_, kActor, id)));
}

// A snapshot taken on an image, its actor now naming a bundle: runsc would restore it onto
// another root filesystem. The manifest (not the status) says so; the restore is refused before
// runsc is called, the actor FAILED with its snapshot kept and its worker given back.
TEST_F(ActorReconcilerTest, ASnapshotTakenOnAnImageIsNotRestoredOntoABundle) {
  Create("Paused");
  ASSERT_TRUE(Settle("STATUS_SUSPENDED"));  // never started
  const std::string digest = "sha256:" + std::string(64, 'a');
  const std::string id = CompleteLocalSnapshot("Pause", digest);
  ASSERT_FALSE(id.empty());
  PatchStatus({{"status", "STATUS_PAUSED"},
               {"latestSnapshot", {{"id", id}, {"trigger", "Pause"}, {"scope", "Full"},
                                   {"location", store_->LocalPath(ns_, kActor, id)}, {"nodeName", node_}}}});
  Desire("Running");
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), "SnapshotImageMismatch");
  EXPECT_THAT(Message(api::kConditionReady), HasSubstr("was taken on image " + digest));
  EXPECT_EQ(driver_.CountCalls("Restore"), 0);
  EXPECT_FALSE(HoldsWorker());
  ASSERT_TRUE(Get().status.latest_snapshot.has_value()) << "the snapshot is kept";
  EXPECT_TRUE(fs::exists(store_->LocalPath(ns_, kActor, id)));
}

// The DaemonSet's layout: operators' bundles in <root>/bundles, which is also the default
// --bundle-root. The agent's GPU bundles live in <root>/gpu-bundles: deleting an actor whose
// sandbox id an operator's bundle happens to be named removes only the agent's directory.
TEST_F(ActorReconcilerTest, DeletingLeavesAnOperatorsBundleOfTheSameName) {
  const fs::path operators = root_ / "bundles" / SandboxId();
  fs::create_directories(operators);
  std::ofstream(operators / "config.json") << "{}";
  const fs::path derived = root_ / kGpuBundlesDir / SandboxId();
  fs::create_directories(derived);
  std::ofstream(derived / "config.json") << "{}";
  Create("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  ASSERT_TRUE(client_->Delete(kActorType, ns_, kActor).ok());
  for (int i = 0; i < 4 && client_->Get(kActorType, ns_, kActor).ok(); ++i) (void)Reconcile();
  ASSERT_FALSE(client_->Get(kActorType, ns_, kActor).ok()) << "the finalizer was not removed";
  EXPECT_TRUE(fs::exists(operators / "config.json")) << "an operator's bundle was deleted";
  EXPECT_FALSE(fs::exists(derived)) << "the agent's own GPU bundle was left";
}

}  // namespace
}  // namespace stasis
