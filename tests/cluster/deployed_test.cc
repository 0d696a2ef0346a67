// stasis deployed on a real one-node Kubernetes cluster (tests/support/cluster_fixture.h): the
// README's demo story through the deployed pods, actors that outlive their agent in every status
// the agent can be lost in, in-cluster credentials, and the controller's leader failover.
#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/cluster_fixture.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kNode = kClusterNode;
const std::string kWorker = kClusterWorker;
const std::string kNamespace = kClusterNamespace;

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
  // The store shares the agent's one hostPath mount with the node's snapshots, so the commit
  // hard-links the image (across two mounts it would be copied).
  auto logs = Kubectl({"-n", "stasis-system", "logs", "daemonset/stasis-node-cpu"});
  const std::string commit = "op=commit actor=" + kNamespace + "/a snapshot=" +
                             Get("actor/a", "{.status.latestSnapshot.id}") + " result=ok";
  const auto line = logs.out.find(commit);
  ASSERT_NE(line, std::string::npos) << "no commit of a's snapshot in the agent's log";
  EXPECT_NE(logs.out.substr(line, logs.out.find('\n', line) - line).find("how=linked"), std::string::npos)
      << logs.out.substr(line, logs.out.find('\n', line) - line);
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

// What the agent's directory holds that no actor accounts for: an unfinished snapshot
// (`*.partial`) anywhere under it, and a sandbox root of a sandbox runsc does not know.
std::vector<std::string> AgentLeftovers(const std::vector<std::string>& live_sandboxes) {
  std::vector<std::string> out;
  auto partial = ClusterTest::InAgent({"find", "/var/lib/stasis", "-name", "*.partial"});
  if (!partial.success()) out.push_back("find failed: " + partial.err);
  if (!partial.out.empty()) out.push_back("unfinished snapshots: " + partial.out);
  auto roots = ClusterTest::InAgent({"ls", "/var/lib/stasis/run"});
  std::istringstream ids(roots.out);
  for (std::string id; ids >> id;) {
    if (std::find(live_sandboxes.begin(), live_sandboxes.end(), id) == live_sandboxes.end()) {
      const std::string root = "/var/lib/stasis/run/" + id;
      auto held = ClusterTest::InAgent({"sh", "-c", "find " + root + "; grep " + root + " /proc/mounts"});
      out.push_back("sandbox root of " + id + ":\n" + held.out);
    }
  }
  return out;
}

// A paused actor and a checkpoint in flight when the agent's pod goes. PAUSED stays PAUSED on
// its snapshot and resumes with its counter continued. A suspend whose agent pod is deleted
// mid-checkpoint finishes within the pod's grace period; one whose agent is killed outright
// mid-checkpoint is recovered by the next agent, on the new snapshot if it was complete and
// otherwise on the one the actor had: either way the actor ends SUSPENDED on a snapshot it
// resumes from, and nothing unfinished is left in the agent's directory.
TEST_F(ClusterTest, PausedAndCheckpointingActorsOutliveTheirAgent) {
  SuspendAll();
  SetActor("napper", "Running");
  ASSERT_TRUE(Reaches("napper", "STATUS_RUNNING")) << StatusOf("napper");
  SetActor("napper", "Paused");
  ASSERT_TRUE(Reaches("napper", "STATUS_PAUSED")) << StatusOf("napper");
  const std::string paused_on = Get("actor/napper", "{.status.latestSnapshot.id}");
  ASSERT_FALSE(paused_on.empty());
  const std::string pod = AgentPod();
  ASSERT_TRUE(Kubectl({"-n", "stasis-system", "delete", "pod", pod}, 120s).success());
  ASSERT_TRUE(AgentReady(180s));
  EXPECT_EQ(StatusOf("napper"), "STATUS_PAUSED");
  EXPECT_EQ(Get("actor/napper", "{.status.latestSnapshot.id}"), paused_on);
  EXPECT_EQ(AgentLeftovers({Get("actor/napper", "{.status.sandboxID}")}), std::vector<std::string>{});

  // Two suspends, each with a second's worth of checkpoint (1 GiB of random bytes in the
  // sandbox's memory) so that the agent can be lost while it runs.
  struct End {
    std::string what;
    std::vector<std::string> verb;
    bool graceful;  // the agent has time to finish the checkpoint it is in
  };
  const std::vector<End> ends = {
      {"the agent's pod deleted", {"delete", "pod", "--wait=false"}, true},
      {"the agent's pod deleted without grace", {"delete", "pod", "--wait=false", "--grace-period=1"}, false},
  };
  for (const auto& [what, verb, graceful] : ends) {
    SCOPED_TRACE(what);
    const std::string previous = Get("actor/napper", "{.status.latestSnapshot.id}");
    SetActor("napper", "Running");
    ASSERT_TRUE(Reaches("napper", "STATUS_RUNNING")) << StatusOf("napper");
    long before = -1;
    ASSERT_TRUE(Eventually([&] { return (before = Counter("napper")) > 0; }, 30s));
    const std::string id = Get("actor/napper", "{.status.sandboxID}");
    auto fill = InAgent({"runsc", "-root", "/var/lib/stasis/run/" + id, "exec", id, "/bin/busybox", "dd",
                         "if=/dev/urandom", "of=/tmp/ballast", "bs=1048576", "count=1024"},
                        300s);
    ASSERT_TRUE(fill.success()) << fill.err;
    const std::string agent = AgentPod();
    SetActor("napper", "Suspended");
    ASSERT_TRUE(Reaches("napper", "STATUS_SUSPENDING", 30s)) << StatusOf("napper");
    std::vector<std::string> args = {"-n", "stasis-system"};
    args.insert(args.end(), verb.begin(), verb.end());
    args.push_back(agent);
    const auto lost = std::chrono::steady_clock::now();
    ASSERT_TRUE(Kubectl(args).success());
    ASSERT_TRUE(Eventually([&] { return AgentPod() != agent; }, 120s));
    ASSERT_TRUE(AgentReady(180s));
    ASSERT_TRUE(Reaches("napper", "STATUS_SUSPENDED", 180s)) << StatusOf("napper");
    std::cout << "[ measure  ] " << what << " mid-checkpoint → SUSPENDED: "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - lost).count() << " s\n";
    const std::string taken = Get("actor/napper", "{.status.latestSnapshot.id}");
    EXPECT_FALSE(taken.empty());
    // Killed outright, the agent may die before the checkpoint is complete (it takes seconds
    // here): a partial image is never adopted, and the actor rests on the snapshot it had.
    const bool fell_back = !graceful && taken == previous;
    if (graceful) {
      EXPECT_NE(taken, previous) << "a graceful delete finishes the checkpoint in flight";
    }
    if (fell_back) std::cout << "[ notice   ] killed before the checkpoint completed: SUSPENDED on " << taken << "\n";
    EXPECT_TRUE(Eventually([] { return Get("worker/" + kWorker, "{.status.phase}", "") == "Free"; }, 30s));
    EXPECT_TRUE(Eventually([] { return AgentLeftovers({}).empty(); }, 30s))
        << ::testing::PrintToString(AgentLeftovers({}));
    SetActor("napper", "Running");
    ASSERT_TRUE(Reaches("napper", "STATUS_RUNNING")) << StatusOf("napper");
    long after = -1;
    ASSERT_TRUE(Eventually([&] { return (after = Counter("napper")) > 0; }, 30s));
    // From the suspend's own snapshot the counter goes on from where the suspend began; from the
    // earlier one it may be lower, as that snapshot was (the resume still works: it runs).
    if (!fell_back) {
      EXPECT_GE(after, before) << "the resumed actor's counter went back before the suspend began";
    }
    auto ballast = InAgent({"runsc", "-root", "/var/lib/stasis/run/" + Get("actor/napper", "{.status.sandboxID}"),
                            "exec", Get("actor/napper", "{.status.sandboxID}"), "/bin/busybox", "rm", "-f",
                            "/tmp/ballast"});
    EXPECT_TRUE(ballast.success()) << ballast.err;
  }
  SetActor("napper", "Suspended");
  ASSERT_TRUE(Reaches("napper", "STATUS_SUSPENDED"));
}

// The roles use the projected service-account token and the cluster's CA (no kubeconfig), the
// controller as the image's non-root user, the agent as root.
TEST_F(ClusterTest, TheRolesUseInClusterCredentialsAsTheirUsers) {
  const std::string controller = ControllerPod(180s);
  ASSERT_FALSE(controller.empty()) << "no controller pod Running and Ready";
  const std::string agent = AgentPod();
  ASSERT_FALSE(agent.empty()) << "no agent pod";
  for (const char* workload : {"deployment/stasis-controller", "daemonset/stasis-node-cpu"}) {
    auto spec = Kubectl({"-n", "stasis-system", "get", workload, "-o", "json"});
    ASSERT_TRUE(spec.success()) << spec.err;
    EXPECT_EQ(spec.out.find("kubeconfig"), std::string::npos) << workload << " names a kubeconfig";
  }
  for (const std::string& pod : {controller, agent}) {
    auto token = Kubectl({"-n", "stasis-system", "exec", pod, "--", "cat",
                          "/var/run/secrets/kubernetes.io/serviceaccount/namespace"});
    EXPECT_EQ(token.out, "stasis-system") << pod << ": " << token.err;
  }
  auto uid = [](const std::string& pod) {
    auto r = Kubectl({"-n", "stasis-system", "exec", pod, "--", "cat", "/proc/1/status"});
    const auto p = r.out.find("Uid:\t");
    return p == std::string::npos ? std::string("?") : r.out.substr(p + 5, r.out.find('\t', p + 5) - p - 5);
  };
  EXPECT_EQ(uid(controller), "65532");
  EXPECT_EQ(uid(agent), "0");
}

// The leader's pod deleted: the other replica leads within the Lease's timings, and binds
// without double-booking the node's one worker.
TEST_F(ClusterTest, TheOtherReplicaLeadsWhenTheLeadersPodIsDeleted) {
  auto holder = [] { return Get("lease/stasis-controller", "{.spec.holderIdentity}", "stasis-system"); };
  ASSERT_FALSE(ControllerPod(180s).empty()) << "no controller pod Running and Ready";
  std::string leader;
  ASSERT_TRUE(Eventually([&] { return !(leader = holder()).empty(); }, 60s)) << "nobody holds the lease";
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
