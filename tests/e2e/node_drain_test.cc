// A drain end to end: two real node agents sharing a real object store (SeaweedFS), the real
// `stasis controller` binding, and a real v1 Node object cordoned with `kubectl cordon`. The
// running actor of the cordoned node is suspended to the store and resumes on the other node,
// its counter continued; the paused one is committed and rests SUSPENDED (which a desired
// Paused accepts); the one pinned there rests in the store until the node is uncordoned, then
// resumes there; a new actor goes to the other node. Every step is asserted through the API.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/object_store_node_fixture.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class NodeDrainTest : public ObjectStoreNodeTest {
 protected:
  void TearDown() override {
    for (const auto& n : node_objects_) Kubectl({"delete", "node", n, "--ignore-not-found"});
    ObjectStoreNodeTest::TearDown();
  }
  // The v1 Node a kubelet would have registered for this agent's node.
  void RegisterNode(const std::string& node) {
    const json n = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}};
    auto r = Kubectl({"create", "-f", "-"}, n.dump());
    ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
    node_objects_.push_back(node);
  }
  json Unpinned(const std::string& desired = "Running") {
    json spec = CounterSpec("", desired);
    spec.erase("nodeName");
    return spec;
  }
  std::vector<std::string> EventReasons(const std::string& actor) {
    auto r = Kubectl({"get", "events", "-n", ns_, "--field-selector", "involvedObject.name=" + actor, "-o",
                      "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}"});
    EXPECT_TRUE(r.success()) << r.err;
    std::vector<std::string> reasons;
    std::stringstream ss(r.out);
    for (std::string line; std::getline(ss, line);) reasons.push_back(line);
    return reasons;
  }
  bool RunningOn(const std::string& actor, const std::string& node, json* out) {
    return WaitActor(actor, [&](const json& x) {
      return StatusOf(x) == "STATUS_RUNNING" && StatusField(x, "nodeName") == json(node);
    }, 120s, "RUNNING on " + node, out);
  }

  std::vector<std::string> node_objects_;
};

TEST_F(NodeDrainTest, ACordonedNodesActorsMoveThroughTheStoreEachInItsDesiredState) {
  Agent* a = StartStoreAgent("a");
  ASSERT_NE(a, nullptr);
  RegisterNode(a->node);
  BackgroundProcess controller({kStasis, "controller", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                "--metrics-addr", "127.0.0.1:0", "--leader-elect", "false"},
                               (work_.path() / "controller.log").string());
  json x;
  CreateActor("mover", Unpinned());
  ASSERT_TRUE(RunningOn("mover", a->node, &x));
  const long before = WaitCounter(*a, "mover", 3);
  CreateActor("sleeper", Unpinned());
  ASSERT_TRUE(RunningOn("sleeper", a->node, &x));
  Patch("sleeper", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("sleeper", "STATUS_PAUSED", 60s, &x));
  CreateActor("pinned", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("pinned", "STATUS_RUNNING", 60s, &x));

  Agent* b = StartStoreAgent("b");
  ASSERT_NE(b, nullptr);
  RegisterNode(b->node);
  auto cordon = Kubectl({"cordon", a->node});
  ASSERT_TRUE(cordon.success()) << cordon.Summary() << "\n" << cordon.err;

  ASSERT_TRUE(RunningOn("mover", b->node, &x)) << "the running actor moves to b";
  EXPECT_EQ(StatusField(x, "latestSnapshot").value("nodeName", ""), "") << "resumed from the store";
  EXPECT_GE(WaitCounter(*b, "mover", before), before) << "its counter continued on b";
  EXPECT_THAT(EventReasons("mover"), ::testing::IsSupersetOf({"NodeDraining", "Bound"}));

  ASSERT_TRUE(WaitStatus("sleeper", "STATUS_SUSPENDED", 60s, &x)) << "the paused actor is committed";
  EXPECT_TRUE(CondIs(x, "Paused", "True")) << "SUSPENDED satisfies its desired Paused";
  const std::string sleeper_id = StatusField(x, "latestSnapshot").value("id", "");
  EXPECT_EQ(Committed("sleeper"), std::set<std::string>{sleeper_id});

  ASSERT_TRUE(WaitStatus("pinned", "STATUS_SUSPENDED", 60s, &x)) << "pinned to a, it rests in the store";
  EXPECT_EQ(StatusField(x, "nodeName"), json(a->node));

  CreateActor("late", Unpinned());
  ASSERT_TRUE(RunningOn("late", b->node, &x)) << "a cordoned node takes no new actors";
  ExpectAllWorkersFree(a->node);

  auto uncordon = Kubectl({"uncordon", a->node});
  ASSERT_TRUE(uncordon.success()) << uncordon.Summary() << "\n" << uncordon.err;
  ASSERT_TRUE(RunningOn("pinned", a->node, &x)) << "the pinned actor resumes once its node is back";
  EXPECT_EQ(StatusOf(GetActor("sleeper")), "STATUS_SUSPENDED") << "still as it asked";
}

}  // namespace
}  // namespace stasis::testing
