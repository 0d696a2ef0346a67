// The one-node cluster of hack/cluster.sh with stasis deployed on it from the image hack/image.sh
// built (hack/test.sh builds it before the tests), by `kubectl apply -k manifests/overlays/local`:
// the fixture of the `cluster` tests. A test binary brings the cluster up once for its tests and
// takes it down after them, checking that `down` left nothing behind. Everything is driven with
// kubectl; nothing runs on the host but the cluster (and, for the tests that scrape it, a
// Prometheus).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {

inline const std::string kClusterNode = "stasis-node";
inline const std::string kClusterWorker = "stasis-node-slot0";
inline const std::string kClusterNamespace = "stasis-cluster-test";
// The API server's address on the node (hack/cluster-config.sh), where the host reaches it.
inline const std::string kClusterApiServer = "https://172.31.255.1:16443";

bool Eventually(const std::function<bool()>& pred, std::chrono::seconds deadline);

// Its helpers are public: the free functions of a test file use them too.
class ClusterTest : public ::testing::Test {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void TearDown() override;

  // What `down` must not leave: a process or mount of the cluster's directory, a sandbox of the
  // cluster's agent (under its hostPath state, /var/lib/stasis) or its stasis-sandboxes cgroup,
  // the pods' bridge, the node's address, a chain of the kubelet, kube-proxy or the CNI plugins.
  static std::vector<std::string> Leftovers();

  // The archive of the image hack/image.sh built into `dir` (build-image/image by default).
  static std::filesystem::path ImageArchive(const std::string& dir = "image");
  // The cluster's directory: admin.kubeconfig, pki/ (ca.crt, admin.crt, admin.key).
  static std::filesystem::path ClusterDir() { return dir_->path(); }

  static CommandResult Hack(std::vector<std::string> argv, std::chrono::seconds deadline);
  static CommandResult Kubectl(std::vector<std::string> args, std::chrono::seconds deadline = std::chrono::seconds(60));
  // `kubectl get WHAT -o jsonpath=…` in `ns`, or "" when it fails.
  static std::string Get(const std::string& what, const std::string& jsonpath, const std::string& ns = kClusterNamespace);
  static std::string StatusOf(const std::string& actor) { return Get("actor/" + actor, "{.status.status}"); }

  // Creates or updates a counter actor (the bundle this fixture makes) with `desired`.
  static void SetActor(const std::string& name, const std::string& desired);
  static bool Reaches(const std::string& actor, const std::string& status,
                      std::chrono::seconds deadline = std::chrono::seconds(120));
  // Every actor of the test's namespace Suspended, so that the node's one worker is free.
  static void SuspendAll();

  // The agent's DaemonSet rolled out, its one pod Ready.
  static bool AgentReady(std::chrono::seconds deadline);
  // The agent's pod that is not being deleted, or "".
  static std::string AgentPod();
  // A controller pod that is Running, Ready and not being deleted, waited for up to `deadline`
  // (the Deployment replaces pods the cluster takes away); "" when none comes.
  static std::string ControllerPod(std::chrono::seconds deadline);
  // What the cluster says of its node, pods and recent events: printed when a test fails, and
  // when a test finds the cluster took pods away under it.
  static std::string Diagnostics();
  // The host PID of the actor's sandbox (runsc state, through the agent's pod), or -1.
  static long SandboxPid(const std::string& actor);
  // The actor's counter, read inside its sandbox through the agent's pod, or -1.
  static long Counter(const std::string& actor);
  // Runs `argv` in the agent's container (`kubectl exec`); a failed result when it cannot.
  static CommandResult InAgent(const std::vector<std::string>& argv, std::chrono::seconds deadline = std::chrono::seconds(60));

  // A Prometheus on the host (hack/build-prometheus.sh's, with Kubernetes discovery) that finds
  // both roles through `kubernetes_sd_configs` against this cluster's API server, by the shipped
  // ServiceMonitors translated as the Prometheus Operator does (ScrapeConfigsFor), every
  // `kScrapeSeconds` s, over HTTPS with the token of a ServiceAccount bound to the shipped
  // ClusterRole stasis-metrics-reader; the shipped rules loaded. nullptr (and a failure) when it
  // cannot start.
  static constexpr int kScrapeSeconds = 2;
  static std::unique_ptr<PrometheusServer> StartPrometheus();
  // `up` of a job's targets that answered (1) at the last scrape.
  static nlohmann::json UpTargets(const PrometheusServer& prom, const std::string& job);

 private:
  static CommandResult Run(const std::vector<std::string>& argv, std::chrono::seconds deadline);
  static inline TempDir* dir_ = nullptr;
};

}  // namespace stasis::testing
