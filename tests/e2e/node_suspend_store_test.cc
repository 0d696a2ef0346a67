// `stasis node` end to end, Suspend and the shared snapshot store: a suspend commits the snapshot
// to the store and the actor resumes on another node from it; a store that cannot be written
// leaves the complete snapshot on the node (PAUSED, CommitFailed) and nothing is lost; a committed
// snapshot altered in the store is refused before runsc reads it. The fixture is
// tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
using Clock = std::chrono::steady_clock;

// 2. Running → Suspended on node a → Running on node b, through one shared snapshot store.
TEST_F(NodeAgentTest, SuspendOnOneNodeResumeOnAnother) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  Agent* b = StartAgent(Node("b"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CreateActor("mover", CounterSpec(a->node));
  json actor;
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 30s, &actor));
  ExpectHeldBy(a->node, "mover", actor);
  const long before = WaitCounter(*a, "mover", 10);

  Patch("mover", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_SUSPENDED", 30s, &actor));
  json snap = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << actor["status"].dump();
  const std::string location = snap.value("location", "");
  EXPECT_EQ(location, Committed(store_, "mover") + "/" + snap.value("id", ""));
  EXPECT_EQ(snap.value("nodeName", ""), "") << "a committed snapshot belongs to no node";
  EXPECT_EQ(snap.value("trigger", ""), "Suspend");
  EXPECT_TRUE(fs::exists(location + "/manifest.json")) << location;
  EXPECT_THAT(LocalSnapshotsAfterCommit(*a, "mover"), ::testing::IsEmpty()) << "local copy kept after commit";
  EXPECT_THAT(PartialDirs(store_), ::testing::IsEmpty());
  ExpectAllWorkersFree(a->node);

  Patch("mover", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 30s, &actor));
  EXPECT_EQ(StatusField(actor, "nodeName"), json(b->node));
  ExpectHeldBy(b->node, "mover", actor);
  ExpectAllWorkersFree(a->node);
  const long after = WaitCounter(*b, "mover", before);  // polled: see AgentKilledMidRestore
  EXPECT_GE(after, before) << "restored on " << b->node << " but the counter restarted";
  WaitCounter(*b, "mover", after + 5);
  // Node a forgets the actor once it is bound elsewhere.
  const auto start = Clock::now();
  while (Clock::now() - start < 15s && fs::exists(RunDir(*a, "mover"))) std::this_thread::sleep_for(kPoll);
  ExpectNothingLeftOnNode(*a, "mover");
}

// 8b. A snapshot store that cannot be written (its path is under a regular file, so not even
// root can create it): Suspend keeps the complete snapshot on the node and rests PAUSED with
// CommitFailed; nothing is lost, the actor resumes from it.
TEST_F(NodeAgentTest, StoreNotWritableRestsPaused) {
  const fs::path file = work_.path() / "not-a-directory";
  std::ofstream(file) << "a regular file\n";
  const std::string store = (file / "store").string();
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 2, store);
  ASSERT_NE(a, nullptr);
  CreateActor("st", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("st", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*a, "st", 10);
  Patch("st", {{"desiredState", "Suspended"}});
  json x;
  ASSERT_TRUE(WaitActor("st", [](const json& y) {
    return StatusOf(y) == "STATUS_PAUSED" && CondIs(y, "CommitFailed", "True");
  }, 30s, "PAUSED with CommitFailed", &x));
  EXPECT_EQ(CondReason(x, "CommitFailed"), "StoreUnavailable");
  EXPECT_FALSE(CondMessage(x, "CommitFailed").empty());
  json snap = StatusField(x, "latestSnapshot");
  ASSERT_TRUE(snap.is_object());
  EXPECT_EQ(snap.value("nodeName", ""), a->node);
  EXPECT_EQ(snap.value("location", ""), LocalSnapshots(*a, "st") + "/" + snap.value("id", ""));
  EXPECT_TRUE(fs::exists(snap.value("location", "") + "/manifest.json"));
  ExpectAllWorkersFree(a->node);

  Patch("st", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("st", "STATUS_RUNNING", 30s, &x));
  EXPECT_GE(Counter(*a, "st"), before);
}

// 8c. One byte of a committed snapshot's image flipped in the store: the restore verifies every
// checksum before runsc sees the directory and refuses it (FAILED SnapshotCorrupt naming the
// file), the snapshot kept for inspection, the worker free.
TEST_F(NodeAgentTest, CorruptCommittedSnapshotIsRefused) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("cc", CounterSpec(a->node));
  json actor;
  ASSERT_TRUE(WaitStatus("cc", "STATUS_RUNNING", 30s, &actor));
  WaitCounter(*a, "cc", 3);
  Patch("cc", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("cc", "STATUS_SUSPENDED", 30s, &actor));
  const std::string dir = Committed(store_, "cc") + "/" + StatusField(actor, "latestSnapshot").value("id", "");
  fs::path largest;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() != "manifest.json" &&
        (largest.empty() || e.file_size() > fs::file_size(largest))) {
      largest = e.path();
    }
  }
  ASSERT_FALSE(largest.empty());
  {
    std::fstream f(largest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    const char c = static_cast<char>(f.get());
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  Patch("cc", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("cc", "STATUS_FAILED", 30s, &actor));
  EXPECT_EQ(CondReason(actor, "Ready"), "SnapshotCorrupt") << actor["status"].dump();
  EXPECT_THAT(CondMessage(actor, "Ready"), ::testing::HasSubstr(largest.filename().string() + " sha256"));
  EXPECT_TRUE(fs::exists(largest)) << "kept for inspection";
  ExpectAllWorkersFree(a->node);
}

}  // namespace
}  // namespace stasis::testing
