// `stasis controller` with real node agents, real sandboxes and real processes killed: it binds
// unpinned actors without double-booking a worker (also with 200 actors on 20 workers and the
// leader killed mid-binding), cleans actors stranded on a dead node agent (mid-SUSPENDING, and
// on deletion from every status) and a transition a stopped agent let pass its deadline,
// converges across a kube-apiserver restart mid-transition, and keeps the newest --retain
// committed snapshots; the returning agent removes leftovers.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"
#include "reconcilers/node/sandbox_id.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";
const std::string kInjector = std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-fault-inject.sh";

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
    ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
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
    // STASIS_E2E_LOG_DIR=DIR keeps the processes' logs after the test.
    if (const char* keep = std::getenv("STASIS_E2E_LOG_DIR"); keep && *keep) {
      std::error_code ec;
      const fs::path to = fs::path(keep) / ns_;
      fs::create_directories(to, ec);
      for (const auto& e : fs::directory_iterator(dir_->path(), ec)) {
        if (e.path().extension() == ".log") {
          fs::copy_file(e.path(), to / e.path().filename(), fs::copy_options::overwrite_existing, ec);
        }
      }
    }
    // One DELETE of the collection: `kubectl delete --all` deletes one by one (48 s for 200).
    ControlPlane::Get().Kubectl({"delete", "--raw", "/apis/stasis.dev/v1alpha1/namespaces/" + ns_ + "/actors"});
    // Deletion through the live agents first; whatever they could not finish loses its
    // finalizer, so that no later test's controller inherits this test's actors.
    const auto start = Clock::now();
    while (Clock::now() - start < 30s && !Actors().empty()) std::this_thread::sleep_for(200ms);
    for (auto& [name, agent] : agents_) agent->Stop(5s);
    agents_.clear();
    for (auto& c : controllers_) c->Stop(5s);
    controllers_.clear();
    for (const auto& [name, a] : Actors()) {
      ControlPlane::Get().Kubectl({"patch", "actor", name, "-n", ns_, "--type=merge", "-p",
                                   R"({"metadata":{"finalizers":null}})"});
    }
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

  // A `stasis controller` replica (short leader-election timings; later flags override).
  BackgroundProcess* StartController(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {kStasis, "controller", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                     "--metrics-addr", "127.0.0.1:0", "--grace", "2",
                                     "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline",
                                     "3s", "--leader-elect-retry-period", "1s"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const std::string log = "controller-" + std::to_string(controllers_.size()) + ".log";
    controllers_.push_back(std::make_unique<BackgroundProcess>(argv, (dir_->path() / log).string()));
    return controllers_.back().get();
  }

  // Later flags override the defaults (the heartbeat's 1 s / 4 s, for fast node-loss tests).
  void StartAgent(const std::string& node, int workers, const std::string& runsc = "",
                  const std::vector<std::string>& env = {}, const std::vector<std::string>& extra = {}) {
    if (std::find(nodes_.begin(), nodes_.end(), node) == nodes_.end()) nodes_.push_back(node);
    std::vector<std::string> argv = {kStasis, "node", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                     "--node-name", node, "--runsc", runsc.empty() ? PinnedRunsc() : runsc,
                                     "--root", (dir_->path() / node).string(), "--snapshot-store",
                                     Store().string(), "--workers", std::to_string(workers),
                                     "--metrics-addr", "127.0.0.1:0", "--heartbeat-period", "1",
                                     "--heartbeat-lease-duration", "4", "--bundle-root", TestBundleRoot().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    agents_[node] = std::make_unique<BackgroundProcess>(argv, (dir_->path() / (node + ".log")).string(), env);
  }

  fs::path Store() const { return dir_->path() / "store"; }

  // The ids of the complete snapshots of an actor in the store (a manifest in the directory).
  std::set<std::string> Committed(const std::string& actor) {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(Store() / ns_ / actor, ec)) {
      if (fs::exists(e.path() / "manifest.json")) out.insert(e.path().filename().string());
    }
    return out;
  }

  // The labelled delay injector in front of the real runsc, holding the checkpoints (or
  // restores) of the armed actors until the release file exists (60 s at most).
  std::vector<std::string> HoldEnv(const std::string& mode, const std::string& node, int hold_s = 60) {
    return {"STASIS_INJECT_RUNSC=" + PinnedRunsc(), "STASIS_INJECT_MODE=" + mode,
            "STASIS_INJECT_HOLD_S=" + std::to_string(hold_s), "STASIS_INJECT_RELEASE_FILE=" + (dir_->path() / "never").string(),
            "STASIS_INJECT_ARM_FILE=" + ArmFile(node).string(),
            "STASIS_INJECT_LOG=" + (dir_->path() / ("inject-" + node + ".log")).string()};
  }
  fs::path ArmFile(const std::string& node) const { return dir_->path() / ("armed-" + node); }
  void Arm(const std::string& node, const std::string& actor) {
    std::ofstream(ArmFile(node), std::ios::app) << SandboxIdFor(ns_, actor) << "\n";
  }
  // Whether the injector on that node has been called for `sub` (checkpoint, restore) of actor.
  bool Injected(const std::string& node, const std::string& sub, const std::string& actor) {
    std::ifstream in(dir_->path() / ("inject-" + node + ".log"));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(sub + " " + SandboxIdFor(ns_, actor) + " ", 0) == 0) return true;
    }
    return false;
  }
  void ReleaseHolds() { std::ofstream(dir_->path() / "never") << "release\n"; }

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

  // An actor with this spec (the counter bundle unless the spec names one).
  void CreateActorWith(const std::string& name, json spec) {
    if (!spec.contains("bundle")) spec["bundle"] = bundle_->dir().string();
    if (!spec.contains("timeouts")) spec["timeouts"] = {{"checkpointSeconds", 60}, {"restoreSeconds", 60}};
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", spec}};
    auto r = ControlPlane::Get().Kubectl({"create", "-f", "-"}, a.dump());
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
    for (auto& c : controllers_) std::cerr << "--- " << c->log_path() << "\n" << c->LogTail();
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
  std::vector<std::unique_ptr<BackgroundProcess>> controllers_;
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
  ASSERT_FALSE(holders.empty()) << "no worker of this test's nodes listed";
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
  const auto holders = Holders();
  ASSERT_FALSE(holders.empty()) << "no worker of this test's nodes listed";
  for (auto& [worker, holder] : holders) EXPECT_TRUE(holder.empty()) << worker;

  // The sandbox is still there on the node; the returning agent removes it.
  const fs::path root = dir_->path() / "cc-c" / "run" / SandboxIdFor(ns_, "victim");
  ASSERT_TRUE(fs::exists(root));
  StartAgent("cc-c", 1);
  ASSERT_TRUE(Eventually([&] { return !fs::exists(root); }, 60s));
}

// Whether process `pid` exists and is not a zombie.
bool ProcessAlive(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  if (stat.empty()) return false;
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ||
         (stat[close + 2] != 'Z' && stat[close + 2] != 'X');
}

// The condition of that type, or an empty object.
json CondOf(const json& a, const std::string& type) {
  if (!a.is_object() || !a.contains("status")) return json::object();
  for (const auto& c : a["status"].value("conditions", json::array())) {
    if (c.value("type", "") == type) return c;
  }
  return json::object();
}

// The node agent stopped (SIGSTOP) mid-SUSPENDING, its node still alive (a heartbeat lease
// longer than the test): the controller's deadline cleanup, not the node-loss one, ends the
// transition after checkpointSeconds + grace. Continued, the agent leaves the controller's
// verdict alone and removes the sandbox it finds under an actor at rest.
TEST_F(ClusterControllerTest, AgentStoppedMidSuspendIsCleanedAtTheDeadline) {
  StartAgent("cc-s", 1, kInjector, HoldEnv("hold-checkpoint", "cc-s"), {"--heartbeat-lease-duration", "120"});
  StartController();
  CreateActor("slow", "Running", /*checkpoint_timeout=*/3);
  ASSERT_TRUE(Eventually([&] { return StatusOf("slow") == "STATUS_RUNNING"; }, 60s));
  Arm("cc-s", "slow");
  SetDesired("slow", "Suspended");
  // Stopped as soon as its checkpoint starts, well within the agent's own 3 s deadline.
  const auto asked = Clock::now();
  while (Clock::now() - asked < 30s && !Injected("cc-s", "checkpoint", "slow")) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(Injected("cc-s", "checkpoint", "slow"));
  agents_["cc-s"]->Kill(SIGSTOP);
  struct Continue {
    BackgroundProcess* p;
    ~Continue() { p->Kill(SIGCONT); }
  } resume_agent{agents_["cc-s"].get()};
  ASSERT_EQ(StatusOf("slow"), "STATUS_SUSPENDING");

  ASSERT_TRUE(Eventually([&] { return StatusOf("slow") == "STATUS_FAILED"; }, 30s));
  auto a = Actor("slow");
  const json stuck = CondOf(a, "Stuck");
  EXPECT_EQ(stuck.value("status", ""), "True") << a["status"].dump(2);
  EXPECT_EQ(stuck.value("reason", ""), "DeadlineExceeded");
  EXPECT_NE(stuck.value("message", "").find("past its deadline"), std::string::npos) << stuck.dump();
  EXPECT_TRUE(a["status"].value("workerName", "").empty());
  for (auto& [worker, holder] : Holders()) EXPECT_TRUE(holder.empty()) << worker;

  const fs::path root = dir_->path() / "cc-s" / "run" / SandboxIdFor(ns_, "slow");
  ASSERT_TRUE(fs::exists(root)) << "the controller cannot reach the node's sandbox";
  agents_["cc-s"]->Kill(SIGCONT);
  ASSERT_TRUE(Eventually([&] { return !fs::exists(root); }, 60s));
  EXPECT_EQ(StatusOf("slow"), "STATUS_FAILED");
  EXPECT_EQ(CondOf(Actor("slow"), "Stuck").value("reason", ""), "DeadlineExceeded");
}

// `kubectl delete actor` completes from every status with the node agents down (kill -9): once
// a node's heartbeat has expired, the controller frees the actor's worker, removes its committed
// snapshots and its finalizer. The returning agents remove what is left on their nodes.
TEST_F(ClusterControllerTest, DeleteFromEveryStatusWithTheNodeAgentsDown) {
  // cc-e holds the checkpoints of armed actors (PAUSING, SUSPENDING), cc-f their restores
  // (RESUMING): a labelled delay injector in front of the real runsc.
  fs::create_directories(Store());
  // A 30 s heartbeat lease: long enough that the statuses are still the ones each delete path
  // starts from when the delete comes. Under the full parallel run, killing two agents and
  // reading eight statuses outlasted a 4 s lease, and once a 10 s one (the last renewal comes
  // up to a heartbeat period before the kill): the controller had cleaned the actors first.
  // The held transitions get 300 s (holds and deadlines alike): on a loaded machine the 60 s
  // ones ran out before the delete, and the agent failed them itself.
  const std::vector<std::string> lease = {"--heartbeat-lease-duration", "30"};
  StartAgent("cc-e", 6, kInjector, HoldEnv("hold-checkpoint", "cc-e", 300), lease);
  StartAgent("cc-f", 1, kInjector, HoldEnv("hold-restore", "cc-f", 300), lease);
  StartController({"--snapshot-store", Store().string()});
  Bundle no_config(CounterArgs());  // under the agents' --bundle-root, without config.json
  fs::remove(no_config.dir() / "config.json");
  const fs::path empty_bundle = no_config.dir();
  const std::vector<std::string> on_e = {"run", "paus", "susp", "pausing", "suspending"};
  const json held_timeouts = {{"checkpointSeconds", 300}, {"restoreSeconds", 300}};
  for (const auto& n : on_e) {
    CreateActorWith(n, {{"nodeName", "cc-e"}, {"desiredState", "Running"}, {"timeouts", held_timeouts}});
  }
  CreateActorWith("fail", {{"nodeName", "cc-e"}, {"desiredState", "Running"}, {"bundle", empty_bundle.string()}});
  CreateActorWith("resuming", {{"nodeName", "cc-f"}, {"desiredState", "Running"}, {"timeouts", held_timeouts}});
  for (const auto& n : on_e) ASSERT_TRUE(Eventually([&] { return StatusOf(n) == "STATUS_RUNNING"; }, 60s)) << n;
  ASSERT_TRUE(Eventually([&] { return StatusOf("resuming") == "STATUS_RUNNING"; }, 60s));
  ASSERT_TRUE(Eventually([&] { return StatusOf("fail") == "STATUS_FAILED"; }, 60s));
  SetDesired("paus", "Paused");
  SetDesired("susp", "Suspended");
  SetDesired("resuming", "Paused");
  ASSERT_TRUE(Eventually([&] { return StatusOf("paus") == "STATUS_PAUSED"; }, 60s));
  ASSERT_TRUE(Eventually([&] { return StatusOf("susp") == "STATUS_SUSPENDED"; }, 60s));
  ASSERT_TRUE(Eventually([&] { return StatusOf("resuming") == "STATUS_PAUSED"; }, 60s));
  ASSERT_FALSE(Committed("susp").empty());
  Arm("cc-e", "pausing");
  Arm("cc-e", "suspending");
  Arm("cc-f", "resuming");
  SetDesired("pausing", "Paused");
  SetDesired("suspending", "Suspended");
  SetDesired("resuming", "Running");
  ASSERT_TRUE(Eventually([&] { return Injected("cc-e", "checkpoint", "pausing"); }, 60s));
  ASSERT_TRUE(Eventually([&] { return Injected("cc-e", "checkpoint", "suspending"); }, 60s));
  ASSERT_TRUE(Eventually([&] { return Injected("cc-f", "restore", "resuming"); }, 60s));

  const std::map<std::string, std::string> expected = {
      {"run", "STATUS_RUNNING"},        {"paus", "STATUS_PAUSED"},
      {"susp", "STATUS_SUSPENDED"},     {"fail", "STATUS_FAILED"},
      {"pausing", "STATUS_PAUSING"},    {"suspending", "STATUS_SUSPENDING"},
      {"resuming", "STATUS_RESUMING"}};
  for (const auto& [n, status] : expected) ASSERT_EQ(StatusOf(n), status) << n;
  for (const char* node : {"cc-e", "cc-f"}) {
    agents_[node]->Kill(SIGKILL);  // the agents only: their held runsc calls live on
    ASSERT_TRUE(agents_[node]->Wait(10s).has_value());
  }
  // One that no agent has ever seen (no status, no finalizer): pinned to the dead node.
  CreateActorWith("never", {{"nodeName", "cc-e"}, {"desiredState", "Running"}});
  for (const auto& [n, status] : expected) EXPECT_EQ(StatusOf(n), status) << n << " changed before the delete";
  const auto deleted = Clock::now();
  auto r = ControlPlane::Get().Kubectl({"delete", "actors", "--all", "-n", ns_, "--wait=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return Actors().empty(); }, 90s)) << Actors().size() << " actors left";
  std::cout << "[ measure  ] 8 actors deleted with their agents down in "
            << std::chrono::duration<double>(Clock::now() - deleted).count() << " s (heartbeat lease 30 s)\n";
  const auto holders = Holders();
  ASSERT_FALSE(holders.empty()) << "no worker of this test's nodes listed";
  for (auto& [worker, holder] : holders) EXPECT_TRUE(holder.empty()) << worker << " held by " << holder;
  EXPECT_TRUE(Committed("susp").empty()) << "committed snapshots of a deleted actor left in the store";

  // Let the held runsc calls go, wait until they are done, then bring the agents back: they
  // remove the sandboxes, runtime roots and local snapshots of the actors that no longer exist.
  ReleaseHolds();
  for (const char* node : {"cc-e", "cc-f"}) {
    std::ifstream in(dir_->path() / ("inject-" + std::string(node) + ".log"));
    for (std::string line; std::getline(in, line);) {
      const auto p = line.find("pid=");
      if (p == std::string::npos) continue;
      const long pid = std::stol(line.substr(p + 4));
      ASSERT_TRUE(Eventually([&] { return !ProcessAlive(pid); }, 60s)) << line;
    }
  }
  StartAgent("cc-e", 6);
  StartAgent("cc-f", 1);
  auto leftovers = [&] {
    std::vector<std::string> out;
    for (const char* node : {"cc-e", "cc-f"}) {
      for (const auto& [n, status] : expected) {
        for (const fs::path& p : {dir_->path() / node / "run" / SandboxIdFor(ns_, n),
                                  dir_->path() / node / "snapshots" / ns_ / n}) {
          if (fs::exists(p)) out.push_back(p.string());
        }
      }
    }
    return out;
  };
  EXPECT_TRUE(Eventually([&] { return leftovers().empty(); }, 60s)) << ::testing::PrintToString(leftovers());
}

// Retention: with --retain 2 the controller keeps the two newest committed snapshots of an
// actor that is suspended and resumed again and again, and never its latestSnapshot, which
// still resumes. Bad retention flags are refused before anything starts.
TEST_F(ClusterControllerTest, RetentionKeepsTheNewestCommittedSnapshots) {
  auto zero = RunCommand({kStasis, "controller", "--retain", "0", "--snapshot-store", dir_->path().string()}, 30s);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->exit_code, 2);
  EXPECT_NE(zero->err.find("--retain=0"), std::string::npos) << zero->err;
  EXPECT_NE(zero->err.find("leave --retain unset to keep every snapshot"), std::string::npos) << zero->err;
  auto no_store = RunCommand({kStasis, "controller", "--retain", "2"}, 30s);
  ASSERT_TRUE(no_store.ok());
  EXPECT_EQ(no_store->exit_code, 2);
  EXPECT_NE(no_store->err.find("--retain needs --snapshot-store"), std::string::npos) << no_store->err;
  auto missing = RunCommand({kStasis, "controller", "--retain", "2", "--snapshot-store",
                             (dir_->path() / "missing").string()}, 30s);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 2);
  EXPECT_NE(missing->err.find("is not a directory"), std::string::npos) << missing->err;

  fs::create_directories(Store());
  StartAgent("cc-r", 1);
  StartController({"--snapshot-store", Store().string(), "--retain", "2"});
  CreateActor("keeper", "Running");
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Eventually([&] { return StatusOf("keeper") == "STATUS_RUNNING"; }, 60s));
    SetDesired("keeper", "Suspended");
    ASSERT_TRUE(Eventually([&] { return StatusOf("keeper") == "STATUS_SUSPENDED"; }, 60s));
    const json snap = Actor("keeper")["status"]["latestSnapshot"];
    ASSERT_TRUE(snap.is_object());
    ids.push_back(snap["id"]);
    const std::set<std::string> want(ids.size() > 2 ? ids.end() - 2 : ids.begin(), ids.end());
    ASSERT_TRUE(Eventually([&] { return Committed("keeper") == want; }, 30s))
        << "after suspend " << i + 1 << ": " << ::testing::PrintToString(Committed("keeper")) << " want "
        << ::testing::PrintToString(want);
    SetDesired("keeper", "Running");
  }
  // The latest, and only it with its predecessor, is left; it resumes.
  ASSERT_TRUE(Eventually([&] { return StatusOf("keeper") == "STATUS_RUNNING"; }, 60s));
  EXPECT_EQ(Committed("keeper"), (std::set<std::string>{ids[2], ids[3]}));
  for (const auto& c : {CondOf(Actor("keeper"), "Ready")}) {
    EXPECT_NE(c.value("message", "").find(ids[3]), std::string::npos) << c.dump();
  }
}

// A kube-apiserver restart while an actor is SUSPENDING (its checkpoint held by the delay
// injector, then let go while the API server is down): the agent checkpoints and commits
// during the outage, finishes the suspend against the restarted server with nothing lost and
// nothing cleaned by force, and both processes stay up with their watches re-established: the
// agent acts on the next spec change, the controller binds a new actor.
TEST_F(ClusterControllerTest, ApiServerRestartMidSuspendConverges) {
  fs::create_directories(Store());
  // The heartbeat lease outlasts the restart: the agent lives through it and must not look lost.
  StartAgent("cc-g", 2, kInjector, HoldEnv("hold-checkpoint", "cc-g"), {"--heartbeat-lease-duration", "40"});
  // The restart takes the API away for ~25 s here (kube-apiserver drains for up to the
  // fixture's 20 s stop grace, then starts): a leader that cannot renew within its renew
  // deadline exits by design (its Deployment restarts it), so this one is given longer than
  // the outage to stay up through it.
  BackgroundProcess* controller = StartController(
      {"--leader-elect-lease-duration", "60s", "--leader-elect-renew-deadline", "45s",
       "--leader-elect-retry-period", "2s", "--snapshot-store", Store().string()});
  CreateActor("mover", "Running");  // unpinned: the controller binds it
  ASSERT_TRUE(Eventually([&] { return StatusOf("mover") == "STATUS_RUNNING"; }, 60s));
  Arm("cc-g", "mover");
  SetDesired("mover", "Suspended");
  ASSERT_TRUE(Eventually([&] { return Injected("cc-g", "checkpoint", "mover"); }, 60s));
  ASSERT_EQ(StatusOf("mover"), "STATUS_SUSPENDING");

  auto api_down = [] {
    return ControlPlane::Get().Kubectl({"--request-timeout=2s", "get", "--raw", "/readyz"}).exit_code != 0;
  };
  const auto restart = Clock::now();
  std::thread restarter([] { ControlPlane::Get().RestartApiServer(); });
  ASSERT_TRUE(Eventually(api_down, 30s)) << "the API server did not go down";
  ReleaseHolds();  // the checkpoint goes on while the API server is away
  const bool committed_while_down = Eventually([&] { return !Committed("mover").empty(); }, 15s);
  const bool still_down = api_down();
  restarter.join();
  std::cout << "[ measure  ] kube-apiserver restart (stop + start until ready): "
            << std::chrono::duration<double>(Clock::now() - restart).count() << " s\n";
  ASSERT_TRUE(committed_while_down) << "the held checkpoint was not committed";
  ASSERT_TRUE(still_down) << "the API server was back before the commit: not the case under test";
  const std::set<std::string> taken = Committed("mover");
  const auto back = Clock::now();
  ASSERT_TRUE(Eventually([&] { return StatusOf("mover") == "STATUS_SUSPENDED"; }, 90s));
  std::cout << "[ measure  ] API server ready → SUSPENDED: "
            << std::chrono::duration<double>(Clock::now() - back).count() << " s\n";
  json a = Actor("mover");
  const json snap = a["status"]["latestSnapshot"];
  ASSERT_TRUE(snap.is_object()) << a["status"].dump(2);
  EXPECT_EQ(snap.value("trigger", ""), "Suspend");
  EXPECT_TRUE(fs::exists(fs::path(snap.value("location", "")) / "manifest.json")) << snap.dump();
  EXPECT_EQ(taken, std::set<std::string>{snap.value("id", "")}) << "the snapshot taken during the outage was not adopted";
  EXPECT_EQ(Committed("mover"), taken);
  EXPECT_TRUE(a["status"].value("workerName", "").empty());
  EXPECT_NE(CondOf(a, "Stuck").value("status", "False"), "True") << a["status"].dump(2);
  EXPECT_NE(CondOf(a, "CheckpointFailed").value("status", "False"), "True") << a["status"].dump(2);
  const auto holders_down = Holders();
  ASSERT_FALSE(holders_down.empty()) << "no worker of this test's nodes listed";
  for (auto& [worker, holder] : holders_down) EXPECT_TRUE(holder.empty()) << worker << " held by " << holder;
  ASSERT_TRUE(agents_["cc-g"]->Running()) << agents_["cc-g"]->LogTail();
  ASSERT_TRUE(controller->Running()) << controller->LogTail();

  // The watches are back: the agent acts on a spec change, the controller binds a new actor.
  SetDesired("mover", "Running");
  CreateActor("after", "Running");
  for (const char* n : {"mover", "after"}) {
    ASSERT_TRUE(Eventually([&] { return StatusOf(n) == "STATUS_RUNNING"; }, 60s)) << n;
  }
  EXPECT_EQ(Actor("after")["status"].value("nodeName", ""), "cc-g");
  std::map<std::string, int> held_by;
  const auto holders_back = Holders();
  ASSERT_FALSE(holders_back.empty()) << "no worker of this test's nodes listed";
  for (auto& [worker, holder] : holders_back) held_by[holder]++;
  EXPECT_EQ(held_by[ns_ + "/mover"], 1);
  EXPECT_EQ(held_by[ns_ + "/after"], 1);
  EXPECT_TRUE(agents_["cc-g"]->Running());
  EXPECT_TRUE(controller->Running());
  // Nothing was force-cleaned on the way.
  EXPECT_EQ(controller->Log().find("force-cleaned"), std::string::npos) << controller->LogTail();
}

// Distinct actors named by "actor bound actor=<ns>/<name>" lines of a controller log.
std::set<std::string> BoundIn(const std::string& log) {
  std::set<std::string> out;
  static const std::regex re("actor bound actor=([^ ]+)");
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) out.insert((*it)[1]);
  return out;
}

// 200 actors want to run on 20 workers (two real node agents with 10 each), two controller
// replicas, and the leader is killed (SIGKILL) while it is binding them. The standby takes over
// and finishes: 20 actors run, each on exactly the one worker that names it, no worker is
// claimed twice, and the other 180 wait holding nothing.
TEST_F(ClusterControllerTest, LeaderKilledMidBindingNeverDoubleBooks200ActorsOn20Workers) {
  // A generous heartbeat: 20 sandboxes starting at once on a small machine must not look like
  // a lost node (node loss has its own tests).
  for (const char* node : {"cf-a", "cf-b"}) {
    StartAgent(node, 10, "", {}, {"--heartbeat-period", "2", "--heartbeat-lease-duration", "60"});
  }
  ASSERT_TRUE(Eventually([&] { return Holders().size() == 20; }, 60s)) << Holders().size() << " workers";
  const std::vector<std::string> fast = {"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline",
                                         "2s", "--leader-elect-retry-period", "500ms"};
  BackgroundProcess* replicas[2] = {StartController(fast), StartController(fast)};
  BackgroundProcess* leader = nullptr;
  ASSERT_TRUE(Eventually([&] {
    for (auto* c : replicas) {
      if (c->Log().find("controller leading") != std::string::npos) leader = c;
    }
    return leader != nullptr;
  }, 60s));
  BackgroundProcess* standby = leader == replicas[0] ? replicas[1] : replicas[0];

  json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
  for (int i = 0; i < 200; ++i) {
    list["items"].push_back({{"apiVersion", "stasis.dev/v1alpha1"},
                             {"kind", "Actor"},
                             {"metadata", {{"name", "act-" + std::to_string(i)}, {"namespace", ns_}}},
                             {"spec",
                              {{"bundle", bundle_->dir().string()},
                               {"desiredState", "Running"},
                               {"timeouts", {{"checkpointSeconds", 60}, {"restoreSeconds", 120}}}}}});
  }
  const auto created = Clock::now();
  std::thread create([&] {
    auto r = ControlPlane::Get().Kubectl({"create", "-f", "-"}, list.dump());
    EXPECT_EQ(r.exit_code, 0) << r.err;
  });
  // Kill the leader as soon as it has bound a few actors.
  const auto watch_start = Clock::now();
  while (Clock::now() - watch_start < 60s && BoundIn(leader->Log()).size() < 3) {
    std::this_thread::sleep_for(10ms);
  }
  leader->Kill(SIGKILL);
  create.join();
  ASSERT_TRUE(leader->Wait(10s).has_value());
  const auto killed = Clock::now();
  const auto bound_by_first = BoundIn(leader->Log());
  std::cout << "[ measure  ] leader killed after binding " << bound_by_first.size() << " actors, "
            << std::chrono::duration<double>(killed - created).count() << " s after the creation began\n";
  ASSERT_GE(bound_by_first.size(), 3u) << leader->LogTail();
  ASSERT_LT(bound_by_first.size(), 20u) << "the leader had finished binding: not killed mid-binding";

  ASSERT_TRUE(Eventually([&] { return standby->Log().find("controller leading") != std::string::npos; }, 60s));
  std::cout << "[ measure  ] standby leading " << std::chrono::duration<double>(Clock::now() - killed).count()
            << " s after the kill\n";

  // What binding and claiming write, checked both ways: an actor's status.nodeName (with the
  // label stasis.dev/node) and status.workerName; a Worker's status.actorRef.
  auto violations = [&] {
    std::vector<std::string> out;
    auto actors = Actors();
    std::map<std::string, json> workers;
    const json list = GetJson({"get", "workers"});
    for (const auto& w : list.value("items", json::array())) {
      if (std::find(nodes_.begin(), nodes_.end(), w["spec"].value("nodeName", "")) != nodes_.end()) {
        workers[w["metadata"]["name"]] = w;
      }
    }
    if (actors.size() != 200) out.push_back(std::to_string(actors.size()) + " actors");
    if (workers.size() != 20) out.push_back(std::to_string(workers.size()) + " workers");
    std::map<std::string, int> naming;  // worker → actors whose status names it
    int running = 0;
    for (auto& [name, a] : actors) {
      const json st = a.value("status", json::object());
      const std::string status = st.value("status", ""), node = st.value("nodeName", "");
      const std::string worker = st.value("workerName", ""), key = ns_ + "/" + name;
      running += status == "STATUS_RUNNING";
      if (!node.empty() && a["metadata"].value("labels", json::object()).value("stasis.dev/node", "") != node) {
        out.push_back(key + ": status.nodeName " + node + " without the matching label");
      }
      if (worker.empty()) {
        if (status != "" && status != "STATUS_UNSPECIFIED")
          out.push_back(key + " is " + status + " and holds no worker");
        continue;
      }
      naming[worker]++;
      if (status != "STATUS_RUNNING") out.push_back(key + " holds " + worker + " but is " + status);
      auto w = workers.find(worker);
      if (w == workers.end()) {
        out.push_back(key + " names an unknown worker " + worker);
        continue;
      }
      const json ws = w->second.value("status", json::object());
      const json ref = ws.value("actorRef", json::object());
      if (ws.value("phase", "") != "Held" || ref.value("namespace", "") + "/" + ref.value("name", "") != key) {
        out.push_back(key + " names " + worker + ", which is " + ws.dump());
      }
      if (w->second["spec"].value("nodeName", "") != node) {
        out.push_back(key + " is on " + node + " but its worker " + worker + " on " +
                      w->second["spec"].value("nodeName", ""));
      }
    }
    for (auto& [worker, n] : naming) {
      if (n > 1) out.push_back(worker + " is named by " + std::to_string(n) + " actors");
    }
    for (auto& [name, w] : workers) {
      const json ws = w.value("status", json::object());
      if (ws.value("phase", "") != "Held") {
        out.push_back(name + " is free while actors wait");
        continue;
      }
      const json ref = ws.value("actorRef", json::object());
      auto a = actors.find(ref.value("name", ""));
      if (ref.value("namespace", "") != ns_ || a == actors.end() ||
          a->second.value("/status/workerName"_json_pointer, std::string()) != name) {
        out.push_back(name + " is held by " + ref.dump() + ", which does not name it");
      }
    }
    if (running != 20) out.push_back(std::to_string(running) + " running");
    return out;
  };
  std::vector<std::string> last;
  const bool converged = Eventually([&] { return (last = violations()).empty(); }, 180s);
  ASSERT_TRUE(converged) << ::testing::PrintToString(last);
  std::cout << "[ measure  ] 20 running, 20 workers held, 180 waiting "
            << std::chrono::duration<double>(Clock::now() - created).count() << " s after the creation began\n";
  // And it stays so: no late double claim, no worker given to a second actor.
  std::this_thread::sleep_for(5s);
  last = violations();
  EXPECT_TRUE(last.empty()) << ::testing::PrintToString(last);
  // On the nodes: a sandbox runtime root for each running actor, on its node, and no other.
  std::set<std::string> roots, running;
  for (const char* node : {"cf-a", "cf-b"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_->path() / node / "run", ec)) {
      if (e.is_directory(ec)) roots.insert(std::string(node) + "/" + e.path().filename().string());
    }
  }
  for (auto& [name, a] : Actors()) {
    if (a.value("/status/status"_json_pointer, std::string()) == "STATUS_RUNNING") {
      running.insert(a.value("/status/nodeName"_json_pointer, std::string()) + "/" + SandboxIdFor(ns_, name));
    }
  }
  EXPECT_EQ(roots, running);
  EXPECT_FALSE(BoundIn(standby->Log()).empty()) << "the new leader bound nothing: it did not finish the binding";
  std::cout << "[ measure  ] actors bound by the killed leader: " << bound_by_first.size()
            << ", by the new leader: " << BoundIn(standby->Log()).size() << "\n";
  EXPECT_TRUE(standby->Running());
}
}  // namespace
}  // namespace stasis::testing
