// `stasis node` end to end, clones (spec.source): an actor whose first start restores another
// actor's committed snapshot, on the node that took it or another one, while the source runs
// on; the postRestore hook that gives each clone its own identity; and a clone whose source is
// missing, has no committed snapshot yet, or whose hook fails; a hook cut short by an agent's
// death runs again. The fixture is
// tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

// The hook a clone takes its identity with: its own hostname, and a file naming it.
json IdentityHook() {
  return {{"postRestore",
           {{"command",
             {"/bin/sh", "-c",
              "hostname \"$STASIS_ACTOR_NAME\" && "
              "echo \"$STASIS_ACTOR_NAMESPACE/$STASIS_ACTOR_NAME $STASIS_ACTOR_UID $STASIS_RESTORE "
              "$STASIS_SNAPSHOT_ID\" > /tmp/identity"}},
            {"timeoutSeconds", 20}}}};
}

class NodeClonesTest : public NodeAgentTest {
 protected:
  // The counter, allowed to set its hostname: the hook runs with the container's capabilities,
  // and sethostname(2) needs CAP_SYS_ADMIN (inside the sandbox's own kernel).
  void SetUp() override {
    NodeAgentTest::SetUp();
    renaming_bundle_ = std::make_unique<Bundle>(CounterArgs(), BundleRoot(),
                                                std::vector<std::string>{"CAP_KILL", "CAP_SYS_ADMIN"});
  }

  json CounterSpec(const std::string& node) {
    json spec = NodeAgentTest::CounterSpec(node);
    spec["bundle"] = renaming_bundle_->dir().string();
    return spec;
  }


  json CloneSpec(const std::string& node, const std::string& source) {
    json spec = CounterSpec(node);
    spec["source"] = {{"actorName", source}};
    spec["hooks"] = IdentityHook();
    return spec;
  }

  // Runs `name` on `a` until its counter passes `count`, suspends it into the store and
  // resumes it; returns the counter its committed snapshot holds at least.
  long SuspendedAndRunningAgain(Agent& a, const std::string& name, long count, json* actor) {
    json spec = CounterSpec(a.node);
    spec["hooks"] = IdentityHook();
    CreateActor(name, spec);
    EXPECT_TRUE(WaitStatus(name, "STATUS_RUNNING", 30s, actor));
    const long at = WaitCounter(a, name, count);
    Patch(name, {{"desiredState", "Suspended"}});
    EXPECT_TRUE(WaitStatus(name, "STATUS_SUSPENDED", 30s, actor));
    Patch(name, {{"desiredState", "Running"}});
    EXPECT_TRUE(WaitStatus(name, "STATUS_RUNNING", 30s, actor));
    return at;
  }

  std::unique_ptr<Bundle> renaming_bundle_;
};

// A source counted past 50, was suspended into the store and runs again; five clones on two
// nodes each start from its snapshot — their counters continue from it, not from 0 — and each
// takes its own hostname and identity in its hook. The source keeps running throughout, and an
// ordinary resume runs the hook too (STASIS_RESTORE=resume).
TEST_F(NodeClonesTest, FiveClonesContinueFromTheSourcesSnapshotEachWithItsOwnIdentity) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 3);
  Agent* b = StartAgent(Node("b"), PinnedRunsc(), {}, 3);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  json source;
  const long at_snapshot = SuspendedAndRunningAgain(*a, "src", 50, &source);
  ASSERT_GE(at_snapshot, 50);
  const std::string snapshot_id = StatusField(source, "latestSnapshot").value("id", "");
  const std::string source_uid = source["metadata"].value("uid", "");
  EXPECT_THAT(InSandbox(*a, "src", {"/bin/cat", "/tmp/identity"}),
              HasSubstr(ns_ + "/src " + source_uid + " resume " + snapshot_id));

  for (int i = 0; i < 5; ++i) {
    const Agent& on = i % 2 == 0 ? *b : *a;
    CreateActor("clone-" + std::to_string(i), CloneSpec(on.node, "src"));
  }
  for (int i = 0; i < 5; ++i) {
    const std::string name = "clone-" + std::to_string(i);
    const Agent& on = i % 2 == 0 ? *b : *a;
    json clone;
    ASSERT_TRUE(WaitStatus(name, "STATUS_RUNNING", 60s, &clone));
    // Read at once: a boot would count from 1, ten a second.
    const long first = FirstCounter(on, name);
    EXPECT_GE(first, at_snapshot) << name << " started from 0 instead of the source's snapshot";
    WaitCounter(on, name, first + 3);
    EXPECT_EQ(InSandbox(on, name, {"/bin/hostname"}), name);
    EXPECT_EQ(InSandbox(on, name, {"/bin/cat", "/tmp/identity"}),
              ns_ + "/" + name + " " + clone["metadata"].value("uid", "") + " clone " + snapshot_id);
    const json from = StatusField(clone, "clonedFrom");
    EXPECT_EQ(from.value("actorName", ""), "src") << clone["status"].dump();
    EXPECT_EQ(from.value("actorUID", ""), source_uid);
    EXPECT_EQ(from.value("snapshotID", ""), snapshot_id);
    EXPECT_FALSE(StatusField(clone, "latestSnapshot").is_object()) << "a clone has no snapshot of its own yet";
    EXPECT_THAT(CondMessage(clone, "Ready"), HasSubstr("of actor src"));
    EXPECT_EQ(CondReason(clone, "Ready"), "RestoredFromSource");
    EXPECT_TRUE(StatusField(clone, "workerName").is_string()) << clone["status"].dump();
  }
  // The source ran on; its own snapshot is untouched by the clones.
  json now = GetActor("src");
  EXPECT_EQ(StatusOf(now), "STATUS_RUNNING");
  EXPECT_EQ(StatusField(now, "latestSnapshot").value("id", ""), snapshot_id);
  WaitCounter(*a, "src", Counter(*a, "src") + 3);
  EXPECT_EQ(InSandbox(*a, "src", {"/bin/hostname"}), "src");

  // A clone's own suspend is its own snapshot, under its own name.
  Patch("clone-1", {{"desiredState", "Suspended"}});
  json clone;
  ASSERT_TRUE(WaitStatus("clone-1", "STATUS_SUSPENDED", 30s, &clone));
  EXPECT_THAT(StatusField(clone, "latestSnapshot").value("location", ""), HasSubstr(Committed(store_, "clone-1")));
}

// A clone of a source that does not exist yet, then exists with only a node-local pause
// snapshot, waits (Ready=False with the reason, no worker held) and starts once the source's
// snapshot is committed.
TEST_F(NodeClonesTest, AMissingSourceSnapshotIsReportedUntilOneIsCommitted) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 3);
  ASSERT_NE(a, nullptr);
  CreateActor("early", CloneSpec(a->node, "later"));
  json clone;
  ASSERT_TRUE(WaitActor("early", [](const json& x) { return CondReason(x, "Ready") == "SourceNotFound"; }, 30s,
                        "Ready=False SourceNotFound", &clone));
  EXPECT_THAT(CondMessage(clone, "Ready"), HasSubstr("later"));
  EXPECT_EQ(Workers(a->node).size(), 3u);
  ExpectAllWorkersFree(a->node);

  CreateActor("later", CounterSpec(a->node));
  json source;
  ASSERT_TRUE(WaitStatus("later", "STATUS_RUNNING", 30s, &source));
  WaitCounter(*a, "later", 5);
  Patch("later", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("later", "STATUS_PAUSED", 30s, &source));
  ASSERT_TRUE(WaitActor("early",
                        [](const json& x) { return CondReason(x, "Ready") == "SourceSnapshotUnavailable"; }, 60s,
                        "Ready=False SourceSnapshotUnavailable (a pause snapshot is on one node only)", &clone));
  EXPECT_NE(StatusOf(clone), "STATUS_RUNNING");

  Patch("later", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("later", "STATUS_SUSPENDED", 30s, &source));
  ASSERT_TRUE(WaitStatus("early", "STATUS_RUNNING", 90s, &clone));
  EXPECT_EQ(StatusField(clone, "clonedFrom").value("snapshotID", ""),
            StatusField(source, "latestSnapshot").value("id", ""));
  EXPECT_EQ(InSandbox(*a, "early", {"/bin/hostname"}), "early");
}

// A hook that fails is a failed resume: the restored sandbox is removed, the worker given back,
// the clone rests with Ready=False PostRestoreHookFailed quoting the hook, and it never runs
// unidentified; a fixed hook (a new generation) starts it.
TEST_F(NodeClonesTest, AFailingHookFailsTheStartAndTheCloneNeverRunsUnidentified) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 3);
  ASSERT_NE(a, nullptr);
  json source;
  SuspendedAndRunningAgain(*a, "src", 5, &source);
  json spec = CloneSpec(a->node, "src");
  spec["hooks"]["postRestore"]["command"] = {"/bin/sh", "-c", "echo no identity service >&2; exit 3"};
  CreateActor("twin", spec);
  json clone;
  ASSERT_TRUE(WaitActor("twin", [](const json& x) { return CondReason(x, "Ready") == "PostRestoreHookFailed"; },
                        60s, "Ready=False PostRestoreHookFailed", &clone));
  EXPECT_THAT(CondMessage(clone, "Ready"), HasSubstr("exited 3"));
  EXPECT_THAT(CondMessage(clone, "Ready"), HasSubstr("no identity service"));
  EXPECT_NE(StatusOf(clone), "STATUS_RUNNING");
  EXPECT_FALSE(StatusField(clone, "clonedFrom").is_object());
  // Only the source holds a worker; the twin's sandbox is gone.
  const auto start = Clock::now();
  while (Clock::now() - start < 10s && !ProcessesMentioning(RunDir(*a, "twin")).empty()) {
    std::this_thread::sleep_for(kPoll);
  }
  EXPECT_THAT(ProcessesMentioning(RunDir(*a, "twin")), ::testing::IsEmpty());

  Patch("twin", {{"hooks", IdentityHook()}});
  ASSERT_TRUE(WaitStatus("twin", "STATUS_RUNNING", 60s, &clone));
  EXPECT_EQ(InSandbox(*a, "twin", {"/bin/hostname"}), "twin");
}

// kill -9 of the agent while a clone's postRestore hook runs: the new agent finds the restored
// sandbox running and runs the hook again before RUNNING — a restore never runs without its
// identity, however the agent died.
TEST_F(NodeClonesTest, AnAgentKilledDuringTheHookRunsItAgain) {
  Agent* first = StartAgent(Node("a"), PinnedRunsc(), {}, 3);
  ASSERT_NE(first, nullptr);
  json source;
  SuspendedAndRunningAgain(*first, "src", 5, &source);
  json spec = CloneSpec(first->node, "src");
  spec["hooks"]["postRestore"]["command"] = {
      "/bin/sh", "-c", "echo run >> /tmp/hook-runs; sleep 3; hostname \"$STASIS_ACTOR_NAME\""};
  CreateActor("slow", spec);
  const auto start = Clock::now();
  while (Clock::now() - start < 60s && ProcessesMentioning("/tmp/hook-runs").empty()) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(ProcessesMentioning("/tmp/hook-runs").empty()) << "the hook never started\n" << AgentLogs();
  json clone = GetActor("slow");
  EXPECT_EQ(StatusOf(clone), "STATUS_RESUMING");
  EXPECT_EQ(StatusField(clone, "clonedFrom").value("actorName", ""), "src") << "recorded with RESUMING";
  first->proc->Kill(SIGKILL);
  ASSERT_TRUE(first->proc->Wait(10s).has_value());

  Agent* second = StartAgent(Node("a"), PinnedRunsc(), {}, 3);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(WaitStatus("slow", "STATUS_RUNNING", 60s, &clone));
  EXPECT_EQ(InSandbox(*second, "slow", {"/bin/cat", "/tmp/hook-runs"}), "run\nrun") << "the hook ran again";
  EXPECT_EQ(InSandbox(*second, "slow", {"/bin/hostname"}), "slow");
  EXPECT_EQ(StatusField(clone, "clonedFrom").value("snapshotID", ""),
            StatusField(source, "latestSnapshot").value("id", ""));
}

}  // namespace
}  // namespace stasis::testing
