// `stasis node` end to end, crashes: kill -9 of the agent while a checkpoint or a restore is under
// way (held by tests/support/runsc-fault-inject.sh). A new agent on the same node converges on
// what the old one left, and the old one's orphaned runsc, released afterwards, does no harm. The
// fixture is tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// 7a. kill -9 of the agent while runsc checkpoint is under way (held by the delay injector):
// a new agent converges to PAUSED; the old agent's orphaned runsc, released afterwards, does
// no harm.
TEST_F(NodeAgentTest, AgentKilledMidCheckpoint) {
  Agent* first = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-checkpoint"));
  ASSERT_NE(first, nullptr);
  Arm("ck");
  CreateActor("ck", CounterSpec(first->node));
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*first, "ck", 10);
  Patch("ck", {{"desiredState", "Paused"}});
  const auto start = Clock::now();
  while (Clock::now() - start < 30s && InjectCalls("checkpoint", "ck").empty()) std::this_thread::sleep_for(50ms);
  auto calls = InjectCalls("checkpoint", "ck");
  ASSERT_EQ(calls.size(), 1u) << AgentLogs();
  EXPECT_EQ(StatusOf(GetActor("ck")), "STATUS_PAUSING");
  first->proc->Kill(SIGKILL);  // the agent only: its runsc child lives on, as after a crash
  ASSERT_TRUE(first->proc->Wait(10s).has_value());

  Agent* second = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(second, nullptr);
  json actor;
  ASSERT_TRUE(WaitStatus("ck", "STATUS_PAUSED", 30s, &actor));
  EXPECT_FALSE(StatusField(actor, "transitionStartTime").is_string());
  ExpectAllWorkersFree(second->node);
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
  const json snap = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(snap.is_object());
  EXPECT_TRUE(fs::exists(snap.value("location", "") + "/manifest.json"));

  // Now let the orphaned checkpoint go on: it must find nothing to damage.
  std::ofstream(ReleaseFile()) << "go\n";
  const long orphan = PidOf(calls[0]);
  const auto released = Clock::now();
  while (Clock::now() - released < 30s && ProcessAlive(orphan)) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ProcessAlive(orphan));
  actor = GetActor("ck");
  EXPECT_EQ(StatusOf(actor), "STATUS_PAUSED");
  EXPECT_EQ(StatusField(actor, "latestSnapshot"), snap);
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
  EXPECT_THAT(ProcessesAfterCheckpoint(*second, "ck"), ::testing::IsEmpty());
  ExpectAllWorkersFree(second->node);

  Patch("ck", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s, &actor));
  EXPECT_GE(Counter(*second, "ck"), before);
  ExpectHeldBy(second->node, "ck", actor);
}

// 7c. kill -9 of the agent mid-checkpoint, and this time its orphaned runsc finishes the save
// before a new agent starts: the sandbox is gone and the image in <id>.partial never got its
// manifest, so it is not a snapshot (DESIGN.md §6). The new agent removes it, and the actor
// settles SUSPENDED on its earlier complete snapshot, which resumes: nothing complete is lost.
TEST_F(NodeAgentTest, AgentKilledAfterOrphanedSave) {
  Agent* first = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-checkpoint"));
  ASSERT_NE(first, nullptr);
  CreateActor("ck", CounterSpec(first->node));
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*first, "ck", 10);
  Patch("ck", {{"desiredState", "Paused"}});  // not armed yet: a good snapshot
  json actor;
  ASSERT_TRUE(WaitStatus("ck", "STATUS_PAUSED", 30s, &actor));
  const json good = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(good.is_object());
  Patch("ck", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s));

  Arm("ck");
  Patch("ck", {{"desiredState", "Paused"}});
  const auto start = Clock::now();
  while (Clock::now() - start < 30s && InjectCalls("checkpoint", "ck").size() < 2) std::this_thread::sleep_for(50ms);
  auto calls = InjectCalls("checkpoint", "ck");
  ASSERT_EQ(calls.size(), 2u) << AgentLogs();
  ASSERT_THAT(calls[1], HasSubstr("action=hold"));
  first->proc->Kill(SIGKILL);
  ASSERT_TRUE(first->proc->Wait(10s).has_value());
  std::ofstream(ReleaseFile()) << "go\n";
  const long orphan = PidOf(calls[1]);
  const auto released = Clock::now();
  while (Clock::now() - released < 30s && ProcessAlive(orphan)) std::this_thread::sleep_for(50ms);
  ASSERT_FALSE(ProcessAlive(orphan));
  ASSERT_FALSE(PartialDirs(first->root).empty()) << "the orphaned save left no image: the case is not set up";

  Agent* second = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(WaitStatus("ck", "STATUS_SUSPENDED", 30s, &actor));
  EXPECT_EQ(StatusField(actor, "latestSnapshot"), good);
  EXPECT_TRUE(CondIs(actor, "CheckpointFailed", "True")) << actor["status"].dump(2);
  // Why, in one of two words: the new agent finds the sandbox stopped and the image without a
  // manifest ("no complete snapshot"); or, on a loaded machine, it still reads the sandbox as
  // running while the orphaned save's runsc tears it down, tries the checkpoint again, and
  // runsc answers that the container is stopped. Either way nothing complete is lost (below).
  EXPECT_THAT(CondMessage(actor, "CheckpointFailed"),
              ::testing::AnyOf(HasSubstr("no complete snapshot"), HasSubstr("in state stopped")));
  EXPECT_FALSE(StatusField(actor, "transitionStartTime").is_string());
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
  EXPECT_FALSE(fs::exists(RunDir(*second, "ck")));
  EXPECT_THAT(ProcessesAfterCheckpoint(*second, "ck"), ::testing::IsEmpty());
  ExpectAllWorkersFree(second->node);

  Patch("ck", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s, &actor));
  EXPECT_GE(Counter(*second, "ck"), before);
  ExpectHeldBy(second->node, "ck", actor);
}

// 7b. kill -9 of the agent while runsc restore is under way: a new agent converges to
// RUNNING from the same snapshot, with one worker held and one sandbox; the orphaned restore,
// released afterwards, does no harm.
TEST_F(NodeAgentTest, AgentKilledMidRestore) {
  Agent* first = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-restore"));
  ASSERT_NE(first, nullptr);
  Arm("rs");  // only its restores are held; its checkpoint goes straight through
  CreateActor("rs", CounterSpec(first->node));
  ASSERT_TRUE(WaitStatus("rs", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*first, "rs", 10);
  Patch("rs", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("rs", "STATUS_PAUSED", 30s));
  Patch("rs", {{"desiredState", "Running"}});
  const auto start = Clock::now();
  while (Clock::now() - start < 30s && InjectCalls("restore", "rs").empty()) std::this_thread::sleep_for(50ms);
  auto calls = InjectCalls("restore", "rs");
  ASSERT_EQ(calls.size(), 1u) << AgentLogs();
  // The claim and RESUMING are written beside the restore (resume_overlap.cc): they land while
  // it is held.
  EXPECT_TRUE(WaitStatus("rs", "STATUS_RESUMING", 10s));
  first->proc->Kill(SIGKILL);
  ASSERT_TRUE(first->proc->Wait(10s).has_value());

  Agent* second = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(second, nullptr);
  json actor;
  ASSERT_TRUE(WaitStatus("rs", "STATUS_RUNNING", 30s, &actor));
  EXPECT_FALSE(StatusField(actor, "transitionStartTime").is_string());
  ExpectHeldBy(second->node, "rs", actor);
  // Polled: the first exec into a just-restored sandbox can race its start under load.
  const long after = WaitCounter(*second, "rs", before);
  EXPECT_GE(after, before);

  std::ofstream(ReleaseFile()) << "go\n";
  const long orphan = PidOf(calls[0]);
  const auto released = Clock::now();
  while (Clock::now() - released < 30s && ProcessAlive(orphan)) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ProcessAlive(orphan));
  actor = GetActor("rs");
  EXPECT_EQ(StatusOf(actor), "STATUS_RUNNING");
  ExpectHeldBy(second->node, "rs", actor);
  WaitCounter(*second, "rs", after + 5);
  auto list = RunCommand({PinnedRunsc(), "-root", RunDir(*second, "rs"), "list", "-format", "json"}, 30s);
  ASSERT_TRUE(list.ok() && list->success());
  json ids = json::parse(list->out);
  ASSERT_TRUE(ids.is_array()) << list->out;
  EXPECT_EQ(ids.size(), 1u) << list->out;
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
}

}  // namespace
}  // namespace stasis::testing
