// No destructive action on a cache miss (reconcilers/node/stray_state.h), against a real
// kube-apiserver with the fake runtime driver: two node agents' reconcilers, A and B, driven
// directly with caches the test fills as their field-selected informers would. An actor
// leaves A's cache when spec.nodeName changes; whatever order the informers deliver A's
// DELETED and the ADDED (on A's other informer, or on B), A's sandbox and its node-local
// snapshot survive until a quorum read finds the actor gone. The CRD refuses the move itself
// while the actor holds state on its node.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/json_mapping.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/node_workers.h"
#include "reconcilers/node/sandbox_id.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "reconcilers/node/stray_state.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_runtime_driver.h"
#include "tests/support/recorded_events.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::ControlPlane;
using testing::FakeRuntimeDriver;

constexpr char kActor[] = "mover";

// One node agent: its reconciler, runtime, disk, workers and the cache of its informers.
struct Agent {
  std::string node;
  fs::path root;
  FakeRuntimeDriver driver;
  prometheus::Registry registry;
  std::unique_ptr<SnapshotMetrics> metrics;
  std::unique_ptr<SnapshotStore> store;
  std::unique_ptr<NodeWorkers> workers;
  ObjectStore cache;
  testing::RecordedEvents events;
  std::unique_ptr<ActorReconciler> reconciler;
};

class StrayStateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), ""); }

  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("stray");
    ASSERT_FALSE(ns_.empty());
    client_ = ControlPlane::Get().NewClient();
    shared_store_ = fs::temp_directory_path() / ("stasis-stray-store-" + ns_);
    fs::create_directories(shared_store_);
    for (auto* a : {&a_, &b_}) MakeAgent(*a, ns_ + (a == &a_ ? "-a" : "-b"));
  }
  void TearDown() override {
    for (auto* a : {&a_, &b_}) fs::remove_all(a->root);
    fs::remove_all(shared_store_);
  }

  void MakeAgent(Agent& a, const std::string& node) {
    a.node = node;
    a.root = fs::temp_directory_path() / ("stasis-stray-" + node);
    fs::remove_all(a.root);
    fs::create_directories(a.root / "snapshots");
    fs::create_directories(a.root / "bundles" / "app");
    a.metrics = std::make_unique<SnapshotMetrics>(a.registry);
    a.store = std::make_unique<SnapshotStore>((a.root / "snapshots").string(), shared_store_.string());
    a.workers = std::make_unique<NodeWorkers>(*client_, node, std::vector<std::vector<std::string>>{{}}, a.metrics.get());
    ASSERT_TRUE(a.workers->Register().ok());
    ActorReconcilerOptions o;
    o.node = node;
    o.root = a.root.string();
    o.bundle_roots.roots = {(a.root / "bundles").string()};
    o.pause_durability = Durability::kSynced;
    a.reconciler = std::make_unique<ActorReconciler>(
        o, *client_, [&a](const std::string& key) { return a.cache.Get(key); }, RuntimeDrivers{&a.driver, nullptr},
        *a.store, *a.workers, *a.metrics, &a.events);
  }

  // The informer's view: the actor in `agent`'s cache as the API has it (ADDED/MODIFIED), or
  // not at all (DELETED); then one reconcile.
  Result<ReconcileOutcome> Deliver(Agent& agent, bool present) {
    if (present) {
      auto live = client_->Get(kActorType, ns_, kActor);
      EXPECT_TRUE(live.ok());
      if (live.ok()) agent.cache.Upsert(std::make_shared<const json>(*live));
    } else {
      agent.cache.Remove(ns_ + "/" + kActor);
    }
    return agent.reconciler->Reconcile(Request{ns_, kActor});
  }

  json Live() {
    auto live = client_->Get(kActorType, ns_, kActor);
    return live.ok() ? *live : json::object();
  }
  std::string StatusName() { return Live().value("/status/status"_json_pointer, std::string()); }

  // RUNNING on A, with its sandbox directory and a node-local paused snapshot on A's disk.
  void RunningOnA() {
    api::Actor actor;
    actor.metadata.namespace_ = ns_;
    actor.metadata.name = kActor;
    actor.spec.bundle = (a_.root / "bundles" / "app").string();
    actor.spec.node_name = a_.node;
    ASSERT_TRUE(client_->Create(kActorType, ns_, api::ActorTypedJson(actor)).ok());
    for (int i = 0; i < 6 && StatusName() != "STATUS_RUNNING"; ++i) (void)Deliver(a_, true);
    ASSERT_EQ(StatusName(), "STATUS_RUNNING");
    deletes_before_ = a_.driver.CountCalls("Delete");  // a resume clears any leftover first
    fs::create_directories(SandboxRoot());
    const std::string id = NewSnapshotId();
    auto dir = a_.store->BeginLocal(ns_, kActor, id);
    ASSERT_TRUE(dir.ok());
    std::ofstream(*dir + "/checkpoint.img") << "image";
    SnapshotManifest m;
    m.id = id;
    m.ns = ns_;
    m.name = kActor;
    m.scope = "Full";
    m.trigger = "Pause";
    ASSERT_TRUE(a_.store->CompleteLocal(m).ok());
  }

  fs::path SandboxRoot() const { return a_.root / "run" / SandboxIdFor(ns_, kActor); }

  // A's sandbox still runs, its directory and its local snapshot are still there.
  void ExpectAStateSurvives(const std::string& when) {
    EXPECT_EQ(a_.driver.CountCalls("Delete"), deletes_before_) << when;
    EXPECT_EQ(a_.driver.StateOf(SandboxIdFor(ns_, kActor)), SandboxState::kRunning) << when;
    EXPECT_TRUE(fs::exists(SandboxRoot())) << when;
    EXPECT_EQ(a_.store->ListLocal(ns_, kActor).size(), 1u) << when;
  }

  stasis::Status PatchSpec(const json& spec) {
    auto r = client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"spec", spec}});
    return r.ok() ? OkStatus() : r.status();
  }

  void MoveToB(bool deleted_first);

  std::string ns_;
  std::unique_ptr<KubeClient> client_;
  fs::path shared_store_;
  Agent a_, b_;
  int deletes_before_ = 0;
};

TEST_F(StrayStateTest, MovingAnActorWithStateOnItsNodeIsRefused) {
  RunningOnA();
  stasis::Status moved = PatchSpec({{"nodeName", b_.node}});
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.message().find("suspend it first"), std::string::npos) << moved.message();
  // Unpinning, or pinning where it is, is no move.
  EXPECT_TRUE(PatchSpec({{"nodeName", ""}}).ok());
  EXPECT_TRUE(PatchSpec({{"nodeName", a_.node}}).ok());
}

// Unpinned while it runs: A's pinned informer drops it (DELETED), its bound informer takes it
// (ADDED). DELETED first must not kill the sandbox nor remove the snapshot.
TEST_F(StrayStateTest, DeletedBeforeAddedOnOneAgentKeepsTheSandbox) {
  RunningOnA();
  ASSERT_TRUE(PatchSpec({{"nodeName", ""}}).ok());
  auto r = Deliver(a_, false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectAStateSurvives("after DELETED");
  r = Deliver(a_, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectAStateSurvives("after ADDED");
  EXPECT_EQ(StatusName(), "STATUS_RUNNING");
}

// Moved to B with state left on A (the CRD allows it once the actor is FAILED, which may keep
// a paused snapshot): in either order of A's DELETED and B's ADDED, A keeps its sandbox and
// snapshot and says so; once the actor is deleted for good, A removes them.
void StrayStateTest::MoveToB(bool deleted_first) {
  RunningOnA();
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                             {{"status", {{"status", "STATUS_FAILED"}}}}, "status")
                  .ok());
  ASSERT_TRUE(PatchSpec({{"nodeName", b_.node}, {"desiredState", "Suspended"}}).ok());
  if (!deleted_first) (void)Deliver(b_, true);
  auto r = Deliver(a_, false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(kStrayRecheck));
  if (deleted_first) (void)Deliver(b_, true);
  ExpectAStateSurvives("moved");
  EXPECT_GE(a_.events.Count(kReasonLocalStateKept), 1);

  // Deleted for good: A's recheck finds it NotFound and cleans up.
  ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"metadata", {{"finalizers", nullptr}}}}).ok());
  ASSERT_TRUE(client_->Delete(kActorType, ns_, kActor).ok());
  ASSERT_TRUE(a_.reconciler->Reconcile(Request{ns_, kActor}).ok());
  EXPECT_EQ(a_.driver.CountCalls("Delete"), deletes_before_ + 1);
  EXPECT_FALSE(fs::exists(SandboxRoot()));
  EXPECT_TRUE(a_.store->ListLocal(ns_, kActor).empty());
}

TEST_F(StrayStateTest, MovedDeletedBeforeAddedKeepsState) { MoveToB(true); }
TEST_F(StrayStateTest, MovedAddedBeforeDeletedKeepsState) { MoveToB(false); }

}  // namespace
}  // namespace stasis
