// `stasis node` end to end with every name length the API accepts: actors named with 1 to 253
// characters in a namespace of 63 run, pause, resume, suspend and are deleted with real runsc
// sandboxes. The runsc id, root, control socket, lock and log of each are named by its short
// sandbox id (reconcilers/node/sandbox_id.h), never by the name itself; "<ns>_<name>" failed
// beyond ~83 characters. Also: the Paused and Suspended conditions that `kubectl wait` uses,
// each condition carrying its write's observedGeneration, and Paused satisfied by SUSPENDED.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reconcilers/node/sandbox_id.h"
#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

// Every condition of the status carries the status's observedGeneration.
void ExpectConditionsCurrent(const json& actor) {
  const json gen = actor["status"]["observedGeneration"];
  for (const auto& c : actor["status"]["conditions"]) {
    EXPECT_EQ(c["observedGeneration"], gen) << c.dump() << " in " << actor["status"].dump();
  }
}

std::string NameOfLength(size_t n) {
  // Lowercase alphanumerics; a 253-character DNS subdomain needs no dots.
  std::string name;
  for (size_t i = 0; i < n; ++i) name.push_back(static_cast<char>('a' + (i % 26)));
  return name;
}

TEST_F(NodeAgentTest, EveryNameLengthTheApiAcceptsRunsPausesResumesSuspendsAndIsDeleted) {
  const std::vector<size_t> lengths = {1, 63, 83, 84, 120, 200, 253};
  // Started in the test's own namespace (its node name, a label value, derives from it); the
  // actors then live in one of 63 characters.
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, static_cast<int>(lengths.size()));
  ASSERT_NE(a, nullptr);
  const std::string long_ns = "nm-" + std::string(60, 'n');
  ASSERT_EQ(long_ns.size(), 63u);
  ASSERT_EQ(Kubectl({"create", "namespace", long_ns}).exit_code, 0);
  ns_ = long_ns;
  std::vector<std::string> names;
  for (size_t n : lengths) {
    names.push_back(NameOfLength(n));
    CreateActor(names.back(), CounterSpec(a->node));
  }
  json actor;
  for (const auto& name : names) {
    ASSERT_TRUE(WaitStatus(name, "STATUS_RUNNING", 60s, &actor)) << name.size() << " characters";
    EXPECT_EQ(StatusField(actor, "sandboxID"), json(SandboxIdFor(ns_, name)));
    EXPECT_LE(SandboxIdFor(ns_, name).size(), 29u);
    EXPECT_TRUE(CondIs(actor, "Paused", "False")) << actor["status"].dump();
    ExpectConditionsCurrent(actor);
    WaitCounter(*a, name, 2);
  }
  for (const auto& name : names) Patch(name, {{"desiredState", "Paused"}});
  for (const auto& name : names) {
    ASSERT_TRUE(WaitStatus(name, "STATUS_PAUSED", 60s, &actor)) << name.size() << " characters";
    EXPECT_TRUE(CondIs(actor, "Paused", "True")) << actor["status"].dump();
    EXPECT_TRUE(CondIs(actor, "Suspended", "False")) << actor["status"].dump();
    ExpectConditionsCurrent(actor);
  }
  for (const auto& name : names) Patch(name, {{"desiredState", "Running"}});
  for (const auto& name : names) {
    ASSERT_TRUE(WaitStatus(name, "STATUS_RUNNING", 60s, &actor)) << name.size() << " characters";
    EXPECT_EQ(CondReason(actor, "CheckpointFailed"), "ClearedOnResume");
    WaitCounter(*a, name, 3);
  }
  for (const auto& name : names) Patch(name, {{"desiredState", "Suspended"}});
  for (const auto& name : names) {
    ASSERT_TRUE(WaitStatus(name, "STATUS_SUSPENDED", 60s, &actor)) << name.size() << " characters";
    EXPECT_TRUE(CondIs(actor, "Suspended", "True")) << actor["status"].dump();
    ExpectConditionsCurrent(actor);
  }
  // Paused asked of a SUSPENDED actor: satisfied as it is, and the conditions say so.
  Patch(names[0], {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitActor(
      names[0],
      [](const json& x) {
        return x["status"].value("observedGeneration", 0) == x["metadata"].value("generation", -1);
      },
      30s, "the new generation observed", &actor));
  EXPECT_EQ(StatusOf(actor), "STATUS_SUSPENDED");
  EXPECT_TRUE(CondIs(actor, "Paused", "True")) << actor["status"].dump();
  EXPECT_EQ(CondReason(actor, "Paused"), "Suspended");
  ExpectConditionsCurrent(actor);

  for (const auto& name : names) ASSERT_EQ(Kubectl({"delete", "actor", name, "-n", ns_, "--wait=false"}).exit_code, 0);
  for (const auto& name : names) {
    ASSERT_TRUE(WaitActor(name, [](const json& x) { return x.is_null(); }, 60s, "deleted")) << name.size();
    ExpectNothingLeftOnNode(*a, name);
  }
  ExpectAllWorkersFree(a->node);
}

}  // namespace
}  // namespace stasis::testing
