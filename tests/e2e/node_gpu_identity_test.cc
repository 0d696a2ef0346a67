// `stasis node --gpus=auto` end to end, on a machine without a GPU: the GPUs come from NVML (the
// test stand-in for libnvidia-ml.so.1, tests/support/fake_libnvidia_ml.c, loaded through
// --nvml-library), their identities reach the Workers' spec.gpu and every CUDA checkpoint's
// manifest and status, and a restore onto a GPU of another driver is refused before runsc is
// asked. The devices themselves come from the CDI specs the fixture writes (node_gpu_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/control_plane.h"
#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kFakeNvml = std::string(STASIS_BINARY_DIR) + "/tests/fake-libnvidia-ml/libnvidia-ml.so.1";

class GpuIdentityTest : public NodeAgentTest {
 protected:
  // An agent whose NVML lists the two GPUs the CDI specs know, as H200s under `driver`.
  Agent* StartGpuAgent(const std::string& driver) {
    std::vector<std::string> env = InjectEnv("pass");
    env.push_back("FAKE_NVML_GPUS=GPU-e2e-0=NVIDIA H200;GPU-e2e-1=NVIDIA H200");
    env.push_back("FAKE_NVML_DRIVER=" + driver);
    env.push_back("FAKE_NVML_CUDA=13000");
    return StartAgent(Node("a"), kInjectWrapper, env, 0, "",
                      {"--gpus", "auto", "--nvml-library", kFakeNvml, "--cdi-spec-dirs", cdi_});
  }
  json WorkerGpu(const std::string& node, const std::string& name) {
    for (const auto& w : Workers(node)) {
      if (w["metadata"]["name"] == name) return w["spec"].value("gpu", json());
    }
    return json();
  }
  std::string cdi_;
};

TEST_F(GpuIdentityTest, ACudaSnapshotRecordsItsGpuAndIsNotRestoredUnderAnotherDriver) {
  cdi_ = WriteCdiSpecs(/*with_private_dir=*/true);
  Agent* a = StartGpuAgent("580.95.05");
  ASSERT_NE(a, nullptr);
  const json h200 = {{"model", "NVIDIA H200"}, {"driverVersion", "580.95.05"}, {"cudaVersion", "13.0"}};
  EXPECT_EQ(WorkerGpu(a->node, a->node + "-gpu0"), h200);
  EXPECT_EQ(WorkerGpu(a->node, a->node + "-gpu1"), h200);

  json spec = CounterSpec(a->node);
  spec["gpu"] = {{"count", 1}, {"cudaCheckpointPath", "/opt/cuda/cuda-checkpoint"}};
  CreateActor("g", spec);
  json actor;
  ASSERT_TRUE(WaitStatus("g", "STATUS_RUNNING", 30s, &actor));
  Patch("g", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("g", "STATUS_PAUSED", 60s, &actor));
  const json snap = StatusField(actor, "latestSnapshot");
  EXPECT_EQ(snap.value("cudaCheckpointed", false), true) << actor["status"].dump(2);
  EXPECT_EQ(snap.value("gpu", json()), h200);
  // The same GPU: restored.
  Patch("g", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("g", "STATUS_RUNNING", 60s, &actor));
  ASSERT_EQ(InjectCalls("restore", "g").size(), 1u);
  Patch("g", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("g", "STATUS_PAUSED", 60s, &actor));
  const std::string paused = StatusField(actor, "latestSnapshot").value("id", "");

  // The node's driver is upgraded: the agent starts again, and its workers say so.
  a->proc->Kill(SIGTERM);
  ASSERT_TRUE(a->proc->Wait(30s).has_value());
  Agent* upgraded = StartGpuAgent("590.10.01");
  ASSERT_NE(upgraded, nullptr);
  EXPECT_EQ(WorkerGpu(upgraded->node, upgraded->node + "-gpu0").value("driverVersion", ""), "590.10.01");
  Patch("g", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("g", "STATUS_FAILED", 60s, &actor));
  EXPECT_EQ(CondReason(actor, "Ready"), "SnapshotGpuMismatch") << actor["status"].dump(2);
  EXPECT_THAT(CondMessage(actor, "Ready"),
              HasSubstr("taken on NVIDIA H200, driver 580.95.05; this GPU is NVIDIA H200, driver 590.10.01"));
  EXPECT_EQ(StatusField(actor, "latestSnapshot").value("id", ""), paused) << "the snapshot is kept";
  EXPECT_EQ(InjectCalls("restore", "g").size(), 1u) << "runsc was asked to restore onto the other driver";
  ExpectAllWorkersFree(upgraded->node);
}

// No GPU from any source: the agent refuses to start, saying where it looked, rather than run
// with CPU workers on a node an operator declared a GPU node.
TEST_F(GpuIdentityTest, NoGpuFoundRefusesToStart) {
  auto r = RunCommand({kStasis, "node", "--kubeconfig", ControlPlane::Get().kubeconfig(), "--node-name", Node("a"),
                       "--root", (work_.path() / "root-none").string(), "--gpus", "auto", "--nvml-library",
                       "/nonexistent/libnvidia-ml.so.1", "--gpu-proc-dir", "/nonexistent/proc"},
                      60s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->err, HasSubstr("cannot load /nonexistent/libnvidia-ml.so.1"));
  EXPECT_THAT(r->err, HasSubstr("no GPU under /nonexistent/proc/gpus"));
  EXPECT_TRUE(Workers(Node("a")).empty()) << "workers registered without a GPU";
}

}  // namespace
}  // namespace stasis::testing
