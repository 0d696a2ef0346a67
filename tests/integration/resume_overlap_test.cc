// A resume's Worker claim and RESUMING write beside its restore (reconcilers/node/
// resume_overlap.cc), against a real kube-apiserver with the fake runtime driver: the intent
// record is on disk before the runtime starts and gone once the API says RESUMING; a restart
// that finds a record whose write never landed adopts the running sandbox on its worker; a
// stale record is ignored; a RESUMING write that fails undoes the start.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "reconcilers/node/resume_intent.h"
#include "tests/support/actor_reconciler_fixture.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::ActorReconcilerTest;
using testing::kActor;

class ResumeOverlapTest : public ActorReconcilerTest {
 protected:
  std::string IntentFile() { return IntentPath((root_ / "run" / SandboxId()).string()); }
  std::string WorkerName() {
    auto w = workers_->HeldBy(api::ActorRef{ns_, kActor});
    return w ? w->metadata.name : "";
  }
  // An actor PAUSED on a complete local snapshot and asking to run again, with no worker held:
  // what a resume starts from.
  void PausedWantingToRun() {
    PausedOnALocalSnapshot();
    Desire("Running");
  }
  // What an agent killed right after runsc restore started leaves behind: the intent record for
  // the actor as it is now, the sandbox (root, owner file) running on the node's one worker.
  void LeaveAnInterruptedOverlappedStart() {
    auto live = client_->Get(kActorType, ns_, kActor);
    ASSERT_TRUE(live.ok());
    cache_.Upsert(std::make_shared<const json>(*live));  // what the new agent's informer has
    const api::Actor before = Get();
    api::ActorStatus resuming = before.status;
    resuming.status = api::ActorState::kResuming;
    resuming.worker_name = node_ + "-slot0";
    resuming.sandbox_id = SandboxId();
    resuming.node_name = node_;
    fs::create_directories(root_ / "run" / SandboxId());
    std::ofstream(root_ / "run" / (SandboxId() + ".actor")) << ns_ << "/" << kActor;
    ASSERT_TRUE(WriteIntent(IntentFile(), IntentOf(before, resuming)).ok());
    driver_.SetState(SandboxId(), SandboxState::kRunning);
  }
};

TEST_F(ResumeOverlapTest, TheIntentIsOnDiskWhileTheRestoreRunsAndGoneAfter) {
  PausedWantingToRun();
  std::optional<ResumeIntent> seen;
  driver_.SetBeforeRestore([&](const SandboxRef&) { seen = ReadIntent(IntentFile()); });
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(driver_.CountCalls("Restore"), 1);
  ASSERT_TRUE(seen.has_value()) << "no intent record when the runtime was asked to restore";
  EXPECT_EQ(seen->sandbox_id, SandboxId());
  EXPECT_EQ(seen->worker_name, WorkerName()) << "the worker the record names is the one held";
  EXPECT_EQ(seen->node_name, node_);
  EXPECT_FALSE(fs::exists(IntentFile())) << "left behind once the API said RESUMING";
  const api::Actor a = Get();
  EXPECT_EQ(a.status.worker_name, WorkerName());
  EXPECT_EQ(a.status.sandbox_id, SandboxId());
}

TEST_F(ResumeOverlapTest, SerialWritesLeaveNoIntent) {
  overlap_resume_writes_ = false;
  NewReconciler(RuntimeDrivers{&driver_, nullptr});
  PausedWantingToRun();
  bool record = true;
  std::string status_at_restore;
  driver_.SetBeforeRestore([&](const SandboxRef&) {
    record = fs::exists(IntentFile());
    status_at_restore = StatusName();
  });
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_FALSE(record);
  EXPECT_EQ(status_at_restore, "STATUS_RESUMING") << "serial: RESUMING is in the API before the restore";
}

TEST_F(ResumeOverlapTest, ARestartAdoptsTheSandboxOfAResumeWhoseWritesNeverLanded) {
  PausedWantingToRun();
  // What an agent killed right after runsc restore started leaves: the record, the sandbox
  // running, and neither the claim nor RESUMING in the API.
  LeaveAnInterruptedOverlappedStart();
  ASSERT_FALSE(HoldsWorker());
  NewReconciler(RuntimeDrivers{&driver_, nullptr});  // the new agent
  ASSERT_TRUE(reconciler_->RecoverAtStartup().ok());
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(driver_.CountCalls("Restore") + driver_.CountCalls("Run"), 0) << "adopted, not started again";
  EXPECT_EQ(driver_.CountCalls("Delete"), 0) << "the running sandbox was kept";
  EXPECT_EQ(WorkerName(), node_ + "-slot0") << "the worker the sandbox runs on is claimed";
  EXPECT_EQ(Get().status.worker_name, node_ + "-slot0");
  EXPECT_FALSE(fs::exists(IntentFile()));
}

TEST_F(ResumeOverlapTest, ARestartKeepsTheWorkerAClaimHeldBeforeTheRecordWasRead) {
  PausedWantingToRun();
  LeaveAnInterruptedOverlappedStart();
  ASSERT_TRUE(workers_->ClaimNamed(node_ + "-slot0", api::ActorRef{ns_, kActor}).ok());  // the claim landed
  NewReconciler(RuntimeDrivers{&driver_, nullptr});
  ASSERT_TRUE(reconciler_->RecoverAtStartup().ok());
  EXPECT_EQ(WorkerName(), node_ + "-slot0") << "start-up recovery freed the worker of a resume under way";
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(driver_.CountCalls("Restore") + driver_.CountCalls("Run"), 0);
  EXPECT_EQ(WorkerName(), node_ + "-slot0");
}

TEST_F(ResumeOverlapTest, ARecordTheActorHasMovedPastIsIgnored) {
  PausedWantingToRun();
  LeaveAnInterruptedOverlappedStart();
  // Written after the record: its RESUMING write was refused, or never sent.
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"metadata", {{"annotations", {{"example.com/touched", "1"}}}}}}).ok());
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_GE(driver_.CountCalls("Delete"), 1) << "the sandbox of the stale record was deleted";
  EXPECT_EQ(driver_.CountCalls("Restore"), 1) << "and the actor restored anew";
  EXPECT_TRUE(HoldsWorker());
}

TEST_F(ResumeOverlapTest, AResumingWriteThatFailsUndoesTheStart) {
  PausedWantingToRun();
  // The reconcile starts from a cached copy older than the API's: the RESUMING write, sent
  // beside the restore with that copy's resourceVersion, meets a conflict.
  auto stale = client_->Get(kActorType, ns_, kActor);
  ASSERT_TRUE(stale.ok());
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"metadata", {{"annotations", {{"example.com/touched", "1"}}}}}}).ok());
  cache_.Upsert(std::make_shared<const json>(*stale));
  std::vector<std::string> status_at_restores;
  driver_.SetBeforeRestore([&](const SandboxRef&) { status_at_restores.push_back(StatusName()); });
  auto r = reconciler_->Reconcile(Request{ns_, kActor});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(StatusName(), "STATUS_RUNNING") << "decided again on a quorum read, and started";
  EXPECT_EQ(driver_.CountCalls("Restore"), 2) << "the undone start, then the one that counts";
  EXPECT_GE(driver_.CountCalls("Delete"), 1) << "the undone start's sandbox was deleted";
  EXPECT_TRUE(HoldsWorker());
  EXPECT_EQ(Get().status.worker_name, WorkerName()) << "one worker, the one RUNNING names";
  EXPECT_FALSE(fs::exists(IntentFile()));
}

}  // namespace
}  // namespace stasis
