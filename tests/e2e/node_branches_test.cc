// `stasis node` end to end, the branches of the state machine that are about the runtime, each
// produced for real: a sandbox that dies while it runs, a checkpoint held past its deadline, a
// restore of an image from another runsc build, a restore of a snapshot deleted from the disk,
// a runsc without CUDA checkpoint support and a GPU sandbox dead before its preflight, and a
// RESUMING status over a sandbox that runs. docs/testing.md maps each branch to its test; the
// fixture is tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kNoCudaWrapper = std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-no-cuda-checkpoint.sh";

// kill -9 of every process of the sandbox (the sandbox, its gofer, the container's processes
// are all started with its runsc root on their command line): a crash, not a stop.
void KillSandbox(const std::string& run_dir) {
  for (const std::string& p : ProcessesMentioning(run_dir)) kill(std::stol(p.substr(0, p.find(':'))), SIGKILL);
}

// A RUNNING sandbox killed by nobody the agent knows of: the liveness check finds it, the actor
// is FAILED (no snapshot) with SandboxDied, cleaned, its worker freed.
TEST_F(NodeAgentTest, SandboxKilledWhileRunning) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("k", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("k", "STATUS_RUNNING", 30s));
  WaitCounter(*a, "k", 3);
  KillSandbox(RunDir(*a, "k"));
  json x;
  // The liveness check runs every 10 s.
  ASSERT_TRUE(WaitStatus("k", "STATUS_FAILED", 40s, &x));
  EXPECT_EQ(CondReason(x, "Ready"), "SandboxDied");
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("while the actor should run"));
  EXPECT_FALSE(CondIs(x, "CheckpointFailed", "True")) << "no checkpoint was asked";
  EXPECT_FALSE(StatusField(x, "workerName").is_string());
  EXPECT_FALSE(fs::exists(RunDir(*a, "k")));
  ExpectAllWorkersFree(a->node);
}

// A checkpoint that outlives spec.timeouts.checkpointSeconds (held by the delay injector in
// front of the real runsc): the agent kills it at its deadline and, as docs/node-agent.md says,
// never trusts the sandbox again though it still runs — deleted, FAILED without a snapshot.
TEST_F(NodeAgentTest, CheckpointHeldPastDeadline) {
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-checkpoint"));
  ASSERT_NE(a, nullptr);
  Arm("h");
  json spec = CounterSpec(a->node);
  spec["timeouts"] = {{"checkpointSeconds", 2}};
  CreateActor("h", spec);
  ASSERT_TRUE(WaitStatus("h", "STATUS_RUNNING", 30s));
  WaitCounter(*a, "h", 3);
  Patch("h", {{"desiredState", "Suspended"}});
  json x;
  ASSERT_TRUE(WaitStatus("h", "STATUS_FAILED", 30s, &x));
  EXPECT_EQ(CondReason(x, "Ready"), "Timeout");
  EXPECT_TRUE(CondIs(x, "CheckpointFailed", "True"));
  EXPECT_FALSE(StatusField(x, "latestSnapshot").is_object());
  ASSERT_EQ(InjectCalls("checkpoint", "h").size(), 1u);
  EXPECT_THAT(ProcessesAfterCheckpoint(*a, "h"), ::testing::IsEmpty()) << "the suspect sandbox still runs";
  EXPECT_FALSE(fs::exists(RunDir(*a, "h")));
  EXPECT_THAT(PartialDirs(a->root), ::testing::IsEmpty());
  ExpectAllWorkersFree(a->node);
}

// A restore of an image whose runsc version was patched: runsc refuses it (version_mismatch),
// which no retry can cure — FAILED with VersionMismatch, the snapshot kept on the disk.
TEST_F(NodeAgentTest, RestoreOfPatchedVersion) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("v", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("v", "STATUS_RUNNING", 30s));
  WaitCounter(*a, "v", 3);
  Patch("v", {{"desiredState", "Paused"}});
  json x;
  ASSERT_TRUE(WaitStatus("v", "STATUS_PAUSED", 30s, &x));
  const std::string location = StatusField(x, "latestSnapshot").value("location", "");
  ASSERT_TRUE(fs::exists(location + "/checkpoint.img")) << location;
  ASSERT_FALSE(ManifestWithChecksums(location, 10s).is_null()) << location;
  ASSERT_NO_FATAL_FAILURE(PatchRunscVersion(location + "/checkpoint.img", "release-19990101.0"));
  Patch("v", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("v", "STATUS_FAILED", 30s, &x));
  EXPECT_EQ(CondReason(x, "Ready"), "VersionMismatch");
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("release-19990101.0"));
  EXPECT_EQ(StatusField(x, "latestSnapshot").value("location", ""), location);
  EXPECT_TRUE(fs::exists(location + "/manifest.json")) << "the snapshot is kept";
  ExpectAllWorkersFree(a->node);
}

// A restore of a node-local snapshot deleted from the disk: snapshot_not_found, FAILED, and
// runsc is never asked to restore it.
TEST_F(NodeAgentTest, RestoreOfDeletedSnapshot) {
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("pass"));
  ASSERT_NE(a, nullptr);
  CreateActor("d", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("d", "STATUS_RUNNING", 30s));
  WaitCounter(*a, "d", 3);
  Patch("d", {{"desiredState", "Paused"}});
  json x;
  ASSERT_TRUE(WaitStatus("d", "STATUS_PAUSED", 30s, &x));
  const std::string location = StatusField(x, "latestSnapshot").value("location", "");
  ASSERT_FALSE(location.empty());
  fs::remove_all(location);
  Patch("d", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("d", "STATUS_FAILED", 30s, &x));
  EXPECT_EQ(CondReason(x, "Ready"), "SnapshotNotFound");
  EXPECT_THAT(InjectCalls("restore", "d"), ::testing::IsEmpty());
  ExpectAllWorkersFree(a->node);
}

// A GPU actor (CDI-described GPU workers on this CPU machine) on a node whose runsc cannot
// checkpoint a CUDA context: the preflight refuses the suspend, the actor keeps running.
TEST_F(NodeAgentTest, RunscWithoutCudaCheckpoint) {
  const std::string cdi = WriteCdiSpecs(/*with_private_dir=*/true);
  std::vector<std::string> env = InjectEnv("pass", kNoCudaWrapper);
  env.push_back("STASIS_REAL_RUNSC=" + PinnedRunsc());
  Agent* a = StartAgent(Node("a"), kInjectWrapper, env, 0, "", {"--gpus", "GPU-e2e-0", "--cdi-spec-dirs", cdi});
  ASSERT_NE(a, nullptr);
  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}};
  CreateActor("g", spec);
  ASSERT_TRUE(WaitStatus("g", "STATUS_RUNNING", 30s));
  Patch("g", {{"desiredState", "Suspended"}});
  json x;
  ASSERT_TRUE(WaitActor("g", [](const json& y) { return CondIs(y, "CudaCheckpointReady", "False"); }, 30s,
                        "CudaCheckpointReady=False", &x));
  EXPECT_EQ(CondReason(x, "CudaCheckpointReady"), "RuntimeLacksCudaCheckpoint");
  EXPECT_EQ(StatusOf(x), "STATUS_RUNNING");
  const long c = WaitCounter(*a, "g", 1);
  WaitCounter(*a, "g", c + 3);
  ExpectHeldBy(a->node, "g", GetActor("g"));
  EXPECT_THAT(InjectCalls("checkpoint", "g"), ::testing::IsEmpty());
}

// A GPU sandbox killed just before its suspend: the preflight's exec finds it gone, and the
// actor is cleaned there (before any liveness check could) — FAILED with SandboxDied.
TEST_F(NodeAgentTest, PreflightOnDeadSandbox) {
  const std::string cdi = WriteCdiSpecs(/*with_private_dir=*/true);
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("pass"), 0, "",
                        {"--gpus", "GPU-e2e-0", "--cdi-spec-dirs", cdi});
  ASSERT_NE(a, nullptr);
  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}};
  CreateActor("p", spec);
  ASSERT_TRUE(WaitStatus("p", "STATUS_RUNNING", 30s));
  WaitCounter(*a, "p", 3);
  KillSandbox(RunDir(*a, "p"));
  Patch("p", {{"desiredState", "Suspended"}});
  json x;
  ASSERT_TRUE(WaitStatus("p", "STATUS_FAILED", 30s, &x));
  EXPECT_EQ(CondReason(x, "Ready"), "SandboxDied");
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("gone before the checkpoint"));
  EXPECT_THAT(InjectCalls("checkpoint", "p"), ::testing::IsEmpty());
  EXPECT_FALSE(fs::exists(RunDir(*a, "p")));
  ExpectAllWorkersFree(a->node);
}

// An agent that died between the restore and the RUNNING write left RESUMING over a sandbox
// that runs: the next agent adopts it as RUNNING without starting it again.
TEST_F(NodeAgentTest, ResumingWithSandboxRunning) {
  Agent* first = StartAgent(Node("a"), kInjectWrapper, InjectEnv("pass"));
  ASSERT_NE(first, nullptr);
  CreateActor("r", CounterSpec(first->node));
  ASSERT_TRUE(WaitStatus("r", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*first, "r", 5);
  first->proc->Kill(SIGKILL);
  ASSERT_TRUE(first->proc->Wait(10s).has_value());
  // With no agent, only the sandbox's own processes mention its root.
  std::vector<long> sandbox;
  for (const std::string& p : ProcessesMentioning(RunDir(*first, "r"))) sandbox.push_back(std::stol(p));
  ASSERT_FALSE(sandbox.empty());
  auto r = Kubectl({"patch", "actor", "r", "-n", ns_, "--subresource=status", "--type=merge", "-p",
                    R"({"status":{"status":"STATUS_RESUMING","transitionStartTime":"2026-01-01T00:00:00Z"}})"});
  ASSERT_TRUE(r.success()) << r.err;

  Agent* second = StartAgent(Node("a"), kInjectWrapper, InjectEnv("pass"));
  ASSERT_NE(second, nullptr);
  json x;
  ASSERT_TRUE(WaitStatus("r", "STATUS_RUNNING", 30s, &x));
  EXPECT_EQ(CondReason(x, "Progressing"), "Resumed");
  EXPECT_THAT(CondMessage(x, "Progressing"), HasSubstr("recovered after an agent restart"));
  EXPECT_FALSE(StatusField(x, "transitionStartTime").is_string());
  ExpectHeldBy(second->node, "r", x);
  // The same sandbox counts on: never deleted and started again.
  for (long pid : sandbox) EXPECT_TRUE(ProcessAlive(pid)) << pid;
  EXPECT_GE(Counter(*second, "r"), before);
  EXPECT_THAT(InjectCalls("restore", "r"), ::testing::IsEmpty());
}

}  // namespace
}  // namespace stasis::testing
