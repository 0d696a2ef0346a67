// `stasis node` end to end (issue 5, "Tests"): the real binary against a real kube-apiserver,
// reconciling Actors with the pinned runsc and real gVisor sandboxes running a counter. The
// tests speak only the API (kubectl, -o json) and look at what is on disk and in runsc, as an
// operator would. Faults are produced by labelled test doubles placed in front of the real
// runsc: tests/support/runsc-fault-inject.sh (kills the sandbox just before a checkpoint, or
// holds a checkpoint/restore so the agent can be killed mid-transition) and
// tests/support/runsc-nvproxy-fault.sh (the nvproxy save failure of a GPU sandbox). The real
// runsc does every piece of real work.
//
// Every wait polls with a deadline and fails with the last observed status and the agents'
// log tails; the only fixed waits are the ones that check that something does NOT happen
// (a checkpoint is never retried).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";
const std::string kInjectWrapper = std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-fault-inject.sh";
const std::string kNvproxyWrapper = std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-nvproxy-fault.sh";

constexpr auto kPoll = 150ms;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// .status.status, or "" when there is none yet.
std::string StatusOf(const json& a) {
  if (!a.is_object() || !a.contains("status") || !a["status"].is_object()) return "";
  return a["status"].value("status", "");
}

json StatusField(const json& a, const std::string& field) {
  if (!a.is_object() || !a.contains("status") || !a["status"].is_object()) return nullptr;
  return a["status"].value(field, json(nullptr));
}

// The condition of that type, or null.
json Cond(const json& a, const std::string& type) {
  json conds = StatusField(a, "conditions");
  if (!conds.is_array()) return nullptr;
  for (const auto& c : conds) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

bool CondIs(const json& a, const std::string& type, const std::string& status) {
  json c = Cond(a, type);
  return c.is_object() && c.value("status", "") == status;
}

// The condition's reason, or "" while the actor has no such condition.
std::string CondReason(const json& a, const std::string& type) {
  json c = Cond(a, type);
  return c.is_object() ? c.value("reason", "") : "";
}

std::string CondMessage(const json& a, const std::string& type) {
  json c = Cond(a, type);
  return c.is_object() ? c.value("message", "") : "";
}

// Every "*.partial" directory under `root`.
std::vector<std::string> PartialDirs(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 8 && name.substr(name.size() - 8) == ".partial") out.push_back(it->path().string());
  }
  return out;
}

// The entries of a directory (empty when it does not exist).
std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  return out;
}

// Live processes whose command line mentions `needle` (a sandbox's runsc root: the sandbox,
// its gofer and any runsc call on it carry it).
std::vector<std::string> ProcessesMentioning(const std::string& needle) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    if (std::to_string(getpid()) == pid) continue;
    std::string cmd = ReadFile(e.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(pid + ": " + cmd.substr(0, 200));
  }
  return out;
}

// Whether process `pid` exists and is not a zombie.
bool ProcessAlive(long pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ||
         (stat[close + 2] != 'Z' && stat[close + 2] != 'X');
}

// One `stasis node` process.
struct Agent {
  std::string node, root, store, runsc;
  std::unique_ptr<BackgroundProcess> proc;
};

class NodeAgentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(kStasis)) << kStasis << " is not built";
    (void)PinnedRunsc();
    ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
  }

  NodeAgentTest() : work_("stasis-e2e-node-") {}

  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    // "PauseAndResume" → "e2e-pause-and-resume", kept short: the sandbox ids and runtime
    // roots are built from it.
    std::string kebab;
    for (char ch : name) {
      if (std::isupper(static_cast<unsigned char>(ch)) && !kebab.empty()) kebab += '-';
      kebab += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    ns_ = "e2e-" + kebab.substr(0, 20);
    while (ns_.back() == '-') ns_.pop_back();
    auto r = Kubectl({"create", "namespace", ns_});
    ASSERT_TRUE(r.success()) << r.err;
    bundle_ = std::make_unique<Bundle>(CounterArgs());
    store_ = (work_.path() / "store").string();
  }

  void TearDown() override {
    const auto start = Clock::now();
    // Deletion through the agents first (that is also what a user does).
    bool any_running = false;
    for (auto& a : agents_) any_running = any_running || (a->proc && a->proc->Running());
    Kubectl({"delete", "actors", "--all", "-n", ns_, "--wait=false"});
    if (any_running) {
      while (Clock::now() - start < 20s && !ListActors().empty()) std::this_thread::sleep_for(kPoll);
    }
    for (auto& a : agents_) {
      if (a->proc) a->proc->Stop(10s);
    }
    // Whatever the agents could not finish: drop the finalizers so the objects go.
    for (const auto& item : ListActors()) {
      const std::string name = item["metadata"].value("name", "");
      Kubectl({"patch", "actor", name, "-n", ns_, "--type=merge", "-p",
               R"({"metadata":{"finalizers":null}})"});
    }
    KillOrphans();
    // Sandboxes left by a failed test: force-delete them and release runsc's netns mounts.
    for (const auto& root : roots_) {
      for (const auto& id : Entries(fs::path(root) / "run")) {
        const std::string dir = root + "/run/" + id;
        auto r = RunCommand({PinnedRunsc(), "-root", dir, "list", "-format", "json"}, 30s);
        if (r.ok() && r->success()) {
          try {
            json list = json::parse(r->out);
            if (list.is_array()) {
              for (const auto& c : list) {
                (void)RunCommand({PinnedRunsc(), "-root", dir, "delete", "-force", c.value("id", "")}, 30s);
              }
            }
          } catch (...) {
          }
        }
        umount2((dir + "/null-netns").c_str(), MNT_DETACH);
      }
    }
    // STASIS_E2E_LOG_DIR=DIR keeps the agents' logs (and the wrapper's call log) after the test.
    if (const char* keep = std::getenv("STASIS_E2E_LOG_DIR"); keep && *keep) {
      std::error_code ec;
      const fs::path dir = fs::path(keep) / ns_;
      fs::create_directories(dir, ec);
      for (const auto& a : agents_) {
        fs::copy_file(a->proc->log_path(), dir / fs::path(a->proc->log_path()).filename(),
                      fs::copy_options::overwrite_existing, ec);
      }
      fs::copy_file(InjectLog(), dir / "inject-calls.log", fs::copy_options::overwrite_existing, ec);
    }
    for (const auto& node : nodes_) {
      Kubectl({"delete", "workers", "-l", "stasis.dev/node=" + node, "--wait=false"});
    }
    Kubectl({"delete", "namespace", ns_, "--wait=false"});
  }

  CommandResult Kubectl(const std::vector<std::string>& args, const std::string& in = "") {
    return ControlPlane::Get().Kubectl(args, in);
  }

  std::vector<json> ListActors() {
    auto r = Kubectl({"get", "actors", "-n", ns_, "-o", "json"});
    if (!r.success()) return {};
    try {
      return json::parse(r.out).value("items", json::array()).get<std::vector<json>>();
    } catch (...) {
      return {};
    }
  }

  std::string Node(const std::string& suffix) { return ns_ + "-" + suffix; }
  std::string Id(const std::string& actor) const { return ns_ + "_" + actor; }
  std::string RunDir(const Agent& a, const std::string& actor) const { return a.root + "/run/" + Id(actor); }
  std::string LocalSnapshots(const Agent& a, const std::string& actor) const {
    return a.root + "/snapshots/" + ns_ + "/" + actor;
  }
  std::string Committed(const std::string& store, const std::string& actor) const {
    return store + "/" + ns_ + "/" + actor;
  }

  // Starts `stasis node` and waits until it is ready. Its root is <work>/root-<suffix> for a
  // node named Node(suffix): one root per node, shared by its successive agents.
  Agent* StartAgent(const std::string& node, const std::string& runsc,
                    const std::vector<std::string>& env = {}, int workers = 2,
                    const std::string& store = "", const std::vector<std::string>& extra_args = {}) {
    auto a = std::make_unique<Agent>();
    a->node = node;
    a->root = (work_.path() / ("root-" + node.substr(ns_.size() + 1))).string();
    a->store = store.empty() ? store_ : store;
    a->runsc = runsc;
    const std::string log =
        (work_.path() / ("agent-" + node + "-" + std::to_string(agents_.size()) + ".log")).string();
    std::vector<std::string> argv = {kStasis, "node", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                     "--node-name", node, "--runsc", runsc, "--root", a->root,
                                     "--workers", std::to_string(workers), "--metrics-addr",
                                     "127.0.0.1:0", "--snapshot-store", a->store, "--shutdown-grace", "5"};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    a->proc = std::make_unique<BackgroundProcess>(argv, log, env);
    roots_.insert(a->root);
    nodes_.insert(node);
    Agent* out = a.get();
    agents_.push_back(std::move(a));
    const auto start = Clock::now();
    const std::string ready = "node agent ready node=" + node;
    while (Clock::now() - start < 30s) {
      if (out->proc->Log().find(ready) != std::string::npos) return out;
      if (!out->proc->Running()) break;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "agent " << node << " did not become ready:\n" << out->proc->LogTail();
    return nullptr;
  }

  // The wrapper's environment: everything goes to the real runsc (or `next`).
  std::vector<std::string> InjectEnv(const std::string& mode, const std::string& next = "") {
    return {"STASIS_INJECT_RUNSC=" + (next.empty() ? PinnedRunsc() : next),
            "STASIS_INJECT_MODE=" + mode, "STASIS_INJECT_LOG=" + InjectLog(),
            "STASIS_INJECT_ARM_FILE=" + ArmFile(), "STASIS_INJECT_RELEASE_FILE=" + ReleaseFile(),
            "STASIS_INJECT_HOLD_S=60"};
  }
  std::string InjectLog() const { return (work_.path() / "inject-calls.log").string(); }
  std::string ArmFile() const { return (work_.path() / "inject-armed").string(); }
  std::string ReleaseFile() const { return (work_.path() / "inject-release").string(); }
  void Arm(const std::string& actor) { std::ofstream(ArmFile(), std::ios::app) << Id(actor) << "\n"; }

  // The wrapper's record of `sub` calls ("checkpoint", "restore") for one actor.
  std::vector<std::string> InjectCalls(const std::string& sub, const std::string& actor) {
    std::vector<std::string> out;
    std::istringstream in(ReadFile(InjectLog()));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(sub + " " + Id(actor) + " ", 0) == 0) out.push_back(line);
    }
    return out;
  }

  static long PidOf(const std::string& call_line) {
    auto p = call_line.find("pid=");
    return p == std::string::npos ? -1 : std::stol(call_line.substr(p + 4));
  }

  // Held wrapper processes that outlived a killed agent (test 7), by the pid they logged; only
  // those whose command line is about this test's directories.
  void KillOrphans() {
    std::istringstream in(ReadFile(InjectLog()));
    for (std::string line; std::getline(in, line);) {
      const long pid = PidOf(line);
      if (pid <= 0 || !ProcessAlive(pid)) continue;
      std::string cmd = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      if (cmd.find(work_.path().string()) != std::string::npos) kill(-static_cast<pid_t>(pid), SIGKILL);
    }
  }

  std::string AgentLogs() {
    std::string out;
    for (const auto& a : agents_) {
      out += "---- agent " + a->node + " (" + a->proc->log_path() + ") ----\n" + a->proc->LogTail(3000) + "\n";
    }
    return out;
  }

  // Where the agent logged the steps that follow an actor's successful checkpoint (one
  // reconcile's lines are in order): its sandbox's delete, "actor checkpointed" (after the
  // PAUSED/SUSPENDED write) and "worker freed" (and which worker); npos for a step not logged.
  // "worker freed" follows the release's response, which a test's Workers poll may see first:
  // waited for (5 s).
  struct StepsAfterCheckpoint {
    size_t deleted = std::string::npos, written = std::string::npos, freed = std::string::npos;
    std::string freed_worker;
  };
  StepsAfterCheckpoint StepsAfterCheckpointInLog(const Agent& a, const std::string& name) {
    auto find_freed = [&](const std::string& log, size_t from) {
      const std::string step = "worker freed worker=", tail = " actor=" + ns_ + "/" + name;
      for (size_t at = log.find(step, from); at != std::string::npos; at = log.find(step, at + 1)) {
        const size_t end = log.find('\n', at);
        if (std::string_view(log).substr(at, end == std::string::npos ? end : end - at).ends_with(tail)) return at;
      }
      return std::string::npos;
    };
    StepsAfterCheckpoint steps;
    std::string log = ReadFile(a.proc->log_path());
    const size_t checkpointed = log.find("component=runsc op=checkpoint sandbox=" + Id(name) + " result=ok");
    if (checkpointed == std::string::npos) {
      ADD_FAILURE() << "no successful checkpoint of " << name << " in the agent's log\n" << AgentLogs();
      return steps;
    }
    for (int i = 0; i < 100 && find_freed(log, checkpointed) == std::string::npos; ++i) {
      std::this_thread::sleep_for(50ms);
      log = ReadFile(a.proc->log_path());
    }
    steps.deleted = log.find("component=runsc op=delete sandbox=" + Id(name) + " result=ok", checkpointed);
    steps.written = log.find("actor checkpointed actor=" + ns_ + "/" + name + " ", checkpointed);
    steps.freed = find_freed(log, checkpointed);
    if (steps.freed != std::string::npos) {
      const size_t name_at = steps.freed + std::string("worker freed worker=").size();
      steps.freed_worker = log.substr(name_at, log.find(' ', name_at) - name_at);
    }
    return steps;
  }

  void CreateActor(const std::string& name, json spec) {
    if (!spec.contains("timeouts")) spec["timeouts"] = {{"checkpointSeconds", 60}, {"restoreSeconds", 60}};
    json actor = {{"apiVersion", "stasis.dev/v1alpha1"},
                  {"kind", "Actor"},
                  {"metadata", {{"name", name}, {"namespace", ns_}}},
                  {"spec", spec}};
    auto r = Kubectl({"create", "-f", "-"}, actor.dump());
    ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
  }

  json CounterSpec(const std::string& node, const std::string& desired = "Running") {
    return {{"bundle", bundle_->dir().string()}, {"nodeName", node}, {"desiredState", desired}};
  }

  void Patch(const std::string& name, const json& spec) {
    auto r = Kubectl({"patch", "actor", name, "-n", ns_, "--type=merge", "-p", json{{"spec", spec}}.dump()});
    ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
  }

  // The actor, or null when it does not exist (any other error fails the test).
  json GetActor(const std::string& name) {
    auto r = Kubectl({"get", "actor", name, "-n", ns_, "-o", "json"});
    if (!r.success()) {
      if (r.err.find("NotFound") != std::string::npos || r.err.find("not found") != std::string::npos) {
        return nullptr;
      }
      ADD_FAILURE() << "kubectl get actor " << name << ": " << r.Summary();
      return nullptr;
    }
    return json::parse(r.out);
  }

  // Polls the actor until `pred` holds; on timeout fails with the last observed object and
  // the agents' log tails.
  bool WaitActor(const std::string& name, const std::function<bool(const json&)>& pred,
                 std::chrono::milliseconds timeout, const std::string& what, json* out = nullptr) {
    const auto start = Clock::now();
    json last;
    while (true) {
      last = GetActor(name);
      if (pred(last)) {
        if (out) *out = last;
        return true;
      }
      if (Clock::now() - start > timeout) break;
      std::this_thread::sleep_for(kPoll);
    }
    if (out) *out = last;
    ADD_FAILURE() << "actor " << ns_ << "/" << name << ": not " << what << " within "
                  << std::chrono::duration_cast<std::chrono::seconds>(timeout).count() << " s; last seen:\n"
                  << (last.is_object() && last.contains("status") ? last["status"].dump(2) : last.dump())
                  << "\n" << AgentLogs();
    return false;
  }

  bool WaitStatus(const std::string& name, const std::string& status, std::chrono::milliseconds timeout,
                  json* out = nullptr) {
    return WaitActor(name, [&](const json& a) { return StatusOf(a) == status; }, timeout, status, out);
  }

  // `cat /tmp/counter` in the actor's sandbox on that agent's node, or -1.
  long Counter(const Agent& a, const std::string& actor) {
    auto r = RunCommand({PinnedRunsc(), "-root", RunDir(a, actor), "exec", Id(actor), "/bin/cat", "/tmp/counter"}, 30s);
    if (!r.ok() || !r->success()) return -1;
    try {
      return std::stol(r->out);
    } catch (...) {
      return -1;
    }
  }

  // Waits until the counter is at least `at_least`; returns the last value read.
  long WaitCounter(const Agent& a, const std::string& actor, long at_least,
                   std::chrono::milliseconds timeout = 20s) {
    const auto start = Clock::now();
    long v = -1;
    while (Clock::now() - start < timeout) {
      v = Counter(a, actor);
      if (v >= at_least) return v;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "counter of " << actor << " did not reach " << at_least << " (last " << v << ")\n" << AgentLogs();
    return v;
  }

  std::vector<json> Workers(const std::string& node) {
    auto r = Kubectl({"get", "workers", "-l", "stasis.dev/node=" + node, "-o", "json"});
    EXPECT_TRUE(r.success()) << r.err;
    if (!r.success()) return {};
    return json::parse(r.out).value("items", json::array()).get<std::vector<json>>();
  }

  // "name=Free" / "name=Held(ns/actor)" for each worker of the node, for messages.
  std::string WorkersText(const std::string& node) {
    std::string out;
    for (const auto& w : Workers(node)) {
      json st = w.value("status", json::object());
      out += w["metadata"].value("name", "") + "=" + st.value("phase", "?");
      if (st.contains("actorRef")) {
        out += "(" + st["actorRef"].value("namespace", "") + "/" + st["actorRef"].value("name", "") + ")";
      }
      out += " ";
    }
    return out;
  }

  // The agent gives the worker back right after the write that ends a pause or suspend (off
  // its path), so a client that saw PAUSED may look a moment before it is free: up to 10 s.
  void ExpectAllWorkersFree(const std::string& node) {
    auto all_free = [&] {
      auto ws = Workers(node);
      return !ws.empty() && std::all_of(ws.begin(), ws.end(), [](const json& w) {
        return w.value("status", json::object()).value("phase", "") == "Free";
      });
    };
    for (int i = 0; i < 100 && !all_free(); ++i) std::this_thread::sleep_for(100ms);
    auto workers = Workers(node);
    EXPECT_FALSE(workers.empty()) << "node " << node << " registered no workers";
    for (const auto& w : workers) {
      json st = w.value("status", json::object());
      EXPECT_EQ(st.value("phase", ""), "Free") << "node " << node << ": " << WorkersText(node);
      EXPECT_FALSE(st.contains("actorRef")) << WorkersText(node);
    }
  }

  // Exactly one worker of the node is held, by `actor`, and it is the actor's status.workerName.
  void ExpectHeldBy(const std::string& node, const std::string& actor, const json& a) {
    int held_by_it = 0, held = 0;
    std::string which;
    for (const auto& w : Workers(node)) {
      json st = w.value("status", json::object());
      if (st.value("phase", "") != "Held") continue;
      ++held;
      if (st.contains("actorRef") && st["actorRef"].value("namespace", "") == ns_ &&
          st["actorRef"].value("name", "") == actor) {
        ++held_by_it;
        which = w["metadata"].value("name", "");
      }
    }
    EXPECT_EQ(held_by_it, 1) << WorkersText(node);
    EXPECT_EQ(held, 1) << WorkersText(node);
    EXPECT_EQ(StatusField(a, "workerName"), json(which)) << StatusField(a, "workerName");
  }

  // The node-local copies of an actor's snapshots, once they are gone (the agent drops the local
  // copy of a committed snapshot after the status write, off the transition's path; polled).
  std::vector<std::string> LocalSnapshotsAfterCommit(const Agent& a, const std::string& actor) {
    const auto start = Clock::now();
    while (Clock::now() - start < 10s && !Entries(LocalSnapshots(a, actor)).empty()) {
      std::this_thread::sleep_for(kPoll);
    }
    return Entries(LocalSnapshots(a, actor));
  }

  // The processes mentioning an actor's runtime dir once they are gone: after a Direct
  // checkpoint the agent deletes the stopped sandbox (runsc delete, runsc list) after the status
  // write, off the pause's path; polled. A sandbox that still runs is still there after 10 s.
  std::vector<std::string> ProcessesAfterCheckpoint(const Agent& a, const std::string& actor) {
    const auto start = Clock::now();
    while (Clock::now() - start < 10s && !ProcessesMentioning(RunDir(a, actor)).empty()) {
      std::this_thread::sleep_for(kPoll);
    }
    return ProcessesMentioning(RunDir(a, actor));
  }

  // Nothing of the actor is left on that agent's node: no runtime dir, no sandbox or runsc
  // process on it, no node-local snapshot.
  void ExpectNothingLeftOnNode(const Agent& a, const std::string& actor) {
    EXPECT_FALSE(fs::exists(RunDir(a, actor))) << RunDir(a, actor) << " left behind: " << ::testing::PrintToString(Entries(RunDir(a, actor)));
    EXPECT_THAT(ProcessesMentioning(RunDir(a, actor)), ::testing::IsEmpty()) << "sandbox processes left";
    EXPECT_THAT(Entries(LocalSnapshots(a, actor)), ::testing::IsEmpty()) << LocalSnapshots(a, actor);
  }

  // CDI specs for GPU workers GPU-e2e-0 and GPU-e2e-1 of a CPU machine, and the project's
  // helper spec with its hostPath pointed at the stasis-cuda-checkpoint of this build. Each GPU
  // device sets STASIS_E2E_GPU to its own UUID; with_glibc mounts the host's glibc (the helper
  // is a glibc program; a real GPU spec mounts the driver's libraries the same way).
  std::string WriteCdiSpecs(bool with_glibc) {
    const fs::path dir = work_.path() / "cdi";
    fs::create_directories(dir);
    std::string gpu = "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\n";
    if (with_glibc) {
      gpu += "containerEdits:\n  mounts:\n";
      for (const char* lib : {"/lib/x86_64-linux-gnu", "/lib64"}) {
        gpu += std::string("    - {hostPath: ") + lib + ", containerPath: " + lib +
               ", options: [ro, nosuid, nodev, rbind]}\n";
      }
    }
    gpu += "devices:\n";
    for (const char* uuid : {"GPU-e2e-0", "GPU-e2e-1"}) {
      gpu += std::string("  - name: ") + uuid + "\n    containerEdits:\n      env: [STASIS_E2E_GPU=" + uuid + "]\n";
    }
    std::ofstream(dir / "gpu.yaml") << gpu;
    std::string helper = ReadFile(std::string(STASIS_SOURCE_DIR) + "/manifests/cdi/stasis-cuda-checkpoint.yaml");
    const std::string shipped = "hostPath: /usr/lib/stasis/stasis-cuda-checkpoint";
    const auto at = helper.find(shipped);
    EXPECT_NE(at, std::string::npos) << "the shipped helper spec changed";
    if (at != std::string::npos) {
      helper.replace(at, shipped.size(), "hostPath: " + std::string(STASIS_BINARY_DIR) + "/stasis-cuda-checkpoint");
    }
    std::ofstream(dir / "stasis-cuda-checkpoint.yaml") << helper;
    return dir.string();
  }

  TempDir work_;
  std::string ns_, store_;
  std::unique_ptr<Bundle> bundle_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::set<std::string> roots_, nodes_;
};

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
    json m = json::parse(ReadFile(dir + "/manifest.json"));
    for (int i = 0; i < 100 && m.value("checksumsPending", false); ++i) {
      std::this_thread::sleep_for(100ms);
      m = json::parse(ReadFile(dir + "/manifest.json"));
    }
    EXPECT_FALSE(m.value("checksumsPending", false)) << m.dump();
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

// 2. Running → Suspended on node a → Running on node b, through one shared snapshot store.
TEST_F(NodeAgentTest, SuspendOnOneNodeResumeOnAnother) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  Agent* b = StartAgent(Node("b"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CreateActor("mover", CounterSpec(a->node));
  json actor;
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 30s, &actor));
  ExpectHeldBy(a->node, "mover", actor);
  const long before = WaitCounter(*a, "mover", 10);

  Patch("mover", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_SUSPENDED", 30s, &actor));
  json snap = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << actor["status"].dump();
  const std::string location = snap.value("location", "");
  EXPECT_EQ(location, Committed(store_, "mover") + "/" + snap.value("id", ""));
  EXPECT_EQ(snap.value("nodeName", ""), "") << "a committed snapshot belongs to no node";
  EXPECT_EQ(snap.value("trigger", ""), "Suspend");
  EXPECT_TRUE(fs::exists(location + "/manifest.json")) << location;
  EXPECT_THAT(LocalSnapshotsAfterCommit(*a, "mover"), ::testing::IsEmpty()) << "local copy kept after commit";
  EXPECT_THAT(PartialDirs(store_), ::testing::IsEmpty());
  ExpectAllWorkersFree(a->node);

  Patch("mover", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 30s, &actor));
  EXPECT_EQ(StatusField(actor, "nodeName"), json(b->node));
  ExpectHeldBy(b->node, "mover", actor);
  ExpectAllWorkersFree(a->node);
  const long after = WaitCounter(*b, "mover", before);  // polled: see AgentKilledMidRestore
  EXPECT_GE(after, before) << "restored on " << b->node << " but the counter restarted";
  WaitCounter(*b, "mover", after + 5);
  // Node a forgets the actor once it is bound elsewhere.
  const auto start = Clock::now();
  while (Clock::now() - start < 15s && fs::exists(RunDir(*a, "mover"))) std::this_thread::sleep_for(kPoll);
  ExpectNothingLeftOnNode(*a, "mover");
}

// 3. Deletion from RUNNING, PAUSED, SUSPENDED and FAILED: the object goes, and so does
// everything the agent made for it.
TEST_F(NodeAgentTest, DeleteFromEveryStatus) {
  // One worker each: a FAILED actor needs one too while it tries to start.
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 4);
  ASSERT_NE(a, nullptr);
  const fs::path empty_bundle = work_.path() / "empty-bundle";
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

// 6. A GPU actor whose cuda-checkpoint binary cannot run in its container (the helper is
// mounted by CDI, but this busybox root filesystem has no glibc for it): the preflight fails,
// the actor keeps running with CudaCheckpointReady=False naming the path, and no checkpoint is
// attempted.
TEST_F(NodeAgentTest, GpuPreflightFailureKeepsRunning) {
  const std::string cdi = WriteCdiSpecs(/*with_glibc=*/false);
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
  const long c = WaitCounter(*a, "gpu", 1);
  WaitCounter(*a, "gpu", c + 5);
  actor = GetActor("gpu");
  EXPECT_EQ(StatusOf(actor), "STATUS_RUNNING");
  ExpectHeldBy(a->node, "gpu", actor);
  EXPECT_THAT(InjectCalls("checkpoint", "gpu"), ::testing::IsEmpty()) << "checkpointed despite the failed preflight";
}

// 6b. A GPU actor on a GPU worker gets its devices from the node's CDI specs: the claimed
// GPU's edits (here an environment variable naming it and, standing in for a GPU spec's driver
// libraries, the host's glibc that the helper needs) and the project's cuda-checkpoint helper
// spec, mounted read-only at the actor's own spec.gpu.cudaCheckpointPath; its checkpoint carries
// -cuda-checkpoint-path and its restore uses the same derived bundle. Pause and resume go
// through the same state machine as a CPU actor. (No GPU here, so no NVIDIA device node in the
// specs: runsc turns nvproxy on by itself for a spec that lists /dev/nvidiactl. The real GPU
// run is hack/gpu-e2e.sh, docs/gpu-e2e-results.md.)
TEST_F(NodeAgentTest, GpuActorGetsItsDevicesFromCdi) {
  const std::string cdi = WriteCdiSpecs(/*with_glibc=*/true);
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
  EXPECT_THAT(restores[0], HasSubstr(a->root + "/bundles/" + Id("gpu")));
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

  fs::copy(WriteCdiSpecs(/*with_glibc=*/true), empty,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  ASSERT_TRUE(WaitStatus("gpu", "STATUS_RUNNING", 40s, &actor));
  ExpectHeldBy(a->node, "gpu", actor);
}

// 7a. kill -9 of the agent while runsc checkpoint is under way (held by the delay injector):
// a new agent converges to PAUSED; the old agent's orphaned runsc, released afterwards, does
// no harm.
TEST_F(NodeAgentTest, AgentKilledMidCheckpoint) {
  Agent* first = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-checkpoint"));
  ASSERT_NE(first, nullptr);
  Arm("ck");
  CreateActor("ck", CounterSpec(first->node));
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*first, "ck", 10);
  Patch("ck", {{"desiredState", "Paused"}});
  const auto start = Clock::now();
  while (Clock::now() - start < 30s && InjectCalls("checkpoint", "ck").empty()) std::this_thread::sleep_for(50ms);
  auto calls = InjectCalls("checkpoint", "ck");
  ASSERT_EQ(calls.size(), 1u) << AgentLogs();
  EXPECT_EQ(StatusOf(GetActor("ck")), "STATUS_PAUSING");
  first->proc->Kill(SIGKILL);  // the agent only: its runsc child lives on, as after a crash
  ASSERT_TRUE(first->proc->Wait(10s).has_value());

  Agent* second = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(second, nullptr);
  json actor;
  ASSERT_TRUE(WaitStatus("ck", "STATUS_PAUSED", 30s, &actor));
  EXPECT_FALSE(StatusField(actor, "transitionStartTime").is_string());
  ExpectAllWorkersFree(second->node);
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
  const json snap = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(snap.is_object());
  EXPECT_TRUE(fs::exists(snap.value("location", "") + "/manifest.json"));

  // Now let the orphaned checkpoint go on: it must find nothing to damage.
  std::ofstream(ReleaseFile()) << "go\n";
  const long orphan = PidOf(calls[0]);
  const auto released = Clock::now();
  while (Clock::now() - released < 30s && ProcessAlive(orphan)) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ProcessAlive(orphan));
  actor = GetActor("ck");
  EXPECT_EQ(StatusOf(actor), "STATUS_PAUSED");
  EXPECT_EQ(StatusField(actor, "latestSnapshot"), snap);
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
  EXPECT_THAT(ProcessesAfterCheckpoint(*second, "ck"), ::testing::IsEmpty());
  ExpectAllWorkersFree(second->node);

  Patch("ck", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s, &actor));
  EXPECT_GE(Counter(*second, "ck"), before);
  ExpectHeldBy(second->node, "ck", actor);
}

// 7c. kill -9 of the agent mid-checkpoint, and this time its orphaned runsc finishes the save
// before a new agent starts: the sandbox is gone and the image in <id>.partial never got its
// manifest, so it is not a snapshot (DESIGN.md §6). The new agent removes it, and the actor
// settles SUSPENDED on its earlier complete snapshot, which resumes: nothing complete is lost.
TEST_F(NodeAgentTest, AgentKilledAfterOrphanedSave) {
  Agent* first = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-checkpoint"));
  ASSERT_NE(first, nullptr);
  CreateActor("ck", CounterSpec(first->node));
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*first, "ck", 10);
  Patch("ck", {{"desiredState", "Paused"}});  // not armed yet: a good snapshot
  json actor;
  ASSERT_TRUE(WaitStatus("ck", "STATUS_PAUSED", 30s, &actor));
  const json good = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(good.is_object());
  Patch("ck", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s));

  Arm("ck");
  Patch("ck", {{"desiredState", "Paused"}});
  const auto start = Clock::now();
  while (Clock::now() - start < 30s && InjectCalls("checkpoint", "ck").size() < 2) std::this_thread::sleep_for(50ms);
  auto calls = InjectCalls("checkpoint", "ck");
  ASSERT_EQ(calls.size(), 2u) << AgentLogs();
  ASSERT_THAT(calls[1], HasSubstr("action=hold"));
  first->proc->Kill(SIGKILL);
  ASSERT_TRUE(first->proc->Wait(10s).has_value());
  std::ofstream(ReleaseFile()) << "go\n";
  const long orphan = PidOf(calls[1]);
  const auto released = Clock::now();
  while (Clock::now() - released < 30s && ProcessAlive(orphan)) std::this_thread::sleep_for(50ms);
  ASSERT_FALSE(ProcessAlive(orphan));
  ASSERT_FALSE(PartialDirs(first->root).empty()) << "the orphaned save left no image: the case is not set up";

  Agent* second = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(WaitStatus("ck", "STATUS_SUSPENDED", 30s, &actor));
  EXPECT_EQ(StatusField(actor, "latestSnapshot"), good);
  EXPECT_TRUE(CondIs(actor, "CheckpointFailed", "True")) << actor["status"].dump(2);
  EXPECT_THAT(CondMessage(actor, "CheckpointFailed"), HasSubstr("no complete snapshot"));
  EXPECT_FALSE(StatusField(actor, "transitionStartTime").is_string());
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
  EXPECT_FALSE(fs::exists(RunDir(*second, "ck")));
  EXPECT_THAT(ProcessesAfterCheckpoint(*second, "ck"), ::testing::IsEmpty());
  ExpectAllWorkersFree(second->node);

  Patch("ck", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("ck", "STATUS_RUNNING", 30s, &actor));
  EXPECT_GE(Counter(*second, "ck"), before);
  ExpectHeldBy(second->node, "ck", actor);
}

// 7b. kill -9 of the agent while runsc restore is under way: a new agent converges to
// RUNNING from the same snapshot, with one worker held and one sandbox; the orphaned restore,
// released afterwards, does no harm.
TEST_F(NodeAgentTest, AgentKilledMidRestore) {
  Agent* first = StartAgent(Node("a"), kInjectWrapper, InjectEnv("hold-restore"));
  ASSERT_NE(first, nullptr);
  Arm("rs");  // only its restores are held; its checkpoint goes straight through
  CreateActor("rs", CounterSpec(first->node));
  ASSERT_TRUE(WaitStatus("rs", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*first, "rs", 10);
  Patch("rs", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("rs", "STATUS_PAUSED", 30s));
  Patch("rs", {{"desiredState", "Running"}});
  const auto start = Clock::now();
  while (Clock::now() - start < 30s && InjectCalls("restore", "rs").empty()) std::this_thread::sleep_for(50ms);
  auto calls = InjectCalls("restore", "rs");
  ASSERT_EQ(calls.size(), 1u) << AgentLogs();
  EXPECT_EQ(StatusOf(GetActor("rs")), "STATUS_RESUMING");
  first->proc->Kill(SIGKILL);
  ASSERT_TRUE(first->proc->Wait(10s).has_value());

  Agent* second = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(second, nullptr);
  json actor;
  ASSERT_TRUE(WaitStatus("rs", "STATUS_RUNNING", 30s, &actor));
  EXPECT_FALSE(StatusField(actor, "transitionStartTime").is_string());
  ExpectHeldBy(second->node, "rs", actor);
  // Polled: the first exec into a just-restored sandbox can race its start under load.
  const long after = WaitCounter(*second, "rs", before);
  EXPECT_GE(after, before);

  std::ofstream(ReleaseFile()) << "go\n";
  const long orphan = PidOf(calls[0]);
  const auto released = Clock::now();
  while (Clock::now() - released < 30s && ProcessAlive(orphan)) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ProcessAlive(orphan));
  actor = GetActor("rs");
  EXPECT_EQ(StatusOf(actor), "STATUS_RUNNING");
  ExpectHeldBy(second->node, "rs", actor);
  WaitCounter(*second, "rs", after + 5);
  auto list = RunCommand({PinnedRunsc(), "-root", RunDir(*second, "rs"), "list", "-format", "json"}, 30s);
  ASSERT_TRUE(list.ok() && list->success());
  json ids = json::parse(list->out);
  ASSERT_TRUE(ids.is_array()) << list->out;
  EXPECT_EQ(ids.size(), 1u) << list->out;
  EXPECT_THAT(PartialDirs(second->root), ::testing::IsEmpty());
}

// 8a. A bundle without config.json and one whose root filesystem does not exist fail with the
// reason, while a good actor on the same agent runs normally.
TEST_F(NodeAgentTest, BadBundlesFailWithReasonOthersRun) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  const fs::path nocfg = work_.path() / "no-config";
  fs::create_directories(nocfg / "rootfs");
  const fs::path norootfs = work_.path() / "no-rootfs";
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

// 8b. A snapshot store that cannot be written (its path is under a regular file, so not even
// root can create it): Suspend keeps the complete snapshot on the node and rests PAUSED with
// CommitFailed; nothing is lost, the actor resumes from it.
TEST_F(NodeAgentTest, StoreNotWritableRestsPaused) {
  const fs::path file = work_.path() / "not-a-directory";
  std::ofstream(file) << "a regular file\n";
  const std::string store = (file / "store").string();
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 2, store);
  ASSERT_NE(a, nullptr);
  CreateActor("st", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("st", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*a, "st", 10);
  Patch("st", {{"desiredState", "Suspended"}});
  json x;
  ASSERT_TRUE(WaitActor("st", [](const json& y) {
    return StatusOf(y) == "STATUS_PAUSED" && CondIs(y, "CommitFailed", "True");
  }, 30s, "PAUSED with CommitFailed", &x));
  EXPECT_EQ(CondReason(x, "CommitFailed"), "StoreUnavailable");
  EXPECT_FALSE(CondMessage(x, "CommitFailed").empty());
  json snap = StatusField(x, "latestSnapshot");
  ASSERT_TRUE(snap.is_object());
  EXPECT_EQ(snap.value("nodeName", ""), a->node);
  EXPECT_EQ(snap.value("location", ""), LocalSnapshots(*a, "st") + "/" + snap.value("id", ""));
  EXPECT_TRUE(fs::exists(snap.value("location", "") + "/manifest.json"));
  ExpectAllWorkersFree(a->node);

  Patch("st", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("st", "STATUS_RUNNING", 30s, &x));
  EXPECT_GE(Counter(*a, "st"), before);
}

// 9. Data snapshots (spec.snapshots: Data, dataDirs [/data], /data a bind mount of a host
// directory). The counter keeps its count in /data and logs every boot there. A Data pause
// archives /data from the frozen sandbox and deletes the sandbox; the resume unpacks the
// archive over the host directory (emptied here while paused, so that only the archive can
// bring the data back) and boots fresh: the process restarted, the count continued.
class DataSnapshotTest : public NodeAgentTest {
 protected:
  void SetUp() override {
    NodeAgentTest::SetUp();
    host_data_ = work_.path() / "host-data";
    fs::create_directories(host_data_);
    // Each write is a rename, so a freeze never catches a half-written count.
    data_bundle_ = std::make_unique<Bundle>(std::vector<std::string>{
        "/bin/sh", "-c",
        "echo boot >> /data/boots; i=$(cat /data/count 2>/dev/null || echo 0); "
        "while true; do i=$((i+1)); echo $i > /data/count.new; mv /data/count.new /data/count; "
        "echo $i > /tmp/counter; sleep 0.1; done"});
    fs::create_symlink("busybox", data_bundle_->dir() / "rootfs" / "bin" / "mv");
    json config = json::parse(ReadFile(data_bundle_->dir() / "config.json"));
    config["mounts"].push_back({{"destination", "/data"}, {"type", "bind"}, {"source", host_data_.string()},
                                {"options", {"rbind", "rw"}}});
    std::ofstream(data_bundle_->dir() / "config.json") << config.dump(2);
  }

  json DataSpec(const std::string& node, const std::string& data_dir = "/data") {
    return {{"bundle", data_bundle_->dir().string()},
            {"nodeName", node},
            {"desiredState", "Running"},
            {"snapshots", {{"onPause", "Data"}, {"onCommit", "Data"}, {"dataDirs", {data_dir}}}}};
  }

  long HostCount() {
    try {
      return std::stol(ReadFile(host_data_ / "count"));
    } catch (...) {
      return -1;
    }
  }
  int Boots() {
    const std::string b = ReadFile(host_data_ / "boots");
    return static_cast<int>(std::count(b.begin(), b.end(), '\n'));
  }
  // What a fresh boot without the archive would find: nothing of the data, and a stray file.
  void WipeHostData() {
    for (const auto& e : fs::directory_iterator(host_data_)) fs::remove_all(e.path());
    std::ofstream(host_data_ / "stray") << "not in the snapshot\n";
  }

  void TearDown() override {
    NodeAgentTest::TearDown();
    for (const auto& m : mounts_) umount2(m.c_str(), MNT_DETACH);
  }

  fs::path host_data_;
  std::unique_ptr<Bundle> data_bundle_;
  std::vector<fs::path> mounts_;  // tmpfs mounts this test made, unmounted after the agents stop
};

TEST_F(DataSnapshotTest, PauseKeepsTheDataAndBootsFresh) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("dc", DataSpec(a->node));
  json x;
  ASSERT_TRUE(WaitStatus("dc", "STATUS_RUNNING", 30s, &x));
  WaitCounter(*a, "dc", 10);
  EXPECT_EQ(Boots(), 1);

  Patch("dc", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("dc", "STATUS_PAUSED", 30s, &x));
  ExpectAllWorkersFree(a->node);
  json snap = StatusField(x, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << x["status"].dump();
  EXPECT_EQ(snap.value("scope", ""), "Data");
  EXPECT_EQ(snap.value("nodeName", ""), a->node);
  EXPECT_FALSE(snap.value("cudaCheckpointed", true));
  const std::string location = snap.value("location", "");
  const json manifest = json::parse(ReadFile(location + "/manifest.json"));
  EXPECT_EQ(manifest.value("scope", ""), "Data");
  std::set<std::string> files;
  for (const auto& f : manifest["files"]) {
    files.insert(f.value("path", ""));
    EXPECT_EQ(f.value("sha256", "").size(), 64u) << f.dump();
  }
  EXPECT_EQ(files, (std::set<std::string>{"data-0.tar", "data-dirs.json"}));
  EXPECT_THAT(ProcessesMentioning(RunDir(*a, "dc")), ::testing::IsEmpty()) << "the sandbox still runs";
  const long at_pause = HostCount();
  ASSERT_GE(at_pause, 10);
  WipeHostData();

  Patch("dc", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("dc", "STATUS_RUNNING", 30s, &x));
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("booted from the bundle with the data of snapshot " +
                                                 snap.value("id", "")));
  const long after = WaitCounter(*a, "dc", at_pause + 1);
  EXPECT_GT(after, at_pause) << "the count did not continue from the snapshot's data";
  EXPECT_EQ(Boots(), 2) << "a Data resume boots the process fresh";
  EXPECT_FALSE(fs::exists(host_data_ / "stray")) << "the directory was not replaced by the archive";
}

TEST_F(DataSnapshotTest, DataSuspendResumesOnAnotherNode) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  Agent* b = StartAgent(Node("b"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CreateActor("dm", DataSpec(a->node));
  json x;
  ASSERT_TRUE(WaitStatus("dm", "STATUS_RUNNING", 30s, &x));
  WaitCounter(*a, "dm", 10);

  Patch("dm", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("dm", "STATUS_SUSPENDED", 30s, &x));
  json snap = StatusField(x, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << x["status"].dump();
  EXPECT_EQ(snap.value("scope", ""), "Data");
  EXPECT_EQ(snap.value("nodeName", ""), "");
  EXPECT_EQ(snap.value("location", ""), Committed(store_, "dm") + "/" + snap.value("id", ""));
  EXPECT_TRUE(fs::exists(snap.value("location", "") + "/data-0.tar"));
  EXPECT_THAT(LocalSnapshotsAfterCommit(*a, "dm"), ::testing::IsEmpty()) << "local copy kept after commit";
  ExpectAllWorkersFree(a->node);
  const long at_suspend = HostCount();
  ASSERT_GE(at_suspend, 10);
  WipeHostData();

  Patch("dm", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("dm", "STATUS_RUNNING", 30s, &x));
  EXPECT_EQ(StatusField(x, "nodeName"), json(b->node));
  ExpectHeldBy(b->node, "dm", x);
  const long after = WaitCounter(*b, "dm", at_suspend + 1);
  EXPECT_GT(after, at_suspend);
  EXPECT_EQ(Boots(), 2);
  EXPECT_FALSE(fs::exists(host_data_ / "stray"));
}

// An archive that fails (the node's snapshot directory is a 16 MiB tmpfs; the data directory
// holds 40 MiB of random bytes, so tar meets ENOSPC): DataArchiveFailed, the sandbox is thawed,
// the actor keeps RUNNING and counting, no partial image is left, the worker stays held.
TEST_F(DataSnapshotTest, FailedArchiveThawsAndKeepsRunning) {
  const fs::path root = work_.path() / "root-a";
  fs::create_directories(root);
  ASSERT_EQ(mount("tmpfs", root.c_str(), "tmpfs", 0, "size=16m"), 0) << std::strerror(errno);
  mounts_.push_back(root);
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::ofstream big(host_data_ / "big", std::ios::binary);
    std::vector<char> buf(1 << 20);
    for (int i = 0; i < 40; ++i) {
      random.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      big.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
  }
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->root, root.string());
  CreateActor("fa", DataSpec(a->node));
  json x;
  ASSERT_TRUE(WaitStatus("fa", "STATUS_RUNNING", 30s, &x));
  const long before = WaitCounter(*a, "fa", 5);
  Patch("fa", {{"desiredState", "Paused"}});
  // Back to RUNNING with the condition after each failed attempt, and retried with backoff
  // (1 s, 2 s, …): a poll may first meet a retry's PAUSING, which still carries the condition.
  ASSERT_TRUE(WaitActor(
      "fa",
      [](const json& y) { return CondIs(y, "CheckpointFailed", "True") && StatusOf(y) == "STATUS_RUNNING"; },
      30s, "RUNNING with CheckpointFailed", &x));
  EXPECT_EQ(CondReason(x, "CheckpointFailed"), "DataArchiveFailed");
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), HasSubstr("tar"));
  EXPECT_FALSE(StatusField(x, "latestSnapshot").is_object());
  ExpectHeldBy(a->node, "fa", x);
  // The user gives up on the pause. Once the agent has seen that, no retry is in flight or to
  // come, so what a failed attempt left behind can be checked without racing the next one.
  Patch("fa", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitActor(
      "fa",
      [](const json& y) {
        return StatusOf(y) == "STATUS_RUNNING" && y.contains("status") &&
               y["status"].value("observedGeneration", 0L) == y["metadata"].value("generation", -1L);
      },
      30s, "RUNNING at the new generation", &x));
  WaitCounter(*a, "fa", before + 10);  // thawed: it counts on
  EXPECT_THAT(PartialDirs(root / "snapshots"), ::testing::IsEmpty());
  EXPECT_THAT(Entries(LocalSnapshots(*a, "fa")), ::testing::IsEmpty());
  ExpectHeldBy(a->node, "fa", x);
}

// A dataDir in the container's own root filesystem (no bind mount) cannot be kept by a fresh
// boot: the pause is refused with the reason, the actor keeps running, nothing is frozen.
TEST_F(DataSnapshotTest, DataDirNotABindMountKeepsRunning) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("nb", DataSpec(a->node, "/tmp"));
  json x;
  ASSERT_TRUE(WaitStatus("nb", "STATUS_RUNNING", 30s, &x));
  const long before = WaitCounter(*a, "nb", 5);
  Patch("nb", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitActor("nb", [](const json& y) { return CondIs(y, "CheckpointFailed", "True"); }, 30s,
                        "CheckpointFailed", &x));
  EXPECT_EQ(StatusOf(x), "STATUS_RUNNING");
  EXPECT_EQ(CondReason(x, "CheckpointFailed"), "DataDirUnusable");
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), HasSubstr("/tmp"));
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), HasSubstr("root filesystem"));
  EXPECT_FALSE(StatusField(x, "latestSnapshot").is_object());
  ExpectHeldBy(a->node, "nb", x);
  WaitCounter(*a, "nb", before + 5);  // it runs on, not frozen
  EXPECT_THAT(PartialDirs(a->root + "/snapshots"), ::testing::IsEmpty());
}

}  // namespace
}  // namespace stasis::testing
