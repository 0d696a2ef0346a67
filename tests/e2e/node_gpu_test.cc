// `stasis node` end to end, GPU actors on a machine without a GPU: GPU workers and their devices
// come from CDI specs written by the test (each GPU device only sets an environment variable
// naming it), the cuda-checkpoint helper from the project's own spec. The preflight of the helper,
// the CDI edits, multi-GPU workers, and the wait for specs that are not there yet. The fixture is
// tests/support/node_agent_fixture.h; the real GPU run is hack/gpu-e2e.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// 6. A GPU actor whose cuda-checkpoint binary cannot run in its container (the helper is
// mounted by CDI, but an outdated spec leaves out its private directory, so its loader is
// missing): the preflight fails, the actor keeps running with CudaCheckpointReady=False naming
// the path and the missing directory, and no checkpoint is attempted.
TEST_F(NodeAgentTest, GpuPreflightFailureKeepsRunning) {
  const std::string cdi = WriteCdiSpecs(/*with_private_dir=*/false);
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("pass"), 0, "",
                        {"--gpus", "GPU-e2e-0", "--cdi-spec-dirs", cdi});
  ASSERT_NE(a, nullptr);
  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}, {"cudaCheckpointPath", "/usr/local/bin/cuda-checkpoint"}};
  CreateActor("gpu", spec);
  json actor;
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 30s, &actor));
  Patch("gpu", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitActor("gpu", [](const json& x) { return CondIs(x, "CudaCheckpointReady", "False"); }, 30s,
                        "CudaCheckpointReady=False", &actor));
  EXPECT_EQ(StatusOf(actor), "STATUS_RUNNING");
  EXPECT_THAT(CondMessage(actor, "CudaCheckpointReady"), HasSubstr("/usr/local/bin/cuda-checkpoint"));
  EXPECT_THAT(CondMessage(actor, "CudaCheckpointReady"),
              HasSubstr("private directory /opt/stasis/cuda-checkpoint is not in the container"));
  EXPECT_EQ(CondReason(actor, "CudaCheckpointReady"), "CudaCheckpointMissing");
  const long c = WaitCounter(*a, "gpu", 1);
  WaitCounter(*a, "gpu", c + 5);
  actor = GetActor("gpu");
  EXPECT_EQ(StatusOf(actor), "STATUS_RUNNING");
  ExpectHeldBy(a->node, "gpu", actor);
  EXPECT_THAT(InjectCalls("checkpoint", "gpu"), ::testing::IsEmpty()) << "checkpointed despite the failed preflight";
}

// 6b. A GPU actor on a GPU worker gets its devices from the node's CDI specs: the claimed
// GPU's edits (here an environment variable naming it) and the project's cuda-checkpoint helper
// spec, the helper mounted read-only at the actor's own spec.gpu.cudaCheckpointPath beside its
// private directory (the busybox root has no C library: the helper runs on its own); its checkpoint carries
// -cuda-checkpoint-path and its restore uses the same derived bundle. Pause and resume go
// through the same state machine as a CPU actor. (No GPU here, so no NVIDIA device node in the
// specs: runsc turns nvproxy on by itself for a spec that lists /dev/nvidiactl. The real GPU
// run is hack/gpu-e2e.sh, docs/gpu-e2e-results.md.)
TEST_F(NodeAgentTest, GpuActorGetsItsDevicesFromCdi) {
  const std::string cdi = WriteCdiSpecs(/*with_private_dir=*/true);
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("pass"), 0, "",
                        {"--gpus", "GPU-e2e-0,GPU-e2e-1", "--cdi-spec-dirs", cdi});
  ASSERT_NE(a, nullptr);
  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}, {"cudaCheckpointPath", "/opt/cuda/cuda-checkpoint"}};
  CreateActor("gpu", spec);
  json actor;
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 30s, &actor));
  ExpectHeldBy(a->node, "gpu", actor);
  const std::string worker = StatusField(actor, "workerName").get<std::string>();
  const std::string uuid = worker == a->node + "-gpu0" ? "GPU-e2e-0" : "GPU-e2e-1";
  auto exec = [&](const std::vector<std::string>& argv) {
    std::vector<std::string> full = {PinnedRunsc(), "-root", RunDir(*a, "gpu"), "exec", Id("gpu")};
    full.insert(full.end(), argv.begin(), argv.end());
    return RunCommand(full, 30s);
  };
  auto env = exec({"/bin/sh", "-c", "echo $STASIS_E2E_GPU"});
  ASSERT_TRUE(env.ok() && env->success()) << (env.ok() ? env->Summary() : env.status().ToString());
  EXPECT_EQ(env->out, uuid + "\n") << "the claimed worker's GPU is the one whose CDI edits were applied";
  auto help = exec({"/opt/cuda/cuda-checkpoint", "--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_EQ(help->exit_code, 0) << help->err;
  EXPECT_THAT(help->out + help->err, HasSubstr("--toggle"));

  Patch("gpu", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_PAUSED", 60s, &actor));
  EXPECT_TRUE(CondIs(actor, "CudaCheckpointReady", "True")) << actor["status"].dump(2);
  ExpectAllWorkersFree(a->node);
  // A stopped GPU sandbox may hold its device until it is torn down: deleted after the PAUSED
  // write, but before the worker goes back.
  const auto steps = StepsAfterCheckpointInLog(*a, "gpu");
  ASSERT_NE(steps.deleted, std::string::npos) << AgentLogs();
  ASSERT_NE(steps.freed, std::string::npos) << AgentLogs();
  EXPECT_EQ(steps.freed_worker, worker);
  EXPECT_LT(steps.deleted, steps.freed) << "the GPU sandbox was deleted after its worker was given back\n" << AgentLogs();
  // ... and after the PAUSED write: the teardown (~1 s on an H200) is off the pause's path.
  ASSERT_NE(steps.written, std::string::npos) << AgentLogs();
  EXPECT_LT(steps.written, steps.deleted) << "the GPU sandbox was deleted before the PAUSED write\n" << AgentLogs();
  auto checkpoints = InjectCalls("checkpoint", "gpu");
  ASSERT_EQ(checkpoints.size(), 1u) << ReadFile(InjectLog());
  EXPECT_THAT(checkpoints[0], HasSubstr("-cuda-checkpoint-path /opt/cuda/cuda-checkpoint "));

  EXPECT_TRUE(StatusField(actor, "latestSnapshot").is_object()) << actor["status"].dump(2);
  Patch("gpu", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 60s, &actor));
  auto restores = InjectCalls("restore", "gpu");
  ASSERT_EQ(restores.size(), 1u) << ReadFile(InjectLog());
  EXPECT_THAT(restores[0], HasSubstr(a->root + "/gpu-bundles/" + Id("gpu")));
  const long c = WaitCounter(*a, "gpu", 1);
  WaitCounter(*a, "gpu", c + 3);

  // One worker is one GPU: an actor asking for two fails, saying so, and holds nothing.
  json two = CounterSpec(a->node);
  two["gpu"] = {{"count", 2}};
  CreateActor("two", two);
  json failed;
  ASSERT_TRUE(WaitStatus("two", "STATUS_FAILED", 30s, &failed));
  EXPECT_EQ(CondReason(failed, "Ready"), "GpuCountUnavailable") << failed["status"].dump(2);
  EXPECT_THAT(CondMessage(failed, "Ready"), HasSubstr("asks for 2 GPU(s)"));
  ExpectHeldBy(a->node, "gpu", GetActor("gpu"));
}

// 6c'. A restore of a CUDA snapshot ends after `runsc restore` returned (on a GPU, the CUDA
// toggle back runs then): the actor is RUNNING with Ready=False Restoring until the real
// `runsc wait -restore` returns, held here by the wrapper as a slow toggle would hold it, and
// Ready=True RestoreComplete after; the time until usable is its own histogram.
TEST_F(NodeAgentTest, AGpuActorIsReadyOnlyOnceItsRestoreHasFinished) {
  const std::string cdi = WriteCdiSpecs(/*with_private_dir=*/true);
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-wait-restore"), 0, "",
                        {"--gpus", "GPU-e2e-0", "--cdi-spec-dirs", cdi});
  ASSERT_NE(a, nullptr);
  Arm("gpu");
  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}, {"cudaCheckpointPath", "/opt/cuda/cuda-checkpoint"}};
  CreateActor("gpu", spec);
  json actor;
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 30s, &actor));
  EXPECT_TRUE(CondIs(actor, "Ready", "True"));
  EXPECT_EQ(CondReason(actor, "Restored"), "") << "a booted sandbox restored nothing";
  Patch("gpu", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_PAUSED", 60s, &actor));
  ASSERT_TRUE(StatusField(actor, "latestSnapshot").value("cudaCheckpointed", false)) << actor["status"].dump(2);

  Patch("gpu", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 60s, &actor));
  EXPECT_TRUE(CondIs(actor, "Ready", "False")) << actor["status"].dump(2);
  EXPECT_EQ(CondReason(actor, "Ready"), "Restoring");
  EXPECT_TRUE(CondIs(actor, "Restored", "False"));
  EXPECT_EQ(CondReason(actor, "Restored"), "Restoring");
  ASSERT_TRUE(WaitActor("gpu", [&](const json&) { return InjectCalls("wait-restore", "gpu").size() == 1; }, 30s,
                        "the agent asks runsc to wait for the restore"));
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(CondReason(GetActor("gpu"), "Ready"), "Restoring") << "Ready before the restore finished";
  std::ofstream(ReleaseFile()) << "go";
  ASSERT_TRUE(WaitActor("gpu", [](const json& x) { return CondIs(x, "Ready", "True"); }, 30s, "Ready=True", &actor));
  EXPECT_EQ(StatusOf(actor), "STATUS_RUNNING");
  EXPECT_TRUE(CondIs(actor, "Restored", "True"));
  EXPECT_EQ(CondReason(actor, "Restored"), "RestoreComplete");
  EXPECT_THAT(InjectCalls("wait-restore", "gpu")[0], HasSubstr(" wait -restore " + Id("gpu")));
  const std::string metrics = ScrapeMetrics(a->proc->Log());
  EXPECT_EQ(MetricValue(metrics, "stasis_snapshot_duration_seconds_count{gpu=\"true\",operation=\"restore_usable\","
                                 "result=\"success\",trigger=\"Pause\"}"), 1) << metrics;
  const long c = WaitCounter(*a, "gpu", 1);
  WaitCounter(*a, "gpu", c + 3);
}

// 6d. GPU identities are the node's own: a Worker whose spec.devices were rewritten in the API
// after registration (another GPU listed first) hands the sandbox only the GPU this node
// discovered for that worker.
TEST_F(NodeAgentTest, ForgedWorkerDevicesNeverReachTheSandbox) {
  const std::string cdi = WriteCdiSpecs(/*with_private_dir=*/true);
  Agent* a = StartAgent(Node("f"), kInjectWrapper, InjectEnv("pass"), 0, "",
                        {"--gpus", "GPU-e2e-0", "--cdi-spec-dirs", cdi});
  ASSERT_NE(a, nullptr);
  const std::string worker = a->node + "-gpu0";
  CommandResult forged = Kubectl({"patch", "worker", worker, "--type=merge", "-p",
                                  R"({"spec":{"devices":["GPU-e2e-1","GPU-e2e-0"]}})"});
  ASSERT_EQ(forged.exit_code, 0) << forged.err;
  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}};
  CreateActor("gpu", spec);
  json actor;
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 30s, &actor)) << AgentLogs();
  auto env = RunCommand({PinnedRunsc(), "-root", RunDir(*a, "gpu"), "exec", Id("gpu"), "/bin/sh", "-c",
                         "echo $STASIS_E2E_GPU"},
                        30s);
  ASSERT_TRUE(env.ok() && env->success()) << (env.ok() ? env->Summary() : env.status().ToString());
  EXPECT_EQ(env->out, "GPU-e2e-0\n") << "a GPU from the forged Worker reached the sandbox";
}

// 6c. A GPU node whose CDI specs are missing: the GPU actor does not start, says why
// (CdiUnavailable, naming the device), holds no worker, and retries with backoff — not in a
// loop that claims and frees the worker as fast as the agent can go. Once the specs are
// installed it starts without anyone touching the actor.
TEST_F(NodeAgentTest, GpuActorWaitsForCdiSpecsWithBackoff) {
  const fs::path empty = work_.path() / "cdi-later";
  fs::create_directories(empty);
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 0, "",
                        {"--gpus", "GPU-e2e-0", "--cdi-spec-dirs", empty.string()});
  ASSERT_NE(a, nullptr);
  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}, {"cudaCheckpointPath", "/opt/cuda/cuda-checkpoint"}};
  CreateActor("gpu", spec);
  json actor;
  ASSERT_TRUE(WaitActor("gpu", [](const json& x) { return CondReason(x, "Ready") == "CdiUnavailable"; },
                        30s, "Ready=False/CdiUnavailable", &actor));
  EXPECT_THAT(CondMessage(actor, "Ready"), HasSubstr("nvidia.com/gpu"));
  const auto first = Clock::now();
  std::this_thread::sleep_for(5s);
  ExpectAllWorkersFree(a->node);
  EXPECT_NE(StatusOf(GetActor("gpu")), "STATUS_RUNNING");
  const std::string log = a->proc->Log();
  size_t attempts = 0;
  for (size_t at = log.find("resume failed actor=" + ns_ + "/gpu"); at != std::string::npos;
       at = log.find("resume failed actor=" + ns_ + "/gpu", at + 1)) {
    ++attempts;
  }
  const double window = std::chrono::duration<double>(Clock::now() - first).count();
  // Backing off from 1 s and doubling: at most 1 + log2(window + 1) + 1 attempts.
  EXPECT_GE(attempts, 2u);
  EXPECT_LE(attempts, 5u) << attempts << " resume attempts in about " << window << " s";

  fs::copy(WriteCdiSpecs(/*with_private_dir=*/true), empty,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 40s, &actor));
  ExpectHeldBy(a->node, "gpu", actor);
}

// 6e. Multi-GPU actors: `--gpus-per-worker 2` makes one worker of two GPUs, an actor of
// spec.gpu.count 2 claims it whole and gets both GPUs' CDI edits, and is paused and resumed on
// both; while it holds them, a one-GPU actor finds no free worker.
TEST_F(NodeAgentTest, ATwoGpuActorHoldsBothGpusOfItsWorker) {
  const std::string cdi = WriteCdiSpecs(/*with_private_dir=*/true);
  Agent* a = StartAgent(Node("a"), kInjectWrapper, InjectEnv("pass"), 0, "",
                        {"--gpus", "GPU-e2e-0,GPU-e2e-1", "--gpus-per-worker", "2", "--cdi-spec-dirs", cdi});
  ASSERT_NE(a, nullptr);
  const auto workers = Workers(a->node);
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0]["spec"]["devices"], json({"GPU-e2e-0", "GPU-e2e-1"}));

  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 2}, {"cudaCheckpointPath", "/opt/cuda/cuda-checkpoint"}};
  CreateActor("two", spec);
  json actor;
  ASSERT_TRUE(WaitStatus("two", "STATUS_RUNNING", 30s, &actor));
  ExpectHeldBy(a->node, "two", actor);
  const std::string both = "echo $STASIS_E2E_HAS_GPU_0 $STASIS_E2E_HAS_GPU_1";
  EXPECT_EQ(InSandbox(*a, "two", {"/bin/sh", "-c", both}), "yes yes") << "the actor did not get both GPUs";

  // Its only worker is held: a one-GPU actor waits for it.
  json one = CounterSpec(a->node);
  one["gpu"] = {{"count", 1}};
  CreateActor("one", one);
  ASSERT_TRUE(WaitActor("one", [](const json& x) { return CondReason(x, "Ready") == "NoFreeWorker"; }, 30s,
                        "Ready=False NoFreeWorker"));

  Patch("two", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("two", "STATUS_PAUSED", 60s, &actor));
  EXPECT_TRUE(StatusField(actor, "latestSnapshot").value("cudaCheckpointed", false)) << actor["status"].dump(2);
  auto checkpoints = InjectCalls("checkpoint", "two");
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_THAT(checkpoints[0], HasSubstr("-cuda-checkpoint-path /opt/cuda/cuda-checkpoint "));
  // Paused, it gave the worker back: the one-GPU actor runs on it, then pauses to give it back.
  ASSERT_TRUE(WaitStatus("one", "STATUS_RUNNING", 30s));
  Patch("one", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("one", "STATUS_PAUSED", 60s));

  Patch("two", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("two", "STATUS_RUNNING", 60s, &actor));
  EXPECT_EQ(InjectCalls("restore", "two").size(), 1u);
  EXPECT_EQ(InSandbox(*a, "two", {"/bin/sh", "-c", both}), "yes yes") << "restored without both GPUs";
  const long c = WaitCounter(*a, "two", 1);
  WaitCounter(*a, "two", c + 3);
}

}  // namespace
}  // namespace stasis::testing
