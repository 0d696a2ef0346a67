// The node agent's heartbeat Lease against a real kube-apiserver: renewed every period, and
// renewed still when the first renewal failed — a node whose first try met an API server
// restarting or a namespace not yet created must not stay "lost" to the cluster controller.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "reconcilers/api_resources.h"
#include "reconcilers/node/node_heartbeat.h"
#include "tests/support/control_plane.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using testing::ControlPlane;

// The Lease's renewTime, "" while there is none.
std::string RenewTime(KubeClient& client, const std::string& ns, const std::string& node) {
  auto lease = client.Get(kLeaseType, ns, NodeLeaseName(node));
  if (!lease.ok()) return "";
  return (*lease)["spec"].value("renewTime", "");
}

std::string WaitForRenewal(KubeClient& client, const std::string& ns, const std::string& node,
                           const std::string& after) {
  for (auto end = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < end;) {
    const std::string t = RenewTime(client, ns, node);
    if (!t.empty() && t != after) return t;
    std::this_thread::sleep_for(100ms);
  }
  return "";
}

TEST(NodeHeartbeatTest, RenewsEveryPeriod) {
  const std::string ns = ControlPlane::Get().CreateTestNamespace("hb");
  ASSERT_FALSE(ns.empty());
  auto client = ControlPlane::Get().NewClient();
  NodeHeartbeat heartbeat(*client, NodeHeartbeatOptions{ns, ns, 1s, 40s});
  ASSERT_TRUE(heartbeat.Start().ok());
  const std::string first = RenewTime(*client, ns, ns);
  ASSERT_FALSE(first.empty()) << "Start renews before it returns";
  EXPECT_FALSE(WaitForRenewal(*client, ns, ns, first).empty()) << "no renewal after the first";
  heartbeat.Stop();
}

TEST(NodeHeartbeatTest, KeepsRenewingWhenTheFirstRenewalFails) {
  // The Lease's namespace does not exist yet: the first renewal fails for real (NotFound on
  // the namespace), and the heartbeat must come up once it exists.
  const std::string ns = ControlPlane::Get().CreateTestNamespace("hb");
  ASSERT_FALSE(ns.empty());
  const std::string lease_ns = ns + "-later";
  auto client = ControlPlane::Get().NewClient();
  NodeHeartbeat heartbeat(*client, NodeHeartbeatOptions{ns, lease_ns, 1s, 40s});
  EXPECT_FALSE(heartbeat.Start().ok()) << "the namespace is not there: the first renewal fails";
  ASSERT_TRUE(ControlPlane::Get().Kubectl({"create", "namespace", lease_ns}).success());
  EXPECT_FALSE(WaitForRenewal(*client, lease_ns, ns, "").empty())
      << "the heartbeat never renewed after its first renewal failed";
  heartbeat.Stop();
  (void)ControlPlane::Get().Kubectl({"delete", "namespace", lease_ns, "--wait=false"});
}

}  // namespace
}  // namespace stasis
