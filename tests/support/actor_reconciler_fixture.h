// The fixture of the node agent's reconciler against a real kube-apiserver with the fake
// runtime driver (tests/integration/actor_reconciler_test.cc and cuda_restore_test.cc):
// one namespace, node and root per test, a reconciler, and reads of what the API server holds.
#pragma once

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "api/json_mapping.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/node_workers.h"
#include "reconcilers/node/sandbox_id.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_runtime_driver.h"
#include "tests/support/metric_samples.h"
#include "tests/support/recorded_events.h"

namespace stasis::testing {

inline constexpr char kActor[] = "a1";

class ActorReconcilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), ""); }

  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("ar");
    ASSERT_FALSE(ns_.empty());
    node_ = ns_;  // a node of this test's own: Workers are cluster-scoped
    root_ = std::filesystem::temp_directory_path() / ("stasis-ar-" + ns_);
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "snapshots");
    std::filesystem::create_directories(root_ / "store");
    std::filesystem::create_directories(root_ / "bundles" / "app" / "rootfs");
    std::ofstream(root_ / "bundles" / "app" / "config.json") << R"({"root": {"path": "rootfs"}})";
    client_ = ControlPlane::Get().NewClient();
    metrics_ = std::make_unique<SnapshotMetrics>(registry_);
    store_ = std::make_unique<SnapshotStore>((root_ / "snapshots").string(), (root_ / "store").string());
    workers_ = std::make_unique<NodeWorkers>(*client_, node_, std::vector<std::vector<std::string>>{{}}, metrics_.get());
    ASSERT_TRUE(workers_->Register().ok());
    NewReconciler(RuntimeDrivers{&driver_, nullptr});
  }

  void TearDown() override { std::filesystem::remove_all(root_); }

  void NewReconciler(RuntimeDrivers drivers, int host_error_attempts = 5,
                     std::chrono::milliseconds retry_base = std::chrono::seconds(1)) {
    ActorReconcilerOptions o;
    o.node = node_;
    o.root = root_.string();
    o.bundle_roots.roots = {(root_ / "bundles").string()};
    o.pause_durability = Durability::kSynced;
    o.host_error_attempts = host_error_attempts;
    o.retry_base = retry_base;
    o.overlap_resume_writes = overlap_resume_writes_;
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

  // The actor created Paused (never started), then PAUSED on a complete local snapshot of this
  // node, as a pause leaves it.
  void PausedOnALocalSnapshot() {
    Create("Paused");
    ASSERT_TRUE(Settle("STATUS_SUSPENDED"));  // never started
    const std::string id = CompleteLocalSnapshot("Pause");
    ASSERT_FALSE(id.empty());
    PatchStatus({{"status", "STATUS_PAUSED"},
                 {"latestSnapshot", {{"id", id}, {"trigger", "Pause"}, {"scope", "Full"},
                                     {"location", store_->LocalPath(ns_, kActor, id)}, {"nodeName", node_}}}});
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


  std::string ns_, node_;
  std::filesystem::path root_;
  prometheus::Registry registry_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<SnapshotMetrics> metrics_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<NodeWorkers> workers_;
  ObjectStore cache_;
  bool overlap_resume_writes_ = true;  // the next NewReconciler's --resume-writes
  FakeRuntimeDriver driver_;
  RecordedEvents events_;
  std::unique_ptr<ActorReconciler> reconciler_;
};

}  // namespace stasis::testing
