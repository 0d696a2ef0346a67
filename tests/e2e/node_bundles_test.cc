// `stasis node` end to end, bundle confinement (runtimes/bundle_confinement.h): with real runsc,
// an actor whose bundle is outside the agent's --bundle-root, reached through a symlink, or
// binding one of the agent's own directories ends FAILED with BundleNotAllowed and a Warning
// Event, no sandbox started; an allowed bundle on the same agent runs. The fixture is
// tests/support/node_agent_fixture.h (every agent gets --bundle-root <work>/bundles).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/conditions.h"
#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

class BundlesTest : public NodeAgentTest {
 protected:
  // Whether a Warning Event of `actor` with `reason` whose message holds `text` arrives.
  bool WarningArrives(const std::string& actor, const std::string& reason, const std::string& text) {
    for (int i = 0; i < 100; ++i) {
      auto r = Kubectl({"get", "events", "-n", ns_, "-o", "json"});
      if (r.success()) {
        for (const auto& e : json::parse(r.out).value("items", json::array())) {
          if (e["involvedObject"].value("name", "") == actor && e.value("reason", "") == reason &&
              e.value("type", "") == "Warning" && e.value("message", "").find(text) != std::string::npos) {
            return true;
          }
        }
      }
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }

  void ExpectRefused(const Agent& a, const std::string& actor, const std::string& why) {
    json x;
    ASSERT_TRUE(WaitStatus(actor, "STATUS_FAILED", 30s, &x)) << actor;
    EXPECT_EQ(CondReason(x, "Ready"), api::kReasonBundleNotAllowed) << actor;
    EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr(why)) << actor;
    EXPECT_TRUE(WarningArrives(actor, api::kReasonBundleNotAllowed, why)) << actor;
    EXPECT_FALSE(fs::exists(RunDir(a, actor))) << actor << ": a sandbox was started";
  }
};

TEST_F(BundlesTest, OnlyConfinedBundlesRun) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  // Outside the root: a complete, working bundle in the test's directory.
  Bundle outside(CounterArgs(), work_.path());
  json spec = CounterSpec(a->node);
  spec["bundle"] = outside.dir().string();
  CreateActor("outside", spec);
  // The good bundle, reached through a symlink inside the root.
  fs::create_directory_symlink(bundle_->dir(), BundleRoot() / "link");
  spec["bundle"] = (BundleRoot() / "link").string();
  CreateActor("symlink", spec);
  // Under the root, binding the agent's own state directory.
  Bundle binds(CounterArgs(), BundleRoot());
  json config = json::parse(ReadFile(binds.dir() / "config.json"));
  config["mounts"].push_back({{"destination", "/state"}, {"type", "bind"}, {"source", a->root}, {"options", {"rbind"}}});
  std::ofstream(binds.dir() / "config.json") << config.dump(2);
  spec["bundle"] = binds.dir().string();
  CreateActor("binds", spec);
  CreateActor("good", CounterSpec(a->node));

  ExpectRefused(*a, "outside", "not under an allowed bundle root");
  ExpectRefused(*a, "symlink", "is a symlink");
  ExpectRefused(*a, "binds", a->root + " is not under the bundle's root");
  json x;
  ASSERT_TRUE(WaitStatus("good", "STATUS_RUNNING", 30s, &x));
  const long c = WaitCounter(*a, "good", 1);
  WaitCounter(*a, "good", c + 5);
  ExpectHeldBy(a->node, "good", x);
}

}  // namespace
}  // namespace stasis::testing
