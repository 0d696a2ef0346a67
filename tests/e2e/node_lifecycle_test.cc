// `stasis node` end to end, an actor's life on one node: Running → Paused → Running (with either
// checkpoint policy, and from a Pause snapshot of an earlier boot, verified before the restore),
// and deletion from every status leaving nothing behind. The fixture, and what these tests may
// and may not do, is tests/support/node_agent_fixture.h.
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
using ::testing::HasSubstr;

// 1. Running → Paused → Running on one node: the worker is given back while paused, the
// node-local snapshot is complete, and the restored counter continues where it was.
TEST_F(NodeAgentTest, PauseAndResume) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("counter", CounterSpec(a->node));
  json actor;
  ASSERT_TRUE(WaitStatus("counter", "STATUS_RUNNING", 30s, &actor));
  EXPECT_EQ(StatusField(actor, "nodeName"), json(a->node));
  ExpectHeldBy(a->node, "counter", actor);
  EXPECT_TRUE(CondIs(actor, "Ready", "True")) << actor["status"].dump();
  const long before = WaitCounter(*a, "counter", 10);

  Patch("counter", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("counter", "STATUS_PAUSED", 30s, &actor));
  ExpectAllWorkersFree(a->node);
  EXPECT_FALSE(StatusField(actor, "workerName").is_string()) << actor["status"].dump();
  EXPECT_FALSE(StatusField(actor, "transitionStartTime").is_string());
  json snap = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << actor["status"].dump();
  EXPECT_EQ(snap.value("nodeName", ""), a->node);
  EXPECT_EQ(snap.value("trigger", ""), "Pause");
  EXPECT_GT(snap.value("sizeBytes", 0), 0);
  const std::string location = snap.value("location", "");
  EXPECT_EQ(location, LocalSnapshots(*a, "counter") + "/" + snap.value("id", ""));
  EXPECT_TRUE(fs::exists(location + "/manifest.json")) << location;
  EXPECT_THAT(ProcessesAfterCheckpoint(*a, "counter"), ::testing::IsEmpty()) << "the paused sandbox still runs";

  Patch("counter", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("counter", "STATUS_RUNNING", 30s, &actor));
  ExpectHeldBy(a->node, "counter", actor);
  const long after = WaitCounter(*a, "counter", before);  // polled: see AgentKilledMidRestore
  EXPECT_GE(after, before) << "the counter restarted instead of continuing";
  WaitCounter(*a, "counter", after + 5);  // and it keeps counting
  EXPECT_THAT(CondMessage(actor, "Ready"), HasSubstr(snap.value("id", "")));
}

// checkpointPolicy LeaveRunningThenStop: the save leaves the sandbox running, so it is deleted
// before the PAUSED write (the status never says "at rest" while the workload still runs), and
// nothing of it is left afterwards; the resume continues the counter.
TEST_F(NodeAgentTest, LeaveRunningThenStopPausesAndResumes) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  json spec = CounterSpec(a->node);
  spec["checkpointPolicy"] = "LeaveRunningThenStop";
  CreateActor("lr", spec);
  json actor;
  ASSERT_TRUE(WaitStatus("lr", "STATUS_RUNNING", 30s, &actor));
  const long before = WaitCounter(*a, "lr", 5);

  Patch("lr", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("lr", "STATUS_PAUSED", 30s, &actor));
  ExpectAllWorkersFree(a->node);
  const auto steps = StepsAfterCheckpointInLog(*a, "lr");
  ASSERT_NE(steps.deleted, std::string::npos) << AgentLogs();
  ASSERT_NE(steps.written, std::string::npos) << AgentLogs();
  EXPECT_LT(steps.deleted, steps.written) << "the still-running sandbox was deleted after the PAUSED write\n" << AgentLogs();
  // The sandbox's runsc root goes with it (polled: the reconcile ends after the write).
  for (int i = 0; i < 100 && fs::exists(RunDir(*a, "lr")); ++i) std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(fs::exists(RunDir(*a, "lr"))) << "the paused actor's runsc root is left";

  Patch("lr", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("lr", "STATUS_RUNNING", 30s, &actor));
  const long after = WaitCounter(*a, "lr", before);
  EXPECT_GE(after, before) << "the counter restarted instead of continuing";
}

// A Pause snapshot is complete before its fsyncs (--pause-snapshot-sync deferred): its manifest
// names this boot. One that names another boot (as after a reboot that could have torn it) is
// read in full before the restore: intact, it resumes; damaged, the actor fails with the
// reason instead of being restored from it. A bad flag value is refused before anything starts.
TEST_F(NodeAgentTest, PauseSnapshotFromAnEarlierBootIsVerified) {
  auto bad = RunCommand({kStasis, "node", "--node-name", Node("x"), "--pause-snapshot-sync", "never"}, 30s);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code, 2);
  EXPECT_THAT(bad->err, HasSubstr("--pause-snapshot-sync must be deferred or before-status, not \"never\""));

  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("counter", CounterSpec(a->node));
  json actor;
  ASSERT_TRUE(WaitStatus("counter", "STATUS_RUNNING", 30s, &actor));
  const long before = WaitCounter(*a, "counter", 5);
  std::string boot_id;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id") >> std::ws, boot_id);
  // Pauses, and rewrites the new snapshot's manifest as if it were written in an earlier boot.
  auto pause_from_earlier_boot = [&]() -> std::string {
    Patch("counter", {{"desiredState", "Paused"}});
    if (!WaitStatus("counter", "STATUS_PAUSED", 30s, &actor)) return "";
    const std::string dir = StatusField(actor, "latestSnapshot").value("location", "");
    // Complete without checksums; the agent's background job adds them (and syncs), then the
    // "reboot" comes.
    json m = ManifestWithChecksums(dir, 10s);
    if (m.is_null()) {
      ADD_FAILURE() << "the checksums of " << dir << " were never computed";
      return "";
    }
    EXPECT_EQ(m.value("deferredSyncBootId", ""), boot_id) << m.dump();
    m["deferredSyncBootId"] = "00000000-0000-0000-0000-earlier-boot";
    std::ofstream(dir + "/manifest.json", std::ios::trunc) << m.dump(2);
    return dir;
  };

  ASSERT_FALSE(pause_from_earlier_boot().empty());
  Patch("counter", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("counter", "STATUS_RUNNING", 30s, &actor));
  EXPECT_GE(WaitCounter(*a, "counter", before), before);
  EXPECT_THAT(a->proc->Log(), HasSubstr("why=\"completed before a reboot, before it was synced\""));

  const std::string dir = pause_from_earlier_boot();
  ASSERT_FALSE(dir.empty());
  // The largest image file, one byte changed: what a power loss before the write-back leaves.
  fs::path largest;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && (largest.empty() || e.file_size() > fs::file_size(largest))) largest = e.path();
  }
  {
    std::fstream f(largest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    const char c = static_cast<char>(f.get());
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  Patch("counter", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("counter", "STATUS_FAILED", 30s, &actor));
  EXPECT_EQ(CondReason(actor, "Ready"), "SnapshotCorrupt") << actor["status"].dump();
  EXPECT_THAT(CondMessage(actor, "Ready"), HasSubstr("does not match the manifest")) << actor["status"].dump();
  ExpectAllWorkersFree(a->node);
}

// 3. Deletion from RUNNING, PAUSED, SUSPENDED and FAILED: the object goes, and so does
// everything the agent made for it.
TEST_F(NodeAgentTest, DeleteFromEveryStatus) {
  // One worker each: a FAILED actor needs one too while it tries to start.
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 4);
  ASSERT_NE(a, nullptr);
  const fs::path empty_bundle = BundleRoot() / "empty-bundle";
  fs::create_directories(empty_bundle);
  CreateActor("run", CounterSpec(a->node));
  CreateActor("paus", CounterSpec(a->node));
  CreateActor("susp", CounterSpec(a->node));
  json failed_spec = CounterSpec(a->node);
  failed_spec["bundle"] = empty_bundle.string();
  CreateActor("fail", failed_spec);
  for (const char* n : {"run", "paus", "susp"}) ASSERT_TRUE(WaitStatus(n, "STATUS_RUNNING", 30s));
  ASSERT_TRUE(WaitStatus("fail", "STATUS_FAILED", 30s));
  Patch("paus", {{"desiredState", "Paused"}});
  Patch("susp", {{"desiredState", "Suspended"}});
  json paused, suspended;
  ASSERT_TRUE(WaitStatus("paus", "STATUS_PAUSED", 30s, &paused));
  ASSERT_TRUE(WaitStatus("susp", "STATUS_SUSPENDED", 30s, &suspended));
  ASSERT_FALSE(Entries(LocalSnapshots(*a, "paus")).empty());
  ASSERT_FALSE(Entries(Committed(store_, "susp")).empty());

  auto r = Kubectl({"delete", "actor", "run", "paus", "susp", "fail", "-n", ns_, "--wait=false"});
  ASSERT_TRUE(r.success()) << r.err;
  for (const char* n : {"run", "paus", "susp", "fail"}) {
    EXPECT_TRUE(WaitActor(n, [](const json& x) { return x.is_null(); }, 30s, "deleted"));
  }
  for (const char* n : {"run", "paus", "susp", "fail"}) {
    SCOPED_TRACE(n);
    ExpectNothingLeftOnNode(*a, n);
    EXPECT_THAT(Entries(Committed(store_, n)), ::testing::IsEmpty());
    EXPECT_FALSE(fs::exists(a->root + "/logs/" + Id(n) + ".log"));
  }
  EXPECT_THAT(PartialDirs(a->root), ::testing::IsEmpty());
  ExpectAllWorkersFree(a->node);
  auto list = RunCommand({"sh", "-c", "ls -d " + a->root + "/run/*/ 2>/dev/null | wc -l"}, 10s);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->out, "0\n") << "runtime roots left under " << a->root << "/run";
}

}  // namespace
}  // namespace stasis::testing
