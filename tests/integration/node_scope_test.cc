// Node scoping (manifests/base/node-admission-policy.yaml) on a real kube-apiserver: the default
// overlay applied, two Node objects, a Pod of the stasis-node ServiceAccount on node A and a
// token bound to it, so that the API server itself puts node A into the request's
// userInfo.extra. As node A: every write to node B's actor (spec, finalizers, status), to
// B's Worker, a Worker created for B, B's heartbeat Lease and the controller's leader Lease is
// refused by the policy, and so is a spec change of A's own actor; A's own writes (finalizer,
// status, its Worker, its Lease) pass. A token of the same ServiceAccount without a node is
// refused outright. Node A's requests are sent by stasis's own client, as the agent sends them.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/names.h"
#include "base/subprocess.h"
#include "controller/kube_client.h"
#include "controller/rest_config.h"
#include "controller/transport.h"
#include "reconcilers/api_resources.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"
#include "tests/support/service_account_tokens.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kActorNs = "scope-actors";
const std::string kNodeA = "scope-a";
const std::string kNodeB = "scope-b";

CommandResult Admin(const std::vector<std::string>& args, const std::string& in = "") {
  return ControlPlane::Get().Kubectl(args, in);
}

std::string ShowRun(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

void AdminApply(const json& object) {
  CommandResult r = Admin({"apply", "-f", "-"}, object.dump());
  ASSERT_EQ(r.exit_code, 0) << ShowRun(r) << "\n" << object.dump();
}

json Actor(const std::string& name, const std::string& node) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kActorKind},
          {"metadata", {{"name", name}, {"namespace", kActorNs}}},
          {"spec",
           {{"runtime", "gvisor"},
            {"bundle", "/var/lib/stasis/bundles/counter"},
            {"desiredState", "Running"},
            {"nodeName", node}}}};
}

json Worker(const std::string& name, const std::string& node) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kWorkerKind},
          {"metadata", {{"name", name}, {"labels", {{api::kNodeLabel, node}}}}},
          {"spec", {{"nodeName", node}, {"devices", json::array()}}}};
}

json Lease(const std::string& name) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", name}, {"namespace", kStasisSystemNs}}},
          {"spec", {{"holderIdentity", name}, {"leaseDurationSeconds", 40}}}};
}

class NodeScopeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ControlPlane::Get();
    ASSERT_EQ(Admin({"apply", "-f", kSource + "/manifests/base/namespace.yaml"}).exit_code, 0);
    CommandResult applied = Admin({"apply", "-k", kSource + "/manifests/overlays/default"});
    ASSERT_EQ(applied.exit_code, 0) << ShowRun(applied);
    ASSERT_EQ(Admin({"wait", "--for=condition=Established", "--timeout=60s", "crd/actors.stasis.dev",
                     "crd/workers.stasis.dev"})
                  .exit_code,
              0);
    ASSERT_EQ(Admin({"create", "namespace", kActorNs}).exit_code, 0);
    for (const std::string& node : {kNodeA, kNodeB}) {
      AdminApply(Actor("actor-" + node, node));
      AdminApply(Worker(node + "-slot0", node));
      AdminApply(Lease("stasis-node-" + node));
    }
    // An unpinned actor bound to B by the controller (status.nodeName).
    json unpinned = Actor("unpinned-b", kNodeB);
    unpinned["spec"].erase("nodeName");
    AdminApply(unpinned);
    CommandResult bound = Admin({"patch", "actor", "unpinned-b", "-n", kActorNs, "--subresource=status",
                                 "--type=merge", "-p", R"({"status":{"nodeName":")" + kNodeB + "\"}}"});
    ASSERT_EQ(bound.exit_code, 0) << ShowRun(bound);
    AdminApply(Lease("stasis-controller"));
    dir_ = new TempDir();
    const std::string token = NodeAgentToken(kNodeA);
    ASSERT_FALSE(token.empty());
    node_a_ = ClientFor(TokenKubeconfig(token, "node-a", dir_->path()));
    unbound_ = ClientFor(TokenKubeconfig(UnboundToken("node"), "unbound", dir_->path()));
    // A new policy takes effect once the API server has compiled it: wait for its first refusal.
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < end && !Refused(PatchLease(*node_a_, "stasis-controller"))) {
      std::this_thread::sleep_for(500ms);
    }
  }
  static void TearDownTestSuite() {
    node_a_.reset();
    unbound_.reset();
    delete dir_;
  }

  static std::unique_ptr<KubeClient> ClientFor(const std::string& kubeconfig) {
    auto config = LoadKubeconfig(kubeconfig);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return std::make_unique<KubeClient>(NewCpprestTransport(config.ok() ? *config : RestConfig{}));
  }

  // Refused by the node-scope policy (not by RBAC, which allows every one of these verbs).
  static bool Refused(const Result<json>& r) {
    return !r.ok() && r.status().code() == Code::kPermissionDenied &&
           r.status().message().find("stasis-node-scope") != std::string::npos;
  }
  static std::string Show(const Result<json>& r) { return r.ok() ? "admitted" : r.status().ToString(); }

  static Result<json> PatchActor(KubeClient& c, const std::string& name, const json& patch,
                                 const std::string& sub = "") {
    return c.Patch(kActorType, kActorNs, name, PatchType::kMerge, patch, sub);
  }
  static Result<json> PatchWorker(KubeClient& c, const std::string& name, const json& patch,
                                  const std::string& sub = "") {
    return c.Patch(kWorkerType, "", name, PatchType::kMerge, patch, sub);
  }
  static Result<json> PatchLease(KubeClient& c, const std::string& name) {
    return c.Patch(kLeaseType, kStasisSystemNs, name, PatchType::kMerge,
                   {{"spec", {{"renewTime", "2026-01-01T00:00:00.000000Z"}}}});
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::unique_ptr<KubeClient> node_a_, unbound_;
};

const json kFinalizer = {{"metadata", {{"finalizers", {api::kActorFinalizer}}}}};
const json kStatus = {{"status", {{"status", "STATUS_SUSPENDED"}}}};
const json kSpec = {{"spec", {{"desiredState", "Suspended"}}}};
const json kFree = {{"status", {{"phase", "Free"}}}};

TEST_F(NodeScopeTest, NodeAIsRefusedOnNodeBsActors) {
  KubeClient& a = *node_a_;
  for (const std::string& name : {"actor-" + kNodeB, std::string("unpinned-b")}) {
    SCOPED_TRACE(name);
    auto spec = PatchActor(a, name, kSpec);
    EXPECT_TRUE(Refused(spec)) << Show(spec);
    EXPECT_TRUE(Refused(PatchActor(a, name, kFinalizer)));
    EXPECT_TRUE(Refused(PatchActor(a, name, kStatus, "status")));
  }
  // Taking B's actor over, or handing its own to B, changes the owner: refused both ways.
  EXPECT_TRUE(Refused(PatchActor(a, "actor-" + kNodeB, {{"spec", {{"nodeName", kNodeA}}}})));
  EXPECT_TRUE(Refused(PatchActor(a, "actor-" + kNodeA, {{"spec", {{"nodeName", kNodeB}}}})));
  CommandResult b = Admin({"get", "actor", "actor-" + kNodeB, "-n", kActorNs, "-o", "json"});
  EXPECT_EQ(json::parse(b.out, nullptr, false).value("/spec/desiredState"_json_pointer, std::string()), "Running");
}

TEST_F(NodeScopeTest, NodeAChangesOnlyStatusAndFinalizersOfItsActor) {
  KubeClient& a = *node_a_;
  const std::string own = "actor-" + kNodeA;
  auto spec = PatchActor(a, own, kSpec);
  EXPECT_TRUE(Refused(spec)) << Show(spec);
  EXPECT_TRUE(Refused(PatchActor(a, own, {{"metadata", {{"labels", {{"stasis.dev/node", "x"}}}}}})));
  // What the agent writes.
  auto fin = PatchActor(a, own, kFinalizer);
  EXPECT_TRUE(fin.ok()) << Show(fin);
  auto status = PatchActor(a, own, kStatus, "status");
  EXPECT_TRUE(status.ok()) << Show(status);
  CommandResult got = Admin({"get", "actor", own, "-n", kActorNs, "-o",
                             "jsonpath={.status.status} {.metadata.finalizers[0]} {.spec.desiredState}"});
  EXPECT_EQ(got.out, std::string("STATUS_SUSPENDED ") + api::kActorFinalizer + " Running");
}

TEST_F(NodeScopeTest, NodeAWritesOnlyItsOwnWorkers) {
  KubeClient& a = *node_a_;
  const std::string theirs = kNodeB + "-slot0";
  EXPECT_TRUE(Refused(PatchWorker(a, theirs, kFree, "status")));
  EXPECT_TRUE(Refused(PatchWorker(a, theirs, {{"spec", {{"devices", {"GPU-stolen"}}}}})));
  // A Worker for B, under any name.
  EXPECT_TRUE(Refused(a.Create(kWorkerType, "", Worker(kNodeB + "-gpu7", kNodeB))));
  EXPECT_TRUE(Refused(a.Create(kWorkerType, "", Worker(kNodeA + "-gpu7", kNodeB))));
  // Its own: created, freed through /status, its devices repaired.
  auto mine = a.Create(kWorkerType, "", Worker(kNodeA + "-slot1", kNodeA));
  EXPECT_TRUE(mine.ok()) << Show(mine);
  auto free = PatchWorker(a, kNodeA + "-slot0", kFree, "status");
  EXPECT_TRUE(free.ok()) << Show(free);
  auto repair = PatchWorker(a, kNodeA + "-slot0", {{"spec", {{"devices", json::array()}}}});
  EXPECT_TRUE(repair.ok()) << Show(repair);
}

TEST_F(NodeScopeTest, NodeAWritesOnlyItsOwnLease) {
  KubeClient& a = *node_a_;
  EXPECT_TRUE(Refused(PatchLease(a, "stasis-node-" + kNodeB)));
  EXPECT_TRUE(Refused(PatchLease(a, "stasis-controller")));
  EXPECT_TRUE(Refused(a.Create(kLeaseType, kStasisSystemNs, Lease("stasis-node-" + kNodeB + "x"))));
  EXPECT_TRUE(Refused(a.Create(kLeaseType, kStasisSystemNs, Lease("stasis-controller-2"))));
  auto own = PatchLease(a, "stasis-node-" + kNodeA);
  EXPECT_TRUE(own.ok()) << Show(own);
}

TEST_F(NodeScopeTest, ATokenWithoutANodeIsRefused) {
  auto r = PatchActor(*unbound_, "actor-" + kNodeA, kFinalizer);
  EXPECT_TRUE(Refused(r)) << Show(r);
  EXPECT_NE(Show(r).find("must carry its node"), std::string::npos) << Show(r);
  EXPECT_TRUE(Refused(PatchLease(*unbound_, "stasis-node-" + kNodeA)));
}

}  // namespace
}  // namespace stasis::testing
