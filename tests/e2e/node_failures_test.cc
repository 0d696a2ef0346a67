// `stasis node` end to end, failure classes: a sandbox that dies as it is checkpointed, the
// nvproxy save failure of a GPU sandbox (tests/support/runsc-nvproxy-fault.sh), and bundles that
// cannot start. Each fails with the reason in a condition, is cleaned, is not retried where a
// retry cannot help, and leaves the other actors of the node alone. The fixture is
// tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// 4. The sandbox dies just as it is checkpointed (the wrapper kills it, then the real runsc
// checkpoint fails: "cannot checkpoint container … in state stopped"). Without an earlier
// snapshot the actor is FAILED; with one it is SUSPENDED on it. Cleaned, worker freed, the
// condition quotes runsc, and the checkpoint is never tried again.
TEST_F(NodeAgentTest, SandboxKilledDuringCheckpoint) {
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("kill-checkpoint"));
  ASSERT_NE(a, nullptr);
  CreateActor("nosnap", CounterSpec(a->node));
  CreateActor("withsnap", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("nosnap", "STATUS_RUNNING", 30s));
  ASSERT_TRUE(WaitStatus("withsnap", "STATUS_RUNNING", 30s));
  // withsnap gets a good snapshot first (the wrapper is not armed for it yet).
  const long before = WaitCounter(*a, "withsnap", 10);
  Patch("withsnap", {{"desiredState", "Paused"}});
  json actor;
  ASSERT_TRUE(WaitStatus("withsnap", "STATUS_PAUSED", 30s, &actor));
  const json good = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(good.is_object());
  Patch("withsnap", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("withsnap", "STATUS_RUNNING", 30s));
  ASSERT_EQ(InjectCalls("checkpoint", "withsnap").size(), 1u);
  ASSERT_EQ(InjectCalls("checkpoint", "nosnap").size(), 0u);

  Arm("nosnap");
  Arm("withsnap");
  Patch("nosnap", {{"desiredState", "Paused"}});
  Patch("withsnap", {{"desiredState", "Suspended"}});
  json failed, suspended;
  ASSERT_TRUE(WaitStatus("nosnap", "STATUS_FAILED", 30s, &failed));
  ASSERT_TRUE(WaitStatus("withsnap", "STATUS_SUSPENDED", 30s, &suspended));
  for (const auto& [name, x] : {std::pair<std::string, json>{"nosnap", failed}, {"withsnap", suspended}}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(CondIs(x, "CheckpointFailed", "True")) << x["status"].dump(2);
    EXPECT_THAT(CondMessage(x, "CheckpointFailed"),
                HasSubstr("cannot checkpoint container \"" + Id(name) + "\" in state stopped"));
    EXPECT_TRUE(CondIs(x, "Ready", "False"));
    EXPECT_FALSE(StatusField(x, "workerName").is_string());
    EXPECT_FALSE(fs::exists(RunDir(*a, name))) << "sandbox root not cleaned";
    EXPECT_THAT(ProcessesAfterCheckpoint(*a, name), ::testing::IsEmpty());
  }
  EXPECT_FALSE(StatusField(failed, "latestSnapshot").is_object());
  json kept = StatusField(suspended, "latestSnapshot");
  ASSERT_TRUE(kept.is_object());
  EXPECT_EQ(kept.value("id", ""), good.value("id", "")) << "the earlier snapshot must be kept";
  EXPECT_TRUE(fs::exists(kept.value("location", "") + "/manifest.json"));
  EXPECT_THAT(PartialDirs(a->root), ::testing::IsEmpty());
  ExpectAllWorkersFree(a->node);

  // Never retried: give the agent time to (wrongly) try again, then count.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(InjectCalls("checkpoint", "nosnap").size(), 1u) << ReadFile(InjectLog());
  EXPECT_EQ(InjectCalls("checkpoint", "withsnap").size(), 2u) << ReadFile(InjectLog());
  EXPECT_EQ(StatusOf(GetActor("nosnap")), "STATUS_FAILED");
  EXPECT_EQ(StatusOf(GetActor("withsnap")), "STATUS_SUSPENDED");

  // Nothing was lost: the kept snapshot resumes and the counter continues.
  Patch("withsnap", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("withsnap", "STATUS_RUNNING", 30s));
  EXPECT_GE(Counter(*a, "withsnap"), before);
}

// 5. The nvproxy save failure of a GPU sandbox (labelled fault wrapper beside the real runsc):
// the sandbox dies with the failed save → FAILED, cleaned, the condition quotes runsc, one
// attempt only. With checkpointPolicy LeaveRunningThenStop the same failure leaves it running.
TEST_F(NodeAgentTest, NvproxySaveFailure) {
  Agent* a = StartAgent(Node("a"), kInjectWrapper,
                        [&] {
                          auto env = InjectEnv("pass", kNvproxyWrapper);
                          env.push_back("STASIS_REAL_RUNSC=" + PinnedRunsc());
                          return env;
                        }());
  ASSERT_NE(a, nullptr);
  json direct_spec = CounterSpec(a->node);
  direct_spec["timeouts"] = {{"checkpointSeconds", 15}, {"restoreSeconds", 60}};
  CreateActor("direct", direct_spec);
  json lr_spec = CounterSpec(a->node);
  lr_spec["checkpointPolicy"] = "LeaveRunningThenStop";
  CreateActor("leaverunning", lr_spec);
  ASSERT_TRUE(WaitStatus("direct", "STATUS_RUNNING", 30s));
  ASSERT_TRUE(WaitStatus("leaverunning", "STATUS_RUNNING", 30s));

  const auto start = Clock::now();
  Patch("direct", {{"desiredState", "Paused"}});
  Patch("leaverunning", {{"desiredState", "Paused"}});
  json failed;
  ASSERT_TRUE(WaitStatus("direct", "STATUS_FAILED", 15s, &failed));  // within its checkpoint deadline
  std::cout << "[          ] nvproxy failure to FAILED in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() << " ms\n";
  EXPECT_TRUE(CondIs(failed, "CheckpointFailed", "True")) << failed["status"].dump(2);
  EXPECT_EQ(CondReason(failed, "CheckpointFailed"), "NvproxyLiveClients");
  EXPECT_THAT(CondMessage(failed, "CheckpointFailed"), HasSubstr("can't save with live nvproxy clients"));
  EXPECT_FALSE(fs::exists(RunDir(*a, "direct")));
  EXPECT_THAT(ProcessesMentioning(RunDir(*a, "direct")), ::testing::IsEmpty());
  EXPECT_THAT(Entries(LocalSnapshots(*a, "direct")), ::testing::IsEmpty()) << "partial image not removed";

  json lr;
  ASSERT_TRUE(WaitActor("leaverunning", [](const json& x) { return CondIs(x, "CheckpointFailed", "True"); },
                        30s, "CheckpointFailed", &lr));
  const auto lr_failed = Clock::now();
  EXPECT_THAT(CondMessage(lr, "CheckpointFailed"), HasSubstr("can't save with live nvproxy clients"));
  ASSERT_TRUE(WaitStatus("leaverunning", "STATUS_RUNNING", 10s, &lr));
  const long c = WaitCounter(*a, "leaverunning", 1);
  WaitCounter(*a, "leaverunning", c + 5);  // the workload survived the failed save
  ExpectHeldBy(a->node, "leaverunning", lr);

  std::this_thread::sleep_for(3s);
  EXPECT_EQ(InjectCalls("checkpoint", "direct").size(), 1u) << ReadFile(InjectLog());
  EXPECT_EQ(StatusOf(GetActor("direct")), "STATUS_FAILED");

  // The survivor's checkpoint is retried, with backoff: not in a loop that pauses the workload
  // for a save attempt as fast as the agent can go. Backing off from 1 s, an actor sees at most
  // 1 + log2(window) + 1 attempts in a window of a few seconds (the loop made ~2 a second).
  const auto window = std::chrono::duration<double>(Clock::now() - lr_failed).count();
  const auto attempts = InjectCalls("checkpoint", "leaverunning");
  std::cout << "[          ] LeaveRunningThenStop: " << attempts.size() << " checkpoint attempts in the "
            << window << " s since the first failure was seen\n";
  EXPECT_GE(attempts.size(), 2u) << "a checkpoint that failed while the actor survived is retried";
  EXPECT_LE(attempts.size(), 4u) << attempts.size() << " checkpoint attempts in about " << window
                                 << " s:\n" << ReadFile(InjectLog());
}

// 8a. A bundle without config.json and one whose root filesystem does not exist fail with the
// reason, while a good actor on the same agent runs normally.
TEST_F(NodeAgentTest, BadBundlesFailWithReasonOthersRun) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  const fs::path nocfg = BundleRoot() / "no-config";
  fs::create_directories(nocfg / "rootfs");
  const fs::path norootfs = BundleRoot() / "no-rootfs";
  fs::create_directories(norootfs);
  json config = json::parse(ReadFile(bundle_->dir() / "config.json"));
  config["root"]["path"] = "missing-rootfs";
  std::ofstream(norootfs / "config.json") << config.dump(2);

  json spec = CounterSpec(a->node);
  spec["bundle"] = nocfg.string();
  CreateActor("nocfg", spec);
  spec["bundle"] = norootfs.string();
  CreateActor("norootfs", spec);
  CreateActor("good", CounterSpec(a->node));

  json x;
  ASSERT_TRUE(WaitStatus("nocfg", "STATUS_FAILED", 30s, &x));
  EXPECT_TRUE(CondIs(x, "Ready", "False"));
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("config.json"));
  EXPECT_EQ(CondReason(x, "Ready"), "BadBundle");
  ASSERT_TRUE(WaitStatus("norootfs", "STATUS_FAILED", 30s, &x));
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr((norootfs / "missing-rootfs").string()));
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("root filesystem"));
  ASSERT_TRUE(WaitStatus("good", "STATUS_RUNNING", 30s, &x));
  ExpectHeldBy(a->node, "good", x);
  const long c = WaitCounter(*a, "good", 1);
  WaitCounter(*a, "good", c + 5);
  for (const char* n : {"nocfg", "norootfs"}) {
    EXPECT_THAT(ProcessesMentioning(RunDir(*a, n)), ::testing::IsEmpty()) << n;
  }
}

}  // namespace
}  // namespace stasis::testing
