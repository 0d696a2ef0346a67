// The node agent's reconciler against a real kube-apiserver, with the fake runtime driver
// (tests/support/fake_runtime_driver.h) in place of runsc: every action transitions.h can
// decide — checkpoint, resume, recovery of an interrupted transition, cleanup of a dead
// sandbox — and every failure class a runtime reports, each asserted on the Actor the API
// server holds (status, conditions, worker) and on the calls the runtime saw. The same paths
// with real runsc are in tests/e2e/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <sys/mount.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <thread>

#include "api/json_mapping.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/node_workers.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_runtime_driver.h"
#include "tests/support/recorded_events.h"
#include "tests/support/metric_samples.h"
#include "reconcilers/node/sandbox_id.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::ControlPlane;
using testing::FakeRuntimeDriver;
using testing::RecordedEvents;
using Call = FakeRuntimeDriver::Call;

constexpr char kActor[] = "a1";

class ActorReconcilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), ""); }

  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("ar");
    ASSERT_FALSE(ns_.empty());
    node_ = ns_;  // a node of this test's own: Workers are cluster-scoped
    root_ = fs::temp_directory_path() / ("stasis-ar-" + ns_);
    fs::remove_all(root_);
    fs::create_directories(root_ / "snapshots");
    fs::create_directories(root_ / "store");
    fs::create_directories(root_ / "bundles" / "app" / "rootfs");
    std::ofstream(root_ / "bundles" / "app" / "config.json") << R"({"root": {"path": "rootfs"}})";
    client_ = ControlPlane::Get().NewClient();
    metrics_ = std::make_unique<SnapshotMetrics>(registry_);
    store_ = std::make_unique<SnapshotStore>((root_ / "snapshots").string(), (root_ / "store").string());
    workers_ = std::make_unique<NodeWorkers>(*client_, node_, std::vector<std::vector<std::string>>{{}}, metrics_.get());
    ASSERT_TRUE(workers_->Register().ok());
    NewReconciler(RuntimeDrivers{&driver_, nullptr});
  }

  void TearDown() override { fs::remove_all(root_); }

  void NewReconciler(RuntimeDrivers drivers, int host_error_attempts = 5,
                     std::chrono::milliseconds retry_base = std::chrono::seconds(1)) {
    ActorReconcilerOptions o;
    o.node = node_;
    o.root = root_.string();
    o.bundle_roots.roots = {(root_ / "bundles").string()};
    o.pause_durability = Durability::kSynced;
    o.host_error_attempts = host_error_attempts;
    o.retry_base = retry_base;
    reconciler_ = std::make_unique<ActorReconciler>(
        o, *client_, [this](const std::string& key) { return cache_.Get(key); }, drivers, *store_, *workers_,
        *metrics_, &events_);
  }

  void Create(const std::string& desired, const std::string& runtime = "gvisor") {
    api::Actor a;
    a.metadata.namespace_ = ns_;
    a.metadata.name = kActor;
    a.spec.bundle = (root_ / "bundles" / "app").string();
    a.spec.node_name = node_;
    json body = api::ActorTypedJson(a);
    body["spec"]["desiredState"] = desired;
    body["spec"]["runtime"] = runtime;
    ASSERT_TRUE(client_->Create(kActorType, ns_, body).ok());
  }

  // One reconcile, on a cache refreshed from the API server as the informer would have it.
  Result<ReconcileOutcome> Reconcile() {
    auto live = client_->Get(kActorType, ns_, kActor);
    if (live.ok()) {
      cache_.Upsert(std::make_shared<const json>(*live));
    } else {
      cache_.Remove(ns_ + "/" + kActor);
    }
    return reconciler_->Reconcile(Request{ns_, kActor});
  }

  api::Actor Get() {
    auto live = client_->Get(kActorType, ns_, kActor);
    EXPECT_TRUE(live.ok());
    auto a = api::ActorFromJson(live.ok() ? *live : json::object());
    return a.ok() ? *a : api::Actor{};
  }

  std::string StatusName() { return api::ToString(Get().status.status); }

  // Reconciles until the actor reaches `want` (at most 6 reconciles).
  bool Settle(const std::string& want) {
    for (int i = 0; i < 6 && StatusName() != want; ++i) (void)Reconcile();
    return StatusName() == want;
  }

  void Desire(const std::string& state) {
    ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"spec", {{"desiredState", state}}}}).ok());
  }

  void PatchStatus(const json& status) {
    ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"status", status}}, "status").ok());
  }

  std::string Reason(const char* type) {
    const api::Actor a = Get();
    const api::Condition* c = api::FindCondition(a.status.conditions, type);
    return c ? c->reason : "";
  }
  std::string Message(const char* type) {
    const api::Actor a = Get();
    const api::Condition* c = api::FindCondition(a.status.conditions, type);
    return c ? c->message : "";
  }
  bool ConditionTrue(const char* type) { return api::IsConditionTrue(Get().status.conditions, type); }
  // stasis_forced_cleanups_total{reason} (-1: no such series).
  double ForcedCleanups(const std::string& reason) {
    return testing::SampleValue(registry_, "stasis_forced_cleanups_total", "reason", reason);
  }

  // A complete node-local snapshot of the actor, as a checkpoint leaves it; its id ("" on error).
  std::string CompleteLocalSnapshot(const std::string& trigger, const std::string& image_digest = "") {
    const std::string id = NewSnapshotId();
    auto dir = store_->BeginLocal(ns_, kActor, id);
    if (!dir.ok()) return "";
    std::ofstream(*dir + "/checkpoint.img") << "image";
    SnapshotManifest m;
    m.id = id;
    m.ns = ns_;
    m.name = kActor;
    m.scope = "Full";
    m.trigger = trigger;
    m.image_digest = image_digest;
    return store_->CompleteLocal(m).ok() ? id : "";
  }

  std::string SandboxId() const { return SandboxIdFor(ns_, kActor); }

  // A GPU actor RUNNING on this node's worker, its status as a resume leaves it (a GPU resume
  // needs CDI specs this test does not have), for the checkpoint's GPU preflight.
  void CreateRunningGpuActor() {
    json body = {{"apiVersion", "stasis.dev/v1alpha1"}, {"kind", "Actor"},
                 {"metadata", {{"name", kActor}, {"namespace", ns_}}},
                 {"spec", {{"bundle", (root_ / "bundles" / "app").string()}, {"nodeName", node_},
                           {"desiredState", "Running"}, {"gpu", {{"count", 1}}}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, body).ok());
    auto worker = workers_->Claim(api::ActorRef{ns_, kActor}, 0);
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    PatchStatus({{"status", "STATUS_RUNNING"}, {"nodeName", node_}, {"workerName", worker->metadata.name},
                 {"sandboxId", SandboxId()}});
    driver_.SetState(SandboxId(), SandboxState::kRunning);
    ASSERT_TRUE(HoldsWorker());
  }
  bool HoldsWorker() { return workers_->HeldBy(api::ActorRef{ns_, kActor}).has_value(); }

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
  // Observations of stasis_snapshot_duration_seconds{operation=restore_usable, result}.
  uint64_t RestoreUsableCount(const std::string& result) {
    uint64_t n = 0;
    for (const auto& f : registry_.Collect()) {
      if (f.name != "stasis_snapshot_duration_seconds") continue;
      for (const auto& m : f.metric) {
        bool op = false, res = false;
        for (const auto& l : m.label) {
          op = op || (l.name == "operation" && l.value == "restore_usable");
          res = res || (l.name == "result" && l.value == result);
        }
        if (op && res) n += m.histogram.sample_count;
      }
    }
    return n;
  }

  std::string ns_, node_;
  fs::path root_;
  prometheus::Registry registry_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<SnapshotMetrics> metrics_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<NodeWorkers> workers_;
  ObjectStore cache_;
  FakeRuntimeDriver driver_;
  RecordedEvents events_;
  std::unique_ptr<ActorReconciler> reconciler_;
};

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

// A CUDA snapshot's restore ends after runsc restore returned: the agent waits for it before
// Ready (restore_readiness.h). A restore without CUDA state is Restored at once, a boot has no
// Restored condition.
TEST_F(ActorReconcilerTest, ACudaRestoreIsReadyOnlyOnceTheRuntimeHasFinishedIt) {
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
  EXPECT_EQ(RestoreUsableCount("success"), 1u);
  EXPECT_EQ(testing::SampleValue(registry_, "stasis_snapshot_operations_total", "operation", "restore"), 1)
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
TEST_F(ActorReconcilerTest, ACudaRestoreThatFailsAfterRunningIsAFailedResume) {
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
  EXPECT_EQ(RestoreUsableCount("error"), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  EXPECT_EQ(Reason(api::kConditionRestored), api::kReasonRestoreComplete);
  EXPECT_TRUE(ConditionTrue(api::kConditionReady));
}

// An agent that restarted while a restore was finishing (RUNNING, Restored=False Restoring)
// waits for it; a pause asked for meanwhile starts only after it.
TEST_F(ActorReconcilerTest, ARestoreStillFinishingAfterARestartIsWaitedForBeforeAPause) {
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
  Create("Paused");
  ASSERT_TRUE(Settle("STATUS_SUSPENDED"));  // never started
  const std::string id = CompleteLocalSnapshot("Pause");
  ASSERT_FALSE(id.empty());
  PatchStatus({{"status", "STATUS_PAUSED"},
               {"latestSnapshot", {{"id", id}, {"trigger", "Pause"}, {"scope", "Full"},
                                   {"location", store_->LocalPath(ns_, kActor, id)}, {"nodeName", node_}}}});
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
