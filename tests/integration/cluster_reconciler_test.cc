// The cluster reconciler's node-loss checks against a real kube-apiserver, with a fake clock
// and hand-filled caches: a cache that lags the API server (its watch reconnecting after an
// outage) must not get a live node's actors force-cleaned, and a replica that has just become
// leader gives every node a whole lease duration before it counts as lost. The same actors are
// cleaned once the Lease the API server holds really has expired.
#include "reconcilers/cluster/cluster_reconciler.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <chrono>
#include <string>

#include "api/json_mapping.h"
#include "base/time.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/node_heartbeat.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_clock.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::ControlPlane;
using testing::FakeClock;

class ClusterReconcilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
  }

  ClusterReconcilerTest()
      : client_(ControlPlane::Get().NewClient()),
        metrics_(registry_),
        reconciler_(ClusterReconcilerOptions{}, *client_, actors_, workers_, leases_, metrics_,
                    nullptr, clock_) {}

  void SetUp() override {
    ns_ = "crt-" + std::to_string(counter_++);
    ASSERT_EQ(ControlPlane::Get().Kubectl({"create", "namespace", ns_}).exit_code, 0);
  }

  // A RUNNING actor pinned to `node` holding a worker there, in the API and in the cache.
  void RunningActor(const std::string& name, const std::string& node) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}, {"nodeName", node}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, a).ok());
    auto r = client_->Patch(kActorType, ns_, name, PatchType::kMerge,
                            {{"status",
                              {{"status", "STATUS_RUNNING"},
                               {"nodeName", node},
                               {"workerName", node + "-slot0"}}}},
                            "status");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    actors_.Upsert(std::make_shared<const json>(*r));
  }

  json LeaseObject(const std::string& node, Clock::SystemTimePoint renew) const {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", NodeLeaseName(node)}, {"namespace", "stasis-system"}}},
            {"spec",
             {{"holderIdentity", node},
              {"leaseDurationSeconds", 10},
              {"renewTime", FormatMicroTime(renew)}}}};
  }

  // The node's heartbeat Lease as the API server holds it, renewed at `renew`.
  void ServerLease(const std::string& node, Clock::SystemTimePoint renew) {
    json lease = LeaseObject(node, renew);
    auto got = client_->Get(kLeaseType, "stasis-system", NodeLeaseName(node));
    if (got.ok()) {
      auto r = client_->Patch(kLeaseType, "stasis-system", NodeLeaseName(node), PatchType::kMerge,
                              {{"spec", lease["spec"]}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    } else {
      ASSERT_TRUE(client_->Create(kLeaseType, "stasis-system", lease).ok());
    }
  }

  // The same Lease as the controller's cache holds it.
  void CachedLease(const std::string& node, Clock::SystemTimePoint renew) {
    leases_.Upsert(std::make_shared<const json>(LeaseObject(node, renew)));
  }

  std::string StatusOf(const std::string& name) {
    auto a = client_->Get(kActorType, ns_, name);
    return a.ok() ? a->value("/status/status"_json_pointer, std::string()) : "<" + a.status().ToString() + ">";
  }

  std::string StuckReason(const std::string& name) {
    auto a = client_->Get(kActorType, ns_, name);
    if (!a.ok()) return "";
    for (const auto& c : a->value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") == "Stuck" && c.value("status", "") == "True") return c.value("reason", "");
    }
    return "";
  }

  void Reconcile(const std::string& name) {
    // The cache follows the API for the actor itself (the reconcile decides on a quorum read).
    auto live = client_->Get(kActorType, ns_, name);
    ASSERT_TRUE(live.ok());
    actors_.Upsert(std::make_shared<const json>(*live));
    auto r = reconciler_.Reconcile(Request{ns_, name});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  static inline int counter_ = 0;
  std::string ns_;
  std::unique_ptr<KubeClient> client_;
  FakeClock clock_;
  prometheus::Registry registry_;
  ClusterMetrics metrics_;
  ObjectStore actors_, workers_, leases_;
  ClusterReconciler reconciler_;
};

TEST_F(ClusterReconcilerTest, AStaleCacheDoesNotCostALiveNodeItsActors) {
  reconciler_.StartedLeading();
  clock_.Advance(60s);  // leading for longer than any lease here
  RunningActor("a1", "stale-n1");
  // The cache still holds the renewal from before an outage; the agent has renewed since.
  CachedLease("stale-n1", clock_.WallNow() - 30s);
  ServerLease("stale-n1", clock_.WallNow() - 1s);
  ASSERT_EQ(reconciler_.NodeAlive("stale-n1"), std::optional<bool>(false));  // what the cache says
  Reconcile("a1");
  EXPECT_EQ(StatusOf("a1"), "STATUS_RUNNING");
  EXPECT_EQ(StuckReason("a1"), "");

  // Once the server's Lease has expired too, the node is lost and the actor cleaned.
  ServerLease("stale-n1", clock_.WallNow() - 30s);
  Reconcile("a1");
  EXPECT_EQ(StatusOf("a1"), "STATUS_FAILED");
  EXPECT_EQ(StuckReason("a1"), "NodeLost");
}

TEST_F(ClusterReconcilerTest, ANewLeaderGivesEveryNodeALeaseDurationFirst) {
  // The Lease expired long ago (an API-server outage the new leader just came through): no
  // node counts as lost until this replica has led for its 10 s lease duration.
  RunningActor("a2", "grace-n2");
  CachedLease("grace-n2", clock_.WallNow() - 60s);
  ServerLease("grace-n2", clock_.WallNow() - 60s);
  reconciler_.StartedLeading();
  clock_.Advance(9s);
  Reconcile("a2");
  EXPECT_EQ(StatusOf("a2"), "STATUS_RUNNING");
  EXPECT_EQ(StuckReason("a2"), "");

  clock_.Advance(2s);
  Reconcile("a2");
  EXPECT_EQ(StatusOf("a2"), "STATUS_FAILED");
  EXPECT_EQ(StuckReason("a2"), "NodeLost");
}

TEST_F(ClusterReconcilerTest, DeletionWaitsForAConfirmedNodeLoss) {
  reconciler_.StartedLeading();
  clock_.Advance(60s);
  RunningActor("a3", "del-n3");
  ASSERT_TRUE(client_->Patch(kActorType, ns_, "a3", PatchType::kMerge,
                             {{"metadata", {{"finalizers", {"stasis.dev/actor-cleanup"}}}}})
                  .ok());
  ASSERT_TRUE(client_->Delete(kActorType, ns_, "a3").ok());
  CachedLease("del-n3", clock_.WallNow() - 30s);
  ServerLease("del-n3", clock_.WallNow() - 1s);
  Reconcile("a3");  // the agent is alive: it finishes the deletion, not the controller
  EXPECT_EQ(StatusOf("a3"), "STATUS_RUNNING");

  ServerLease("del-n3", clock_.WallNow() - 30s);
  Reconcile("a3");
  auto gone = client_->Get(kActorType, ns_, "a3");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
}

// The binder sends a GPU actor only to a node with a free worker holding enough GPUs, and a CPU
// actor only to a CPU slot (never to a GPU another actor could use); an actor no worker suits
// stays unbound.
TEST_F(ClusterReconcilerTest, BindsGpuActorsToGpuWorkersAndCpuActorsToSlots) {
  for (const auto& [node, devices] : std::vector<std::pair<std::string, json>>{
           {"bind-cpu", json::array()}, {"bind-gpu", json::array({"GPU-bind-0"})}}) {
    ServerLease(node, clock_.WallNow());
    CachedLease(node, clock_.WallNow());
    json w = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Worker"},
              {"metadata", {{"name", node + "-w0"}}},
              {"spec", {{"nodeName", node}, {"devices", devices}}},
              {"status", {{"phase", "Free"}}}};
    workers_.Upsert(std::make_shared<const json>(w));
  }
  auto unpinned = [&](const std::string& name, int gpus) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}, {"gpu", {{"count", gpus}}}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, a).ok());
  };
  auto node_of = [&](const std::string& name) {
    auto a = client_->Get(kActorType, ns_, name);
    return a.ok() ? a->value("/status/nodeName"_json_pointer, std::string()) : "<" + a.status().ToString() + ">";
  };
  unpinned("gpu", 1);
  unpinned("cpu", 0);
  unpinned("two-gpus", 2);
  Reconcile("gpu");
  Reconcile("cpu");
  Reconcile("two-gpus");
  EXPECT_EQ(node_of("gpu"), "bind-gpu");
  EXPECT_EQ(node_of("cpu"), "bind-cpu");
  EXPECT_EQ(node_of("two-gpus"), "") << "no worker holds two GPUs";
}

}  // namespace
}  // namespace stasis
