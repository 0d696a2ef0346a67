// `stasis controller` with real node agents, real sandboxes and real processes killed: it binds
// unpinned actors without double-booking a worker, and cleans actors stranded on a dead node
// agent (mid-SUSPENDING, and on deletion); the returning agent removes the leftover sandbox.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";

json GetJson(const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  a.push_back("-o");
  a.push_back("json");
  auto r = ControlPlane::Get().Kubectl(a);
  if (r.exit_code != 0) return json();
  return json::parse(r.out, nullptr, false);
}

class ClusterControllerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto& cp = ControlPlane::Get();
    auto r = cp.Kubectl({"apply", "-f", std::string(STASIS_SOURCE_DIR) + "/manifests/crd/"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = cp.Kubectl({"wait", "--for", "condition=established", "--timeout=60s", "crd/actors.stasis.dev",
                    "crd/workers.stasis.dev"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    cp.Kubectl({"create", "namespace", "stasis-system"});
  }

  void SetUp() override {
    dir_ = std::make_unique<TempDir>("stasis-cc-");
    bundle_ = std::make_unique<Bundle>(CounterArgs());
    ns_ = "cc-" + std::to_string(counter_++);
    ASSERT_EQ(ControlPlane::Get().Kubectl({"create", "namespace", ns_}).exit_code, 0);
  }

  void TearDown() override {
    // Release any checkpoint a delay injector still holds, so no wrapper outlives the test.
    std::ofstream(dir_->path() / "never") << "release\n";
    ControlPlane::Get().Kubectl({"delete", "actors", "--all", "-n", ns_, "--wait=false"});
    for (auto& [name, agent] : agents_) agent->Stop(5s);
    agents_.clear();
    if (controller_) controller_->Stop(5s);
    for (const auto& node : nodes_) {
      fs::path run = dir_->path() / node / "run";
      if (!fs::exists(run)) continue;
      for (const auto& e : fs::directory_iterator(run)) {
        (void)RunCommand({PinnedRunsc(), "-root", e.path().string(), "delete", "-force",
                          e.path().filename().string()},
                         60s);
        (void)RunCommand({"umount", "-l", (e.path() / "null-netns").string()}, 10s);
      }
    }
    // Workers of this test's nodes go with the test.
    for (const auto& node : nodes_) {
      ControlPlane::Get().Kubectl({"delete", "workers", "-l", "stasis.dev/node=" + node});
    }
  }

  void StartController() {
    controller_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{kStasis, "controller", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                 "--metrics-addr", "127.0.0.1:0", "--grace", "2",
                                 "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline",
                                 "3s", "--leader-elect-retry-period", "1s"},
        (dir_->path() / "controller.log").string());
  }

  void StartAgent(const std::string& node, int workers, const std::string& runsc = "",
                  const std::vector<std::string>& env = {}) {
    if (std::find(nodes_.begin(), nodes_.end(), node) == nodes_.end()) nodes_.push_back(node);
    agents_[node] = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{kStasis, "node", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                 "--node-name", node, "--runsc", runsc.empty() ? PinnedRunsc() : runsc,
                                 "--root", (dir_->path() / node).string(), "--snapshot-store",
                                 (dir_->path() / "store").string(), "--workers", std::to_string(workers),
                                 "--metrics-addr", "127.0.0.1:0", "--heartbeat-period", "1",
                                 "--heartbeat-lease-duration", "4"},
        (dir_->path() / (node + ".log")).string(), env);
  }

  void CreateActor(const std::string& name, const std::string& desired, int checkpoint_timeout = 600) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec",
               {{"bundle", bundle_->dir().string()},
                {"desiredState", desired},
                {"timeouts", {{"checkpointSeconds", checkpoint_timeout}, {"restoreSeconds", 60}}}}}};
    auto r = ControlPlane::Get().Kubectl({"apply", "-f", "-"}, a.dump());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  void SetDesired(const std::string& name, const std::string& desired) {
    auto r = ControlPlane::Get().Kubectl({"patch", "actor", name, "-n", ns_, "--type", "merge", "-p",
                                          json{{"spec", {{"desiredState", desired}}}}.dump()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  std::map<std::string, json> Actors() {
    std::map<std::string, json> out;
    auto list = GetJson({"get", "actors", "-n", ns_});
    if (list.is_object()) {
      for (auto& item : list["items"]) out[item["metadata"]["name"]] = item;
    }
    return out;
  }

  json Actor(const std::string& name) { return GetJson({"get", "actor", name, "-n", ns_}); }

  std::string StatusOf(const std::string& name) {
    auto a = Actor(name);
    if (!a.is_object()) return "<gone>";
    return a.value("/status/status"_json_pointer, std::string());
  }

  // Polls until pred() or the deadline; on failure prints the logs.
  bool Eventually(const std::function<bool()>& pred, std::chrono::seconds deadline) {
    const auto end = Clock::now() + deadline;
    while (Clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(200ms);
    }
    if (pred()) return true;
    if (controller_) std::cerr << "--- controller log\n" << controller_->LogTail();
    for (auto& [n, a] : agents_) std::cerr << "--- " << n << " log\n" << a->LogTail();
    return false;
  }

  // Every worker of this test's nodes: name → holder key ("" when free).
  std::map<std::string, std::string> Holders() {
    std::map<std::string, std::string> out;
    auto list = GetJson({"get", "workers"});
    for (auto& w : list["items"]) {
      const std::string node = w["spec"]["nodeName"];
      if (std::find(nodes_.begin(), nodes_.end(), node) == nodes_.end()) continue;
      std::string holder;
      if (w.contains("status") && w["status"].value("phase", "") == "Held") {
        holder = w["status"]["actorRef"].value("namespace", "") + "/" + w["status"]["actorRef"].value("name", "");
      }
      out[w["metadata"]["name"]] = holder;
    }
    return out;
  }

  static inline int counter_ = 0;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<Bundle> bundle_;
  std::string ns_;
  std::vector<std::string> nodes_;
  std::map<std::string, std::unique_ptr<BackgroundProcess>> agents_;
  std::unique_ptr<BackgroundProcess> controller_;
};

TEST_F(ClusterControllerTest, BindsUnpinnedActorsAndNeverDoubleBooksAWorker) {
  StartAgent("cc-a", 2);
  StartAgent("cc-b", 1);
  StartController();
  for (int i = 0; i < 5; ++i) CreateActor("act-" + std::to_string(i), "Running");

  // Three workers, five actors: exactly three run, each holding exactly the worker it names.
  auto three_running = [&] {
    int running = 0;
    for (auto& [n, a] : Actors()) running += a.value("/status/status"_json_pointer, std::string()) == "STATUS_RUNNING";
    return running == 3;
  };
  ASSERT_TRUE(Eventually(three_running, 60s));
  std::this_thread::sleep_for(3s);  // let any double-booking race show itself
  ASSERT_TRUE(three_running());
  auto holders = Holders();
  std::map<std::string, int> held_by;
  for (auto& [worker, holder] : holders) {
    ASSERT_FALSE(holder.empty()) << worker << " is free while two actors wait";
    held_by[holder]++;
  }
  for (auto& [name, a] : Actors()) {
    const std::string status = a.value("/status/status"_json_pointer, std::string());
    if (status != "STATUS_RUNNING") continue;
    const std::string worker = a["status"].value("workerName", "");
    EXPECT_EQ(holders[worker], ns_ + "/" + name);
    EXPECT_EQ(held_by[ns_ + "/" + name], 1);
  }

  // Suspending one frees its worker, and a waiting actor is bound and runs there.
  std::string suspended;
  for (auto& [name, a] : Actors()) {
    if (a.value("/status/status"_json_pointer, std::string()) == "STATUS_RUNNING") {
      suspended = name;
      break;
    }
  }
  SetDesired(suspended, "Suspended");
  ASSERT_TRUE(Eventually([&] { return StatusOf(suspended) == "STATUS_SUSPENDED"; }, 60s));
  ASSERT_TRUE(Eventually(three_running, 60s));
}

TEST_F(ClusterControllerTest, AgentKilledDuringSuspendingIsCleanedAndItsLeftoverRemoved) {
  // The checkpoint is held (a labelled delay injector in front of the real runsc) so the agent
  // can be killed while the actor is SUSPENDING.
  const std::string injector = std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-fault-inject.sh";
  StartAgent("cc-c", 1, injector,
             {"STASIS_INJECT_RUNSC=" + PinnedRunsc(), "STASIS_INJECT_MODE=hold-checkpoint",
              "STASIS_INJECT_HOLD_S=60", "STASIS_INJECT_RELEASE_FILE=" + (dir_->path() / "never").string()});
  StartController();
  CreateActor("victim", "Running", /*checkpoint_timeout=*/20);
  ASSERT_TRUE(Eventually([&] { return StatusOf("victim") == "STATUS_RUNNING"; }, 60s));
  SetDesired("victim", "Suspended");
  ASSERT_TRUE(Eventually([&] { return StatusOf("victim") == "STATUS_SUSPENDING"; }, 30s));

  agents_["cc-c"]->Kill(SIGKILL);  // the agent dies; its held runsc child lives on
  agents_["cc-c"]->Wait(10s);
  const auto killed = Clock::now();
  // Lost after the heartbeat's 4 s lease; cleaned on the controller's next look.
  ASSERT_TRUE(Eventually([&] { return StatusOf("victim") == "STATUS_FAILED"; }, 60s));
  const double took = std::chrono::duration<double>(Clock::now() - killed).count();
  std::cout << "[ measure  ] agent killed → actor cleaned: " << took << " s (heartbeat lease 4 s)\n";
  auto a = Actor("victim");
  bool stuck = false;
  for (auto& c : a["status"]["conditions"]) {
    if (c["type"] == "Stuck") {
      stuck = c["status"] == "True";
      EXPECT_EQ(c["reason"], "NodeLost");
    }
  }
  EXPECT_TRUE(stuck);
  EXPECT_TRUE(a["status"].value("workerName", "").empty());
  for (auto& [worker, holder] : Holders()) EXPECT_TRUE(holder.empty()) << worker;

  // The sandbox is still there on the node; the returning agent removes it.
  const fs::path root = dir_->path() / "cc-c" / "run" / (ns_ + "_victim");
  ASSERT_TRUE(fs::exists(root));
  StartAgent("cc-c", 1);
  ASSERT_TRUE(Eventually([&] { return !fs::exists(root); }, 60s));
}

TEST_F(ClusterControllerTest, DeleteCompletesWithTheNodeAgentDown) {
  StartAgent("cc-d", 1);
  StartController();
  CreateActor("orphan", "Running");
  ASSERT_TRUE(Eventually([&] { return StatusOf("orphan") == "STATUS_RUNNING"; }, 60s));
  agents_["cc-d"]->Kill(SIGKILL);
  agents_["cc-d"]->Wait(10s);
  auto r = ControlPlane::Get().Kubectl({"delete", "actor", "orphan", "-n", ns_, "--wait=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return StatusOf("orphan") == "<gone>"; }, 60s));
  for (auto& [worker, holder] : Holders()) EXPECT_TRUE(holder.empty()) << worker;
  // The agent returns and removes the sandbox of the actor that no longer exists.
  const fs::path root = dir_->path() / "cc-d" / "run" / (ns_ + "_orphan");
  StartAgent("cc-d", 1);
  ASSERT_TRUE(Eventually([&] { return !fs::exists(root); }, 60s));
}

}  // namespace
}  // namespace stasis::testing
