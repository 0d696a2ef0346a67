// stasis deployed on a real one-node Kubernetes cluster (hack/cluster.sh: kubelet, containerd,
// runc, kube-proxy, the scheduler and the controller manager), from the image hack/image.sh
// built (hack/test.sh builds it before the tests), by `kubectl apply -k manifests/overlays/local`.
// Everything is driven with kubectl; nothing runs on the host but the cluster.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const fs::path kSource = STASIS_SOURCE_DIR;
const std::string kNode = "stasis-node";
const std::string kWorker = "stasis-node-slot0";
const std::string kNamespace = "stasis-cluster-test";
// Under the DaemonSet's bundle root (its hostPath), where the agent may read bundles from.
const fs::path kBundle = "/var/lib/stasis/bundles/stasis-cluster-test-counter";

bool Eventually(const std::function<bool()>& pred, std::chrono::seconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(500ms);
  }
  return pred();
}

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("stasis-test-cluster-");
    auto up = Hack({"cluster.sh", "up"}, 900s);
    ASSERT_TRUE(up.success()) << up.Summary() << "\n" << up.err;
    ASSERT_TRUE(Hack({"cluster.sh", "import", ImageArchive().string(), "docker.io/library/stasis:0.1.0"}, 300s)
                    .success());
    ASSERT_TRUE(Kubectl({"label", "node", kNode, "stasis.dev/agent=cpu"}).success());
    auto apply = Kubectl({"apply", "-k", (kSource / "manifests/overlays/local").string()});
    ASSERT_TRUE(apply.success()) << apply.err;
    auto r = Kubectl({"-n", "stasis-system", "rollout", "status", "deployment/stasis-controller", "--timeout=240s"}, 300s);
    ASSERT_TRUE(r.success()) << r.out << r.err;
    ASSERT_TRUE(AgentReady(240s));
    ASSERT_TRUE(Hack({"make-bundle.sh", kBundle.string()}, 120s).success());
    ASSERT_TRUE(Kubectl({"create", "namespace", kNamespace}).success());
  }

  static void TearDownTestSuite() {
    // Actors first, while their agent still runs to release them; then the cluster.
    (void)Kubectl({"-n", kNamespace, "delete", "actors", "--all", "--timeout=120s"}, 150s);
    auto down = Hack({"cluster.sh", "down"}, 300s);
    EXPECT_TRUE(down.success()) << down.Summary() << "\n" << down.err;
    for (const auto& left : Leftovers()) ADD_FAILURE() << "left after hack/cluster.sh down: " << left;
    std::error_code ec;
    fs::remove_all(kBundle, ec);
    delete dir_;
  }

  // What `down` must not leave: a process or mount of the cluster's directory, a sandbox of the
  // cluster's agent (under its hostPath state, /var/lib/stasis) or its stasis-sandboxes cgroup,
  // the pods' bridge, the node's address, a chain of the kubelet, kube-proxy or the CNI plugins.
  static std::vector<std::string> Leftovers() {
    std::vector<std::string> out;
    const std::string dir = dir_->path().string();
    auto lines = [](const std::vector<std::string>& argv) {
      auto r = RunCommand(argv, 30s);
      return r.ok() ? r->out : std::string("(" + argv[0] + " failed)");
    };
    for (const auto& [what, text, needle] :
         {std::tuple{"process", lines({"pgrep", "-a", "-f", dir}), dir},
          {"sandbox", lines({"pgrep", "-a", "-f", "--", "--root=/var/lib/stasis/run/"}), std::string("--root=")},
          {"mount", lines({"cat", "/proc/mounts"}), dir},
          {"network device", lines({"ip", "-o", "link"}), std::string("stasis-cni0")},
          {"address", lines({"ip", "-o", "addr", "show", "dev", "lo"}), std::string("172.31.255.1")},
          {"iptables chain", lines({"iptables-save"}), std::string(":KUBE-")},
          {"iptables chain", lines({"iptables-save"}), std::string(":CNI-")}}) {
      if (text.find(needle) != std::string::npos) out.push_back(std::string(what) + ": " + text);
    }
    std::error_code ec;
    for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
      if (fs::exists(h.path() / "stasis-sandboxes")) out.push_back("cgroup: " + (h.path() / "stasis-sandboxes").string());
    }
    return out;
  }

  static fs::path ImageArchive() {
    for (const auto& e : fs::directory_iterator(kSource / "build-image" / "image")) {
      if (e.path().filename().string().ends_with(".oci.tar")) return e.path();
    }
    ADD_FAILURE() << "no image archive in build-image/image: build it with hack/image.sh";
    return {};
  }

  static CommandResult Run(const std::vector<std::string>& argv, std::chrono::seconds deadline) {
    CommandOptions o;
    o.extra_env = {"STASIS_CLUSTER_DIR=" + dir_->path().string()};
    auto r = RunCommand(argv, deadline, o);
    if (r.ok()) return *r;
    CommandResult failed;
    failed.err = r.status().ToString();
    return failed;
  }
  static CommandResult Hack(std::vector<std::string> argv, std::chrono::seconds deadline) {
    argv[0] = (kSource / "hack" / argv[0]).string();
    return Run(argv, deadline);
  }
  static CommandResult Kubectl(std::vector<std::string> args, std::chrono::seconds deadline = 60s) {
    args.insert(args.begin(), {"kubectl", "--kubeconfig", (dir_->path() / "admin.kubeconfig").string()});
    return Run(args, deadline);
  }

  static std::string Get(const std::string& what, const std::string& jsonpath, const std::string& ns = kNamespace) {
    auto r = Kubectl({"-n", ns, "get", what, "-o", "jsonpath=" + jsonpath});
    return r.success() ? r.out : "";
  }
  static std::string StatusOf(const std::string& actor) { return Get("actor/" + actor, "{.status.status}"); }

  static void SetActor(const std::string& name, const std::string& desired) {
    const json actor = {{"apiVersion", "stasis.dev/v1alpha1"},
                        {"kind", "Actor"},
                        {"metadata", {{"name", name}, {"namespace", kNamespace}}},
                        {"spec",
                         {{"runtime", "gvisor"},
                          {"bundle", kBundle.string()},
                          {"desiredState", desired},
                          {"snapshots", {{"onPause", "Full"}, {"onCommit", "Full"}}}}}};
    CommandOptions o;
    o.stdin_data = actor.dump();
    auto r = RunCommand({"kubectl", "--kubeconfig", (dir_->path() / "admin.kubeconfig").string(), "apply", "-f", "-"},
                        60s, o);
    ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.status().ToString());
  }
  static bool Reaches(const std::string& actor, const std::string& status, std::chrono::seconds deadline = 120s) {
    return Eventually([&] { return StatusOf(actor) == status; }, deadline);
  }

  // The agent's DaemonSet rolled out, its one pod Ready.
  static bool AgentReady(std::chrono::seconds deadline) {
    auto r = Kubectl({"-n", "stasis-system", "rollout", "status", "daemonset/stasis-node-cpu",
                      "--timeout=" + std::to_string(deadline.count()) + "s"},
                     deadline + 30s);
    return r.success() && Eventually([] { return Get("daemonset/stasis-node-cpu", "{.status.numberReady}",
                                                     "stasis-system") == "1"; }, 60s);
  }
  // The agent's pod that is not being deleted.
  static std::string AgentPod() {
    auto r = Kubectl({"-n", "stasis-system", "get", "pods", "-l", "app.kubernetes.io/component=node", "-o", "json"});
    if (!r.success()) return "";
    for (const auto& pod : json::parse(r.out, nullptr, false).value("items", json::array())) {
      if (!pod["metadata"].contains("deletionTimestamp")) return pod["metadata"].value("name", "");
    }
    return "";
  }

  // Every actor of the test's namespace at rest (Suspended), so that the node's one worker is free.
  static void SuspendAll() {
    auto r = Kubectl({"-n", kNamespace, "get", "actors", "-o", "jsonpath={.items[*].metadata.name}"});
    ASSERT_TRUE(r.success()) << r.err;
    std::istringstream names(r.out);
    for (std::string n; names >> n;) SetActor(n, "Suspended");
    names.clear();
    names.str(r.out);
    for (std::string n; names >> n;) ASSERT_TRUE(Reaches(n, "STATUS_SUSPENDED")) << n << ": " << StatusOf(n);
  }

  // The host PID of the actor's sandbox (runsc state, through the agent's pod), or -1.
  static long SandboxPid(const std::string& actor) {
    const std::string id = Get("actor/" + actor, "{.status.sandboxID}");
    if (id.empty()) return -1;
    auto r = Kubectl({"-n", "stasis-system", "exec", "daemonset/stasis-node-cpu", "--", "runsc", "-root",
                      "/var/lib/stasis/run/" + id, "state", id});
    if (!r.success()) return -1;
    return json::parse(r.out, nullptr, false).value("pid", -1L);
  }

  // The actor's counter, read inside its sandbox through the agent's pod, or -1.
  static long Counter(const std::string& actor) {
    const std::string id = Get("actor/" + actor, "{.status.sandboxID}");
    if (id.empty()) return -1;
    auto r = Kubectl({"-n", "stasis-system", "exec", "daemonset/stasis-node-cpu", "--", "runsc", "-root",
                      "/var/lib/stasis/run/" + id, "exec", id, "cat", "/tmp/counter"});
    if (!r.success() || r.out.empty()) return -1;
    return std::stol(r.out);
  }

  static inline TempDir* dir_ = nullptr;
};

// The README's demo story through the deployed pods: A runs, suspends (its worker freed), B takes
// the worker, B pauses, A resumes with its counter continued.
TEST_F(ClusterTest, DemoStoryThroughTheDeployedPods) {
  SetActor("a", "Running");
  ASSERT_TRUE(Reaches("a", "STATUS_RUNNING")) << StatusOf("a");
  long before = -1;
  ASSERT_TRUE(Eventually([&] { return (before = Counter("a")) > 0; }, 30s));

  SetActor("a", "Suspended");
  ASSERT_TRUE(Reaches("a", "STATUS_SUSPENDED")) << StatusOf("a");
  EXPECT_FALSE(Get("actor/a", "{.status.latestSnapshot.id}").empty());
  EXPECT_TRUE(Eventually([] { return Get("worker/" + kWorker, "{.status.phase}", "") == "Free"; }, 30s));

  SetActor("b", "Running");
  ASSERT_TRUE(Reaches("b", "STATUS_RUNNING")) << StatusOf("b");
  EXPECT_EQ(Get("actor/b", "{.status.workerName}"), kWorker);
  SetActor("b", "Paused");
  ASSERT_TRUE(Reaches("b", "STATUS_PAUSED")) << StatusOf("b");

  SetActor("a", "Running");
  ASSERT_TRUE(Reaches("a", "STATUS_RUNNING")) << StatusOf("a");
  long after = -1;
  ASSERT_TRUE(Eventually([&] { return (after = Counter("a")) > 0; }, 30s));
  EXPECT_GE(after, before) << "A's counter restarted";
}

// A running actor outlives its agent: the agent's process killed (its container restarted), its
// pod deleted, the DaemonSet rolled out. After each, the new agent adopts the sandbox: the same
// process, the counter continued, the actor RUNNING on its worker.
TEST_F(ClusterTest, RunningActorsOutliveTheirAgent) {
  SuspendAll();
  SetActor("survivor", "Running");
  ASSERT_TRUE(Reaches("survivor", "STATUS_RUNNING")) << StatusOf("survivor");
  const long pid = SandboxPid("survivor");
  ASSERT_GT(pid, 0);
  long counter = -1;
  ASSERT_TRUE(Eventually([&] { return (counter = Counter("survivor")) > 0; }, 30s));

  const std::vector<std::pair<std::string, std::function<void()>>> ends = {
      {"the agent's process killed (kill -9)",
       [] {
         // The container's process is exactly `stasis node` (its flags come from the
         // environment); agents other tests start on this host carry theirs on the command line.
         auto r = RunCommand({"pkill", "-9", "-x", "-f", "stasis node"}, 30s);
         ASSERT_TRUE(r.ok() && r->success()) << "no agent process to kill";
       }},
      {"the agent's pod deleted",
       [] { ASSERT_TRUE(Kubectl({"-n", "stasis-system", "delete", "pod", AgentPod()}, 120s).success()); }},
      {"the DaemonSet rolled out",
       [] {
         ASSERT_TRUE(Kubectl({"-n", "stasis-system", "rollout", "restart", "daemonset/stasis-node-cpu"}).success());
       }},
  };
  for (const auto& [what, end] : ends) {
    SCOPED_TRACE(what);
    const std::string pod = AgentPod();
    end();
    // The old agent gone (a new pod, or the same pod's container restarted), the new one Ready.
    ASSERT_TRUE(Eventually([&] { return AgentPod() != pod || Get("pod/" + pod, "{.status.containerStatuses[0].restartCount}",
                                                                  "stasis-system") != "0"; }, 60s));
    ASSERT_TRUE(AgentReady(180s));
    EXPECT_EQ(StatusOf("survivor"), "STATUS_RUNNING");
    // (Read through the new agent's container, which may still be starting.)
    long now_pid = -1;
    EXPECT_TRUE(Eventually([&] { return (now_pid = SandboxPid("survivor")) > 0; }, 30s));
    EXPECT_EQ(now_pid, pid) << "the sandbox was restarted";
    long now = -1;
    ASSERT_TRUE(Eventually([&] { return (now = Counter("survivor")) > counter; }, 30s)) << now << " after " << counter;
    counter = now;
  }
  EXPECT_EQ(Get("actor/survivor", "{.status.workerName}"), kWorker);
  SetActor("survivor", "Suspended");
  ASSERT_TRUE(Reaches("survivor", "STATUS_SUSPENDED")) << "the adopted sandbox could not be checkpointed";
}

// The roles use the projected service-account token and the cluster's CA (no kubeconfig), the
// controller as the image's non-root user, the agent as root.
TEST_F(ClusterTest, TheRolesUseInClusterCredentialsAsTheirUsers) {
  for (const char* workload : {"deployment/stasis-controller", "daemonset/stasis-node-cpu"}) {
    auto spec = Kubectl({"-n", "stasis-system", "get", workload, "-o", "json"});
    ASSERT_TRUE(spec.success()) << spec.err;
    EXPECT_EQ(spec.out.find("kubeconfig"), std::string::npos) << workload << " names a kubeconfig";
    auto token = Kubectl({"-n", "stasis-system", "exec", workload, "--", "cat",
                          "/var/run/secrets/kubernetes.io/serviceaccount/namespace"});
    EXPECT_EQ(token.out, "stasis-system") << workload << ": " << token.err;
  }
  auto uid = [](const std::string& workload) {
    auto r = Kubectl({"-n", "stasis-system", "exec", workload, "--", "cat", "/proc/1/status"});
    const auto p = r.out.find("Uid:\t");
    return p == std::string::npos ? std::string("?") : r.out.substr(p + 5, r.out.find('\t', p + 5) - p - 5);
  };
  EXPECT_EQ(uid("deployment/stasis-controller"), "65532");
  EXPECT_EQ(uid("daemonset/stasis-node-cpu"), "0");
}

// The leader's pod deleted: the other replica leads within the Lease's timings, and binds
// without double-booking the node's one worker.
TEST_F(ClusterTest, TheOtherReplicaLeadsWhenTheLeadersPodIsDeleted) {
  auto holder = [] { return Get("lease/stasis-controller", "{.spec.holderIdentity}", "stasis-system"); };
  const std::string leader = holder();
  ASSERT_FALSE(leader.empty());
  const std::string pod = leader.substr(0, leader.find('_'));
  ASSERT_TRUE(Kubectl({"-n", "stasis-system", "delete", "pod", pod, "--wait=false"}).success());
  const auto deleted = std::chrono::steady_clock::now();
  std::string next;
  ASSERT_TRUE(Eventually([&] { return (next = holder()) != "" && next.rfind(pod + "_", 0) != 0; }, 90s))
      << "still led by " << holder();
  std::cout << "[ measure  ] leader pod deleted → new leader: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - deleted).count()
            << " s (lease 15 s)\n";

  SuspendAll();
  SetActor("c", "Running");
  SetActor("d", "Running");
  ASSERT_TRUE(Eventually([] { return StatusOf("c") == "STATUS_RUNNING" || StatusOf("d") == "STATUS_RUNNING"; }, 120s));
  std::this_thread::sleep_for(5s);  // time for a double booking to show
  const int running = (StatusOf("c") == "STATUS_RUNNING") + (StatusOf("d") == "STATUS_RUNNING");
  EXPECT_EQ(running, 1) << "one worker, two actors running";
}

}  // namespace
}  // namespace stasis::testing
