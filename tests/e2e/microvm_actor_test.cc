// `runtime: microvm` actors end to end: the real `stasis node` (with --microvm-accel, tcg unless
// STASIS_MICROVM_ACCEL says kvm; see tests/support/microvm.h) against a real kube-apiserver,
// running the Debian-kernel + busybox guest of hack/make-microvm-bundle.sh in real QEMU. The
// guest prints a counter on its serial console, which is the actor's log on the node: paused,
// resumed, suspended and resumed again, it must continue in the same boot. A QEMU killed while
// its snapshot is being written must leave the actor cleaned (no QEMU, no run directory, no
// partial snapshot, its worker free) with a condition saying why, and never be retried. A GPU
// micro-VM actor is refused with its reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/subprocess.h"
#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/microvm.h"
#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"
#include "reconcilers/node/sandbox_id.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Clock = std::chrono::steady_clock;

const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";
constexpr auto kPoll = 150ms;
// Software emulation on a shared 2-core machine: a boot or a restore takes seconds, not ms.
constexpr auto kTransition = 120s;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json StatusField(const json& a, const std::string& field) {
  if (!a.is_object() || !a.contains("status") || !a["status"].is_object()) return nullptr;
  return a["status"].value(field, json(nullptr));
}

std::string StatusOf(const json& a) {
  json s = StatusField(a, "status");
  return s.is_string() ? s.get<std::string>() : "";
}

json Cond(const json& a, const std::string& type) {
  json conds = StatusField(a, "conditions");
  if (!conds.is_array()) return nullptr;
  for (const auto& c : conds) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

std::string CondField(const json& a, const std::string& type, const std::string& field) {
  json c = Cond(a, type);
  return c.is_object() ? c.value(field, "") : "";
}

// Live (non-zombie) processes whose command line mentions `needle`.
std::vector<std::string> ProcessesMentioning(const std::string& needle) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    if (std::to_string(getpid()) == pid) continue;
    std::string cmd = ReadFile(e.path() / "cmdline");
    if (cmd.empty()) continue;  // a zombie or a kernel thread
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(pid + ": " + cmd.substr(0, 200));
  }
  return out;
}

// Every file named `name` under `root`.
std::vector<fs::path> FilesNamed(const fs::path& root, const std::string& name) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() == name) out.push_back(it->path());
  }
  return out;
}

class MicrovmActorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(kStasis)) << kStasis << " is not built";
    (void)PinnedRunsc();
    (void)MicrovmTestBundle();
    ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
  }

  MicrovmActorTest() : work_("stasis-e2e-microvm-") {}

  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string kebab;
    for (char ch : name) {
      if (std::isupper(static_cast<unsigned char>(ch)) && !kebab.empty()) kebab += '-';
      kebab += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    ns_ = "e2e-vm-" + kebab.substr(0, 20);
    while (ns_.back() == '-') ns_.pop_back();
    auto r = Kubectl({"create", "namespace", ns_});
    ASSERT_TRUE(r.success()) << r.err;
    node_ = ns_ + "-a";
    root_ = (work_.path() / "root").string();
    StartAgent();
  }

  // Starts `stasis node` (again: same node, root and store) and waits until it is ready.
  void StartAgent() {
    const std::string log =
        (work_.path() / ("agent-" + std::to_string(++agents_started_) + ".log")).string();
    agent_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{kStasis,
                                 "node",
                                 "--kubeconfig",
                                 ControlPlane::Get().kubeconfig(),
                                 "--node-name",
                                 node_,
                                 "--runsc",
                                 PinnedRunsc(),
                                 "--root",
                                 root_,
                                 "--workers",
                                 "2",
                                 "--metrics-addr",
                                 "127.0.0.1:0",
                                 "--snapshot-store",
                                 (work_.path() / "store").string(),
                                 "--shutdown-grace",
                                 "5",
                                 "--microvm-accel",
                                 MicrovmTestAccel(),
                                 "--bundle-root",
                                 fs::path(MicrovmTestBundle()).parent_path().string()},
        log);
    const auto start = Clock::now();
    while (Clock::now() - start < 30s) {
      if (agent_->Log().find("node agent ready node=" + node_) != std::string::npos) return;
      ASSERT_TRUE(agent_->Running()) << agent_->LogTail();
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "agent did not become ready:\n" << agent_->LogTail();
  }

  // The agent's /metrics (its port from its log line "serving metrics … port=N").
  std::string Scrape() { return ScrapeMetrics(agent_->Log()); }

  static double Sample(const std::string& metrics, const std::string& name,
                       const std::vector<std::string>& labels) {
    // The sum over every series with these labels (others, e.g. scope, are summed over), or -1
    // when none has them.
    std::istringstream in(metrics);
    double sum = -1;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(name + "{", 0) != 0) continue;
      const std::string set = line.substr(0, line.find('}') + 1);
      if (!std::all_of(labels.begin(), labels.end(),
                       [&](const std::string& l) { return set.find(l) != std::string::npos; })) {
        continue;
      }
      sum = std::max(sum, 0.0) + std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  long QemuPid(const std::string& actor) {
    std::ifstream in(RunDir(actor) + "/qemu.pid");
    long pid = 0;
    in >> pid;
    return pid;
  }

  void TearDown() override {
    const auto start = Clock::now();
    Kubectl({"delete", "actors", "--all", "-n", ns_, "--wait=false"});
    while (Clock::now() - start < 30s && !ListActors().empty()) std::this_thread::sleep_for(kPoll);
    if (agent_) agent_->Stop(10s);
    for (const auto& item : ListActors()) {
      Kubectl({"patch", "actor", item["metadata"].value("name", ""), "-n", ns_, "--type=merge",
               "-p", R"({"metadata":{"finalizers":null}})"});
    }
    // A QEMU the agent could not delete must not outlive the test (its argv names our root).
    for (const auto& p : ProcessesMentioning(work_.path().string())) {
      ADD_FAILURE() << "left behind: " << p;
      kill(static_cast<pid_t>(std::stol(p.substr(0, p.find(':')))), SIGKILL);
    }
    Kubectl({"delete", "workers", "-l", "stasis.dev/node=" + node_, "--wait=false"});
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

  std::string Id(const std::string& actor) const { return SandboxIdFor(ns_, actor); }
  std::string RunDir(const std::string& actor) const { return root_ + "/run/" + Id(actor); }
  std::string ConsoleLog(const std::string& actor) const {
    return root_ + "/logs/" + Id(actor) + ".log";
  }

  void CreateActor(const std::string& name, json spec) {
    spec["runtime"] = "microvm";
    spec["nodeName"] = node_;
    if (!spec.contains("bundle")) spec["bundle"] = MicrovmTestBundle();
    spec["timeouts"] = {{"checkpointSeconds", 120}, {"restoreSeconds", 120}};
    json actor = {{"apiVersion", "stasis.dev/v1alpha1"},
                  {"kind", "Actor"},
                  {"metadata", {{"name", name}, {"namespace", ns_}}},
                  {"spec", spec}};
    auto r = Kubectl({"create", "-f", "-"}, actor.dump());
    ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
  }

  void Patch(const std::string& name, const json& spec) {
    auto r = Kubectl(
        {"patch", "actor", name, "-n", ns_, "--type=merge", "-p", json{{"spec", spec}}.dump()});
    ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
  }

  json GetActor(const std::string& name) {
    auto r = Kubectl({"get", "actor", name, "-n", ns_, "-o", "json"});
    if (!r.success()) return nullptr;
    return json::parse(r.out);
  }

  bool WaitStatus(const std::string& name, const std::string& status, json* out = nullptr) {
    const auto start = Clock::now();
    json last;
    while (Clock::now() - start < kTransition) {
      last = GetActor(name);
      if (StatusOf(last) == status) {
        if (out) *out = last;
        return true;
      }
      std::this_thread::sleep_for(kPoll);
    }
    if (out) *out = last;
    ADD_FAILURE() << name << " not " << status << "; last seen:\n"
                  << (last.is_object() && last.contains("status") ? last["status"].dump(2)
                                                                  : last.dump())
                  << "\n"
                  << agent_->LogTail(4000);
    return false;
  }

  long WaitCount(const std::string& actor, long at_least) {
    const auto start = Clock::now();
    long n = -1;
    while (Clock::now() - start < kTransition) {
      n = LastCount(ConsoleLog(actor));
      if (n >= at_least) return n;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << actor << ": count did not reach " << at_least << " (last " << n << ")\n"
                  << ReadFile(ConsoleLog(actor)).substr(0, 2000);
    return n;
  }

  // Given back right after the PAUSED/SUSPENDED write (off the pause's path): up to 10 s.
  void ExpectAllWorkersFree() {
    for (int i = 0; i < 100; ++i) {
      auto w = Kubectl({"get", "workers", "-l", "stasis.dev/node=" + node_, "-o",
                        "jsonpath={.items[*].status.phase}"});
      if (w.success() && !w.out.empty() && w.out.find("Held") == std::string::npos) break;
      std::this_thread::sleep_for(100ms);
    }
    auto r = Kubectl({"get", "workers", "-l", "stasis.dev/node=" + node_, "-o", "json"});
    ASSERT_TRUE(r.success()) << r.err;
    auto items = json::parse(r.out).value("items", json::array());
    EXPECT_FALSE(items.empty());
    for (const auto& w : items) {
      EXPECT_EQ(w.value("status", json::object()).value("phase", ""), "Free") << w.dump();
    }
  }

  TempDir work_;
  std::string ns_, node_, root_;
  std::unique_ptr<BackgroundProcess> agent_;
  int agents_started_ = 0;
};

TEST_F(MicrovmActorTest, PausedSuspendedAndResumedTheCounterContinues) {
  CreateActor("vm", json::object());
  json actor;
  ASSERT_TRUE(WaitStatus("vm", "STATUS_RUNNING", &actor));
  EXPECT_EQ(CondField(actor, "Ready", "status"), "True") << actor["status"].dump();
  const long before = WaitCount("vm", 3);

  Patch("vm", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("vm", "STATUS_PAUSED", &actor));
  ExpectAllWorkersFree();
  json snap = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << actor["status"].dump();
  EXPECT_EQ(snap.value("trigger", ""), "Pause");
  EXPECT_THAT(snap.value("runscVersion", ""),
              ::testing::StartsWith("qemu-"));  // the runtime's version
  EXPECT_GT(snap.value("sizeBytes", 0), 1 << 20);
  const std::string location = snap.value("location", "");
  EXPECT_TRUE(fs::exists(location + "/manifest.json")) << location;
  EXPECT_TRUE(fs::exists(location + "/vm.state")) << location;
  EXPECT_THAT(ProcessesMentioning("-name " + Id("vm") + " "), IsEmpty())
      << "the paused VM still runs";
  const long paused_at = LastCount(ConsoleLog("vm"));
  EXPECT_GE(paused_at, before);

  Patch("vm", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("vm", "STATUS_RUNNING", &actor));
  EXPECT_THAT(CondField(actor, "Ready", "message"), HasSubstr(snap.value("id", "")));
  WaitCount("vm", paused_at + 3);

  Patch("vm", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("vm", "STATUS_SUSPENDED", &actor));
  ExpectAllWorkersFree();
  json committed = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(committed.is_object());
  EXPECT_EQ(committed.value("trigger", ""), "Suspend");
  const long suspended_at = LastCount(ConsoleLog("vm"));

  Patch("vm", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("vm", "STATUS_RUNNING", &actor));
  EXPECT_GE(WaitCount("vm", suspended_at + 3), suspended_at + 3);
  // Resumed twice, booted once: the counter continued rather than restarted.
  EXPECT_EQ(BootCount(ConsoleLog("vm")), 1) << ReadFile(ConsoleLog("vm")).substr(0, 3000);

  // The same metrics as a gVisor actor's: two checkpoints, two restores, one commit, two sizes.
  const std::string m = Scrape();
  ASSERT_FALSE(m.empty()) << agent_->LogTail();
  const std::string ops = "stasis_snapshot_operations_total";
  EXPECT_EQ(Sample(m, ops, {R"(operation="checkpoint")", R"(result="success")"}), 2) << m;
  EXPECT_EQ(Sample(m, ops, {R"(operation="restore")", R"(result="success")"}), 2) << m;
  EXPECT_EQ(Sample(m, ops, {R"(operation="commit")", R"(result="success")"}), 1) << m;
  for (const char* trigger : {R"(trigger="Pause")", R"(trigger="Suspend")"}) {
    EXPECT_EQ(Sample(m, "stasis_snapshot_size_bytes_count", {trigger, R"(gpu="false")"}), 1) << m;
    EXPECT_EQ(Sample(m, "stasis_snapshot_duration_seconds_count",
                     {R"(operation="restore")", trigger, R"(gpu="false")", R"(result="success")"}),
              1)
        << m;
  }
}

TEST_F(MicrovmActorTest, AgentRestartFindsTheRunningVm) {
  CreateActor("vm", json::object());
  ASSERT_TRUE(WaitStatus("vm", "STATUS_RUNNING"));
  const long before = WaitCount("vm", 2);
  const long pid = QemuPid("vm");
  ASSERT_GT(pid, 0);

  // SIGKILL: no shutdown path runs; the VM is in its own session and must survive.
  agent_->Kill(SIGKILL);
  ASSERT_TRUE(agent_->Wait(10s).has_value());
  EXPECT_EQ(kill(static_cast<pid_t>(pid), 0), 0) << "the VM died with its agent";
  StartAgent();
  if (HasFatalFailure()) return;
  // The new agent keeps it (start-up recovery deletes only sandboxes not ours) and checks it.
  WaitCount("vm", before + 4);
  EXPECT_EQ(StatusOf(GetActor("vm")), "STATUS_RUNNING");
  EXPECT_EQ(QemuPid("vm"), pid);

  Patch("vm", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("vm", "STATUS_PAUSED"));
  EXPECT_THAT(ProcessesMentioning("-name " + Id("vm") + " "), IsEmpty());
  EXPECT_EQ(BootCount(ConsoleLog("vm")), 1);
}

TEST_F(MicrovmActorTest, VmOfAnActorDeletedWhileTheAgentWasAwayIsRemovedAtStartup) {
  CreateActor("vm", json::object());
  ASSERT_TRUE(WaitStatus("vm", "STATUS_RUNNING"));
  const long pid = QemuPid("vm");
  ASSERT_GT(pid, 0);
  agent_->Kill(SIGKILL);
  ASSERT_TRUE(agent_->Wait(10s).has_value());
  // Gone from the API while no agent could finalize it (a forced delete).
  Kubectl({"patch", "actor", "vm", "-n", ns_, "--type=merge", "-p",
           R"({"metadata":{"finalizers":null}})"});
  Kubectl({"delete", "actor", "vm", "-n", ns_, "--wait=true", "--timeout=30s"});
  ASSERT_TRUE(GetActor("vm").is_null());
  EXPECT_EQ(kill(static_cast<pid_t>(pid), 0), 0) << "the VM should have outlived its agent";

  // The returning agent does not know the runtime of a sandbox whose actor is gone: every
  // driver deletes what it finds.
  StartAgent();
  if (HasFatalFailure()) return;
  const auto until = Clock::now() + 30s;
  while (fs::exists(RunDir("vm")) && Clock::now() < until) std::this_thread::sleep_for(kPoll);
  EXPECT_FALSE(fs::exists(RunDir("vm"))) << agent_->LogTail();
  EXPECT_THAT(ProcessesMentioning("-name " + Id("vm") + " "), IsEmpty());
  ExpectAllWorkersFree();
}

TEST_F(MicrovmActorTest, QemuKilledMidSnapshotIsCleanedAndNotRetried) {
  CreateActor("vm", json::object());
  ASSERT_TRUE(WaitStatus("vm", "STATUS_RUNNING"));
  WaitCount("vm", 2);
  const long pid = QemuPid("vm");
  ASSERT_GT(pid, 0);

  // Kill QEMU as soon as its migration stream file appears under the node's snapshots.
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    const auto until = Clock::now() + kTransition;
    while (Clock::now() < until) {
      if (!FilesNamed(root_ + "/snapshots", "vm.state").empty()) {
        killed = kill(static_cast<pid_t>(pid), SIGKILL) == 0;
        return;
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  Patch("vm", {{"desiredState", "Paused"}});
  json actor;
  const bool failed = WaitStatus("vm", "STATUS_FAILED", &actor);
  killer.join();
  ASSERT_TRUE(killed) << "the snapshot stream never appeared";
  ASSERT_TRUE(failed);
  EXPECT_EQ(CondField(actor, "CheckpointFailed", "status"), "True") << actor["status"].dump(2);
  EXPECT_EQ(CondField(actor, "CheckpointFailed", "reason"), "ContainerStopped")
      << actor["status"].dump(2);
  EXPECT_THAT(CondField(actor, "CheckpointFailed", "message"), HasSubstr("the VM is not running"));
  EXPECT_EQ(CondField(actor, "Ready", "status"), "False");
  EXPECT_FALSE(StatusField(actor, "workerName").is_string());
  EXPECT_FALSE(StatusField(actor, "latestSnapshot").is_object());
  EXPECT_FALSE(fs::exists(RunDir("vm"))) << "the VM's run directory was not cleaned";
  EXPECT_THAT(ProcessesMentioning("-name " + Id("vm") + " "), IsEmpty());
  EXPECT_THAT(FilesNamed(root_ + "/snapshots", "vm.state"), IsEmpty())
      << "the partial image was kept";
  ExpectAllWorkersFree();

  // Never retried: a second checkpoint would log a second checkpoint call for the sandbox.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(StatusOf(GetActor("vm")), "STATUS_FAILED");
  const std::string log = agent_->Log();
  size_t calls = 0;
  for (auto at = log.find("op=checkpoint sandbox=" + Id("vm")); at != std::string::npos;
       at = log.find("op=checkpoint sandbox=" + Id("vm"), at + 1)) {
    ++calls;
  }
  EXPECT_EQ(calls, 1u) << agent_->LogTail(4000);
  EXPECT_EQ(Sample(Scrape(), "stasis_snapshot_operations_total",
                   {R"(operation="checkpoint")", R"(reason="container_stopped")"}),
            1);
}

TEST_F(MicrovmActorTest, GpuMicrovmActorIsRefusedWithItsReason) {
  CreateActor("gpu-vm", {{"gpu", {{"count", 1}}}});
  json actor;
  ASSERT_TRUE(WaitStatus("gpu-vm", "STATUS_FAILED", &actor));
  EXPECT_EQ(CondField(actor, "Ready", "reason"), "MicrovmGpuUnsupported")
      << actor["status"].dump(2);
  EXPECT_THAT(CondField(actor, "Ready", "message"), HasSubstr("not supported yet"));
  EXPECT_FALSE(fs::exists(RunDir("gpu-vm")));
  ExpectAllWorkersFree();
}

}  // namespace
}  // namespace stasis::testing
