// Node scoping (manifests/base/node-admission-policy.yaml) on a real kube-apiserver: the default
// overlay applied, two Node objects, a Pod of the stasis-node ServiceAccount on node A and a
// token bound to it, so that the API server itself puts node A into the request's
// userInfo.extra. As node A: every write to node B's actor (spec, finalizers, status), to
// B's Worker, a Worker created for B, B's heartbeat Lease and the controller's leader Lease is
// refused by the policy, and so is a spec change of A's own actor; A's own writes (finalizer,
// status, its Worker, its Lease) pass. A token of the same ServiceAccount without a node is
// refused outright. Refusals are asked with --dry-run=server (admission runs, nothing is
// stored), so that without the policy the test fails on what passed, not on a changed object.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/names.h"
#include "base/subprocess.h"
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

std::string Show(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

void AdminApply(const json& object) {
  CommandResult r = Admin({"apply", "-f", "-"}, object.dump());
  ASSERT_EQ(r.exit_code, 0) << Show(r) << "\n" << object.dump();
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
    ASSERT_EQ(applied.exit_code, 0) << Show(applied);
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
    ASSERT_EQ(bound.exit_code, 0) << Show(bound);
    AdminApply(Lease("stasis-controller"));
    dir_ = new TempDir();
    const std::string token = NodeAgentToken(kNodeA);
    ASSERT_FALSE(token.empty());
    node_a_ = TokenKubeconfig(token, "node-a", dir_->path());
    unbound_ = TokenKubeconfig(UnboundToken("node"), "unbound", dir_->path());
    // A new policy takes effect once the API server has compiled it: wait for its first refusal.
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < end && !Refused(AsA(PatchLease("stasis-controller")))) {
      std::this_thread::sleep_for(500ms);
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static CommandResult As(const std::string& kubeconfig, std::vector<std::string> args,
                          bool dry_run, const std::string& in = "") {
    std::vector<std::string> argv = {"kubectl", "--kubeconfig=" + kubeconfig};
    argv.insert(argv.end(), args.begin(), args.end());
    if (dry_run) argv.push_back("--dry-run=server");
    CommandOptions options;
    options.stdin_data = in;
    auto r = RunCommand(argv, 60s, options);
    if (r.ok()) return *r;
    CommandResult failed;
    failed.err = r.status().ToString();
    return failed;
  }
  static CommandResult CreateAsA(const json& object, bool dry_run) {
    return As(node_a_, {"create", "-f", "-"}, dry_run, object.dump());
  }
  // Node A's write, admitted but not stored.
  static CommandResult AsA(std::vector<std::string> args) { return As(node_a_, std::move(args), true); }

  // Refused by the node-scope policy (not by RBAC, which allows every one of these verbs).
  static bool Refused(const CommandResult& r) {
    return r.exit_code != 0 && r.err.find("stasis-node-scope") != std::string::npos;
  }

  static std::vector<std::string> PatchActor(const std::string& name, const std::string& patch,
                                             const std::string& sub = "") {
    std::vector<std::string> a = {"patch", "actor", name, "-n", kActorNs, "--type=merge", "-p", patch};
    if (!sub.empty()) a.push_back("--subresource=" + sub);
    return a;
  }
  static std::vector<std::string> PatchWorker(const std::string& name, const std::string& patch,
                                              const std::string& sub = "") {
    std::vector<std::string> a = {"patch", "worker", name, "--type=merge", "-p", patch};
    if (!sub.empty()) a.push_back("--subresource=" + sub);
    return a;
  }
  static std::vector<std::string> PatchLease(const std::string& name) {
    return {"patch", "lease", name, "-n", kStasisSystemNs, "--type=merge", "-p",
            R"({"spec":{"renewTime":"2026-01-01T00:00:00.000000Z"}})"};
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::string node_a_, unbound_;
};

const std::string kFinalizer = std::string(R"({"metadata":{"finalizers":[")") + api::kActorFinalizer + "\"]}}";
const std::string kStatus = R"({"status":{"status":"STATUS_SUSPENDED"}})";
const std::string kSpec = R"({"spec":{"desiredState":"Suspended"}})";
const std::string kFree = R"({"status":{"phase":"Free"}})";

TEST_F(NodeScopeTest, NodeAIsRefusedOnNodeBsActors) {
  for (const std::string& name : {"actor-" + kNodeB, std::string("unpinned-b")}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(Refused(AsA(PatchActor(name, kSpec)))) << Show(AsA(PatchActor(name, kSpec)));
    EXPECT_TRUE(Refused(AsA(PatchActor(name, kFinalizer))));
    EXPECT_TRUE(Refused(AsA(PatchActor(name, kStatus, "status"))));
  }
  // Taking B's actor over, or handing its own to B, changes the owner: refused both ways.
  EXPECT_TRUE(Refused(AsA(PatchActor("actor-" + kNodeB, R"({"spec":{"nodeName":")" + kNodeA + "\"}}"))));
  EXPECT_TRUE(Refused(AsA(PatchActor("actor-" + kNodeA, R"({"spec":{"nodeName":")" + kNodeB + "\"}}"))));
}

TEST_F(NodeScopeTest, NodeAChangesOnlyStatusAndFinalizersOfItsActor) {
  const std::string own = "actor-" + kNodeA;
  CommandResult spec = AsA(PatchActor(own, kSpec));
  EXPECT_TRUE(Refused(spec)) << Show(spec);
  EXPECT_TRUE(Refused(AsA(PatchActor(own, R"({"metadata":{"labels":{"stasis.dev/node":"x"}}})"))));
  // For real: what the agent writes.
  CommandResult fin = As(node_a_, PatchActor(own, kFinalizer), false);
  EXPECT_EQ(fin.exit_code, 0) << Show(fin);
  CommandResult status = As(node_a_, PatchActor(own, kStatus, "status"), false);
  EXPECT_EQ(status.exit_code, 0) << Show(status);
  CommandResult got = Admin({"get", "actor", own, "-n", kActorNs, "-o", "jsonpath={.status.status}"});
  EXPECT_EQ(got.out, "STATUS_SUSPENDED");
}

TEST_F(NodeScopeTest, NodeAWritesOnlyItsOwnWorkers) {
  const std::string theirs = kNodeB + "-slot0";
  EXPECT_TRUE(Refused(AsA(PatchWorker(theirs, kFree, "status"))));
  EXPECT_TRUE(Refused(AsA(PatchWorker(theirs, R"({"spec":{"devices":["GPU-stolen"]}})"))));
  // A Worker for B, under any name; and moving its own Worker to B.
  EXPECT_TRUE(Refused(CreateAsA(Worker(kNodeB + "-gpu7", kNodeB), true)));
  EXPECT_TRUE(Refused(CreateAsA(Worker(kNodeA + "-gpu7", kNodeB), true)));
  EXPECT_TRUE(Refused(AsA(PatchWorker(kNodeA + "-slot0", R"({"spec":{"nodeName":")" + kNodeB + "\"}}"))));
  // Its own: created, freed through /status, repaired.
  CommandResult mine = CreateAsA(Worker(kNodeA + "-slot1", kNodeA), false);
  EXPECT_EQ(mine.exit_code, 0) << Show(mine);
  CommandResult free = As(node_a_, PatchWorker(kNodeA + "-slot0", kFree, "status"), false);
  EXPECT_EQ(free.exit_code, 0) << Show(free);
  CommandResult repair = As(node_a_, PatchWorker(kNodeA + "-slot0", R"({"spec":{"devices":[]}})"), false);
  EXPECT_EQ(repair.exit_code, 0) << Show(repair);
}

TEST_F(NodeScopeTest, NodeAWritesOnlyItsOwnLease) {
  EXPECT_TRUE(Refused(AsA(PatchLease("stasis-node-" + kNodeB))));
  EXPECT_TRUE(Refused(AsA(PatchLease("stasis-controller"))));
  EXPECT_TRUE(Refused(CreateAsA(Lease("stasis-node-" + kNodeB + "x"), true)));
  EXPECT_TRUE(Refused(CreateAsA(Lease("stasis-controller-2"), true)));
  CommandResult own = As(node_a_, PatchLease("stasis-node-" + kNodeA), false);
  EXPECT_EQ(own.exit_code, 0) << Show(own);
}

TEST_F(NodeScopeTest, ATokenWithoutANodeIsRefused) {
  CommandResult r = As(unbound_, PatchActor("actor-" + kNodeA, kFinalizer), true);
  EXPECT_TRUE(Refused(r)) << Show(r);
  EXPECT_NE(r.err.find("must carry its node"), std::string::npos) << r.err;
  EXPECT_TRUE(Refused(As(unbound_, PatchLease("stasis-node-" + kNodeA), true)));
}

}  // namespace
}  // namespace stasis::testing
