// NodeWorkers against a real kube-apiserver: the claims and frees of one node agent's workers,
// as its reconcile workers make them in parallel. Every request the agent makes is counted
// (the same observer its rest_client metrics use), because what is asserted is not only who
// holds what but what it cost: parallel claims must not race each other for one worker (each
// loss was a 409 and a LIST of the node's workers), and the workers gauge must follow the
// agent's own writes without a LIST.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/json_mapping.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/node_workers.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "tests/support/control_plane.h"
#include "tests/support/metric_samples.h"

namespace stasis {
namespace {

using testing::ControlPlane;
using json = nlohmann::json;

// Requests by "METHOD CODE" ("PATCH 409", "GET 200"), from any thread.
class RequestCounter {
 public:
  KubeClient::Observer Observer() {
    return [this](const std::string& method, const std::string& code) {
      std::lock_guard lock(mu_);
      counts_[method + " " + code]++;
    };
  }
  int Get(const std::string& what) {
    std::lock_guard lock(mu_);
    return counts_[what];
  }
  void Reset() {
    std::lock_guard lock(mu_);
    counts_.clear();
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> counts_;
};

double Gauge(prometheus::Registry& registry, const std::string& state) {
  return testing::SampleValue(registry, "stasis_workers", "state", state);
}

class NodeWorkersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), ""); }

  // A node of its own per test (workers are cluster-scoped), with `slots` CPU slots.
  void MakeNode(const std::string& node, size_t slots) {
    client_ = ControlPlane::Get().NewClient(requests_.Observer());
    metrics_ = std::make_unique<SnapshotMetrics>(registry_);
    workers_ = std::make_unique<NodeWorkers>(*client_, node, std::vector<std::vector<std::string>>(slots),
                                             metrics_.get());
    ASSERT_TRUE(workers_->Register().ok());
    requests_.Reset();
  }
  // The holder of each worker of the node, as the API server has it ("" = free).
  std::map<std::string, std::string> Holders() {
    std::map<std::string, std::string> out;
    auto all = workers_->List();
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    if (!all.ok()) return out;
    for (const auto& w : *all) out[w.metadata.name] = w.status.actor_ref ? w.status.actor_ref->Key() : "";
    return out;
  }

  RequestCounter requests_;
  prometheus::Registry registry_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<SnapshotMetrics> metrics_;
  std::unique_ptr<NodeWorkers> workers_;
};

TEST_F(NodeWorkersTest, ParallelClaimsTakeDifferentWorkersWithoutConflicts) {
  constexpr int kSlots = 8;
  MakeNode("claims-node", kSlots);
  std::vector<std::thread> threads;
  std::vector<Result<api::Worker>> claimed(kSlots, Status(Code::kInternal, "not run"));
  for (int i = 0; i < kSlots; ++i) {
    threads.emplace_back([&, i] { claimed[i] = workers_->Claim(api::ActorRef{"ns", "actor-" + std::to_string(i)}); });
  }
  for (auto& t : threads) t.join();

  std::set<std::string> names;
  for (int i = 0; i < kSlots; ++i) {
    ASSERT_TRUE(claimed[i].ok()) << i << ": " << claimed[i].status().ToString();
    names.insert(claimed[i]->metadata.name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kSlots)) << "two actors were given one worker";
  EXPECT_EQ(requests_.Get("PATCH 200"), kSlots) << "one write per claim";
  EXPECT_EQ(requests_.Get("PATCH 409"), 0) << "parallel claims raced for the same worker";
  EXPECT_EQ(requests_.Get("GET 200"), 0) << "a claim listed the workers";
  EXPECT_EQ(Gauge(registry_, "held"), kSlots);
  EXPECT_EQ(Gauge(registry_, "free"), 0);

  const auto holders = Holders();
  for (int i = 0; i < kSlots; ++i) {
    EXPECT_EQ(holders.at(claimed[i]->metadata.name), "ns/actor-" + std::to_string(i));
  }

  // A ninth actor finds none free: decided on a LIST, not on the cache alone.
  requests_.Reset();
  auto none = workers_->Claim(api::ActorRef{"ns", "actor-late"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().reason(), "no_free_worker");
  EXPECT_EQ(requests_.Get("GET 200"), 1);
  EXPECT_EQ(requests_.Get("PATCH 200") + requests_.Get("PATCH 409"), 0);

  // Releases keep the gauge without listing.
  requests_.Reset();
  ASSERT_TRUE(workers_->Release(claimed[0]->metadata.name, api::ActorRef{"ns", "actor-0"}).ok());
  ASSERT_TRUE(workers_->Free(api::ActorRef{"ns", "actor-1"}).ok());
  EXPECT_EQ(requests_.Get("GET 200"), 0);
  EXPECT_EQ(Gauge(registry_, "held"), kSlots - 2);
  EXPECT_EQ(Gauge(registry_, "free"), 2);
  EXPECT_EQ(Holders().at(claimed[0]->metadata.name), "");
}

// Someone else (the cluster controller, another agent misconfigured onto this node) takes the
// worker this agent's cache shows free: the claim's write is refused (409), the agent lists
// and takes another. Never two holders.
TEST_F(NodeWorkersTest, AWorkerTakenBehindTheAgentsBackCostsOneConflict) {
  MakeNode("raced-node", 2);
  auto other = ControlPlane::Get().NewClient();
  ASSERT_TRUE(other
                  ->Patch(kWorkerType, "", "raced-node-slot0", PatchType::kMerge,
                          {{"status", {{"phase", "Held"}, {"actorRef", {{"namespace", "x"}, {"name", "elsewhere"}}}}}},
                          "status")
                  .ok());
  auto claimed = workers_->Claim(api::ActorRef{"ns", "mine"});
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  EXPECT_EQ(claimed->metadata.name, "raced-node-slot1");
  EXPECT_EQ(requests_.Get("PATCH 409"), 1);
  EXPECT_EQ(requests_.Get("GET 200"), 1);
  const auto holders = Holders();
  EXPECT_EQ(holders.at("raced-node-slot0"), "x/elsewhere");
  EXPECT_EQ(holders.at("raced-node-slot1"), "ns/mine");
  // What the LIST showed is in the gauge too.
  EXPECT_EQ(Gauge(registry_, "held"), 2);
}

// Worker identities come from the node's own discovery, never from the API: a Worker forged
// with more GPUs (before the agent starts, and again behind its back) is repaired by Register,
// an extra Worker labelled for the node is never claimed, and what a claimed worker hands the
// sandbox is the node's own GPU.
TEST_F(NodeWorkersTest, ForgedWorkerDevicesAreRepairedAndNeverUsed) {
  const std::string node = "forge-node";
  auto admin = ControlPlane::Get().NewClient();
  auto forge = [&](const std::string& name, const json& devices) {
    const json w = {{"apiVersion", "stasis.dev/v1alpha1"},
                    {"kind", "Worker"},
                    {"metadata", {{"name", name}, {"labels", {{"stasis.dev/node", node}}}}},
                    {"spec", {{"nodeName", node}, {"devices", devices}}}};
    if (!admin->Create(kWorkerType, "", w).ok()) {
      ASSERT_TRUE(admin->Patch(kWorkerType, "", name, PatchType::kMerge, {{"spec", w["spec"]}}).ok());
    }
    ASSERT_TRUE(admin->Patch(kWorkerType, "", name, PatchType::kMerge, {{"status", {{"phase", "Free"}}}}, "status").ok());
  };
  const json stolen = {"GPU-own", "GPU-stolen-1", "GPU-stolen-2"};
  forge(node + "-gpu0", stolen);
  forge(node + "-gpu9", json{"GPU-stolen-3", "GPU-stolen-4"});
  client_ = ControlPlane::Get().NewClient();
  workers_ = std::make_unique<NodeWorkers>(*client_, node, std::vector<std::vector<std::string>>{{"GPU-own"}}, nullptr);
  ASSERT_TRUE(workers_->Register().ok());
  auto repaired = admin->Get(kWorkerType, "", node + "-gpu0");
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ((*repaired)["spec"]["devices"], json({"GPU-own"})) << repaired->dump();

  // Forged again after registration: the agent still offers only what it discovered.
  forge(node + "-gpu0", stolen);
  auto two = workers_->Claim(api::ActorRef{"ns", "greedy"}, 2);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().reason(), "gpu_count_unavailable");
  auto one = workers_->Claim(api::ActorRef{"ns", "gpu-actor"}, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->metadata.name, node + "-gpu0") << "a worker not of this node's discovery was claimed";
  EXPECT_EQ(workers_->DevicesOf(one->metadata.name), std::vector<std::string>{"GPU-own"});
  EXPECT_TRUE(workers_->DevicesOf(node + "-gpu9").empty());
  // Only one worker of the table: a second GPU actor finds none, never the forged gpu9.
  auto none = workers_->Claim(api::ActorRef{"ns", "gpu-actor-2"}, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().reason(), "no_free_worker");
}

}  // namespace
}  // namespace stasis
