// The dashboard and the rules against what stasis really exports: a real Prometheus scrapes a
// real `stasis controller` and two real `stasis node` agents (real runsc sandboxes) every
// second while actors are paused, suspended and resumed, one checkpoint fails for real (the
// sandbox is killed just before it: container_stopped, a forced cleanup of that reason) and one
// node agent is killed mid-SUSPENDING (forced cleanup node_lost by the controller, the agent
// down for Prometheus). Then every dashboard query (with Grafana's variables expanded) and
// every rule expression is evaluated over the run through Prometheus' HTTP API and must have
// data, except those listed in kMayBeEmpty with the reason; every rule evaluates without error;
// each process exports exactly the families docs/metrics.md lists for it; and
// hack/plot-snapshot-health.py renders the key panels from this Prometheus.
//
// STASIS_MONITORING_PLOTS_DIR=DIR writes the PNGs there instead of a temporary directory, and
// STASIS_MONITORING_EXTRA_CYCLES=N adds N pause/suspend/resume cycles for longer plots:
// docs/img/ is made that way (docs/monitoring.md says how).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/subprocess.h"
#include "reconcilers/node/sandbox_id.h"
#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/dashboard_checks.h"
#include "tests/support/grafana_dashboard.h"
#include "tests/support/metrics_reference.h"
#include "tests/support/prometheus_server.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";
const std::string kInjector = kSource + "/tests/support/runsc-fault-inject.sh";
const std::string kRules = kSource + "/manifests/monitoring/rules/stasis.rules.yaml";
const std::string kDashboard = kSource + "/manifests/monitoring/dashboards/stasis-snapshot-health.json";

// Queries that may legitimately have no data in this run, and why. Everything else must.
const std::map<std::string, std::string> kMayBeEmpty = [] {
  auto m = MayBeEmptyInABundleRun("mon-a");
  m["StasisActorStuck"] =
      "the controller cleans a stuck actor on its next look (within 5 s) and samples "
      "stasis_actors_stuck every 5 s; whether a sample falls in that window is chance, and the "
      "alert needs it above 0";
  return m;
}();

// Families whose series are per template: a run without an ActorTemplate has none (kNoTemplate).
const std::set<std::string> kPerTemplateFamilies = {"stasis_warm_pool_ready", "stasis_warm_pool_claims_total"};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One `stasis node`: its node, root, metrics port (fixed across restarts so Prometheus sees
// one target go down and come back), and process.
struct Agent {
  std::string node;
  std::string root;
  int port = 0;
  std::unique_ptr<BackgroundProcess> proc;
};

class MonitoringTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(kStasis)) << kStasis << " is not built";
    (void)PinnedRunsc();
    ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
  }

  MonitoringTest() : work_("stasis-e2e-mon-") {}

  void SetUp() override {
    bundle_ = std::make_unique<Bundle>(CounterArgs());
    ASSERT_EQ(Kubectl({"create", "namespace", ns_}).exit_code, 0);
  }

  void TearDown() override {
    // Release held checkpoints, and end the held wrappers that outlived the killed agent.
    std::ofstream(work_.path() / "release") << "release\n";
    Kubectl({"delete", "actors", "--all", "-n", ns_, "--wait=false"});
    for (auto& [n, a] : agents_) {
      if (a.proc) a.proc->Stop(5s);
    }
    if (controller_) controller_->Stop(5s);
    for (const auto& line : Lines(ReadFile(InjectLog()))) {
      const auto p = line.find("pid=");
      if (p == std::string::npos) continue;
      const long pid = std::atol(line.c_str() + p + 4);
      std::string cmd = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      if (pid > 0 && cmd.find(work_.path().string()) != std::string::npos) kill(-static_cast<pid_t>(pid), SIGKILL);
    }
    for (auto& [n, a] : agents_) {
      const fs::path run = fs::path(a.root) / "run";
      std::error_code ec;
      if (!fs::exists(run, ec)) continue;
      for (const auto& e : fs::directory_iterator(run, ec)) {
        (void)RunCommand({PinnedRunsc(), "-root", e.path().string(), "delete", "-force",
                          e.path().filename().string()},
                         60s);
        umount2((e.path() / "null-netns").c_str(), MNT_DETACH);
      }
    }
    for (const auto& item : Actors()) {
      Kubectl({"patch", "actor", item.first, "-n", ns_, "--type=merge", "-p", R"({"metadata":{"finalizers":null}})"});
    }
    for (auto& [n, a] : agents_) Kubectl({"delete", "workers", "-l", "stasis.dev/node=" + n, "--wait=false"});
    Kubectl({"delete", "namespace", ns_, "--wait=false"});
  }

  static std::vector<std::string> Lines(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

  CommandResult Kubectl(const std::vector<std::string>& args, const std::string& in = "") {
    return ControlPlane::Get().Kubectl(args, in);
  }

  std::string InjectLog() const { return (work_.path() / "inject-calls.log").string(); }

  // Starts (or restarts, on the same root and port) the agent of `node` and waits until ready.
  // `mode`: the fault injector's mode for actors listed in the node's arm file, or "" for the
  // real runsc directly.
  void StartAgent(const std::string& node, int workers, const std::string& mode) {
    Agent& a = agents_[node];
    a.node = node;
    if (a.root.empty()) a.root = (work_.path() / node).string();
    if (a.port == 0) a.port = FreeLoopbackPort();
    std::vector<std::string> env;
    if (!mode.empty()) {
      env = {"STASIS_INJECT_RUNSC=" + PinnedRunsc(), "STASIS_INJECT_MODE=" + mode,
             "STASIS_INJECT_LOG=" + InjectLog(), "STASIS_INJECT_ARM_FILE=" + ArmFile(node),
             "STASIS_INJECT_RELEASE_FILE=" + (work_.path() / "release").string(), "STASIS_INJECT_HOLD_S=60"};
    }
    const std::string log = (work_.path() / (node + "-" + std::to_string(++starts_) + ".log")).string();
    a.proc = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{kStasis, "node", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                 "--node-name", node, "--runsc", mode.empty() ? PinnedRunsc() : kInjector,
                                 "--root", a.root, "--snapshot-store", (work_.path() / "store").string(),
                                 "--workers", std::to_string(workers), "--metrics-addr",
                                 "127.0.0.1:" + std::to_string(a.port), "--heartbeat-period", "1",
                                 "--heartbeat-lease-duration", "4", "--shutdown-grace", "5",
                                 "--bundle-root", TestBundleRoot().string()},
        log, env);
    const auto end = Clock::now() + 30s;
    while (Clock::now() < end && a.proc->Running()) {
      if (a.proc->Log().find("node agent ready node=" + node) != std::string::npos) return;
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << "agent " << node << " did not become ready:\n" << a.proc->LogTail();
  }

  std::string ArmFile(const std::string& node) const { return (work_.path() / ("armed-" + node)).string(); }
  void Arm(const std::string& node, const std::string& actor) {
    std::ofstream(ArmFile(node), std::ios::app) << SandboxIdFor(ns_, actor) << "\n";
  }

  void StartController() {
    controller_port_ = FreeLoopbackPort();
    controller_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{kStasis, "controller", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                 "--metrics-addr", "127.0.0.1:" + std::to_string(controller_port_), "--grace",
                                 "2", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline",
                                 "3s", "--leader-elect-retry-period", "1s"},
        (work_.path() / "controller.log").string());
  }

  void CreateActor(const std::string& name, const std::string& node, int checkpoint_timeout = 120) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec",
               {{"bundle", bundle_->dir().string()},
                {"nodeName", node},
                {"desiredState", "Running"},
                {"timeouts", {{"checkpointSeconds", checkpoint_timeout}, {"restoreSeconds", 60}}}}}};
    auto r = Kubectl({"apply", "-f", "-"}, a.dump());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  void SetDesired(const std::string& name, const std::string& desired) {
    auto r = Kubectl({"patch", "actor", name, "-n", ns_, "--type", "merge", "-p",
                      json{{"spec", {{"desiredState", desired}}}}.dump()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  std::map<std::string, json> Actors() {
    std::map<std::string, json> out;
    auto r = Kubectl({"get", "actors", "-n", ns_, "-o", "json"});
    json list = json::parse(r.out, nullptr, false);
    if (list.is_object()) {
      for (auto& item : list["items"]) out[item["metadata"]["name"]] = item;
    }
    return out;
  }

  std::string StatusOf(const std::string& name) {
    auto all = Actors();
    auto it = all.find(name);
    if (it == all.end()) return "<gone>";
    return it->second.value("/status/status"_json_pointer, std::string());
  }

  // Waits until `name` has `status`; on a timeout prints the processes' logs.
  bool WaitStatus(const std::string& name, const std::string& status, std::chrono::seconds deadline = 60s) {
    const auto end = Clock::now() + deadline;
    while (Clock::now() < end) {
      if (StatusOf(name) == status) return true;
      std::this_thread::sleep_for(150ms);
    }
    std::cerr << name << " is " << StatusOf(name) << ", not " << status << "\n";
    if (controller_) std::cerr << "--- controller\n" << controller_->LogTail();
    for (auto& [n, a] : agents_) {
      if (a.proc) std::cerr << "--- " << n << "\n" << a.proc->LogTail();
    }
    return false;
  }

  void Cycle(const std::string& name) {
    for (const auto& [desired, status] :
         std::vector<std::pair<std::string, std::string>>{{"Paused", "STATUS_PAUSED"},
                                                          {"Running", "STATUS_RUNNING"},
                                                          {"Suspended", "STATUS_SUSPENDED"},
                                                          {"Running", "STATUS_RUNNING"}}) {
      SetDesired(name, desired);
      ASSERT_TRUE(WaitStatus(name, status)) << name << " → " << desired;
    }
  }

  TempDir work_;
  std::string ns_ = "mon";
  std::unique_ptr<Bundle> bundle_;
  std::map<std::string, Agent> agents_;
  std::unique_ptr<BackgroundProcess> controller_;
  int controller_port_ = 0;
  int starts_ = 0;
};

// The families a Prometheus holds for `job` at `time`, by family name (histograms' _bucket,
// _sum and _count folded into their family; Prometheus' own per-target series left out).
std::set<std::string> FamiliesOf(const PrometheusServer& prom, const std::string& job, double time,
                                 const MetricsReference& doc) {
  std::set<std::string> out;
  auto r = prom.Query("count by (__name__) ({job=\"" + job + "\"})", time);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return out;
  for (const auto& s : (*r)["result"]) {
    std::string name = s["metric"].value("__name__", "");
    if (name == "up" || name.rfind("scrape_", 0) == 0) continue;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string suf = suffix;
      if (!doc.families.count(name) && name.size() > suf.size() &&
          name.compare(name.size() - suf.size(), suf.size(), suf) == 0) {
        const std::string base = name.substr(0, name.size() - suf.size());
        if (doc.families.count(base)) name = base;
      }
    }
    out.insert(name);
  }
  return out;
}

// Every panel query (for all nodes and, where it has $node, for mon-a) and every rule
// expression, at a 1 s scrape interval.
std::vector<QueryCheck> ChecksFor(const Dashboard& dashboard, double run_s) {
  return DashboardAndRuleChecks(dashboard, kRules, "mon-a", run_s, 1);
}

// The alerts (pending or firing) Prometheus had between start and end.
std::set<std::string> AlertsBetween(const PrometheusServer& prom, double start, double end) {
  std::set<std::string> out;
  auto alerts = prom.QueryRange("max by (alertname, alertstate) (ALERTS)", start, end, 1);
  if (!alerts.ok()) return out;
  for (const auto& s : (*alerts)["result"]) out.insert(s["metric"].value("alertname", ""));
  return out;
}

// What this run must have produced and Prometheus does not show yet: checks without data that
// may not be empty, and the two alerts the run sets off.
std::vector<std::string> NotYetThere(const PrometheusServer& prom, const Dashboard& dashboard, double start,
                                     double end) {
  std::vector<std::string> missing;
  for (const auto& c : ChecksFor(dashboard, end - start)) {
    if (kMayBeEmpty.count(c.name)) continue;
    auto data = c.instant ? prom.Query(c.expr, end) : prom.QueryRange(c.expr, start, end, 1);
    if (!data.ok() || !HasFiniteSample(*data)) missing.push_back(c.name);
  }
  const auto alerts = AlertsBetween(prom, start, end);
  for (const char* a : {"StasisNodeAgentDown", "StasisSnapshotFailuresRising"}) {
    if (!alerts.count(a)) missing.push_back(a);
  }
  return missing;
}

TEST_F(MonitoringTest, EveryPanelQueryAndRuleHasDataFromARealRun) {
  const auto test_start = Clock::now();
  auto doc = LoadMetricsReference(kSource + "/docs/metrics.md");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  auto dashboard = LoadDashboard(kDashboard);
  ASSERT_TRUE(dashboard.ok()) << dashboard.status().message();

  // Ports first: Prometheus' configuration names the targets before they run.
  agents_["mon-a"].port = FreeLoopbackPort();
  agents_["mon-b"].port = FreeLoopbackPort();
  StartController();
  PrometheusOptions po;
  po.dir = work_.path() / "prometheus";
  po.rule_files = {kRules};
  po.targets = {{"stasis-node", "127.0.0.1:" + std::to_string(agents_["mon-a"].port), {{"node", "mon-a"}}},
                {"stasis-node", "127.0.0.1:" + std::to_string(agents_["mon-b"].port), {{"node", "mon-b"}}},
                {"stasis-controller", "127.0.0.1:" + std::to_string(controller_port_), {}}};
  auto prom = PrometheusServer::Start(po);
  ASSERT_NE(prom, nullptr) << "Prometheus (" << PrometheusServer::Binary() << ") did not start";
  const double start = UnixNow();

  // mon-a kills the sandbox of an armed actor just before its checkpoint; mon-b holds an armed
  // actor's checkpoint so its agent can be killed mid-SUSPENDING.
  ASSERT_NO_FATAL_FAILURE(StartAgent("mon-a", 3, "kill-checkpoint"));
  ASSERT_NO_FATAL_FAILURE(StartAgent("mon-b", 1, "hold-checkpoint"));
  // The first starts' histogram must be scraped at zero before they happen, or rate() never
  // sees them (a start takes less than a scrape interval).
  const auto scraped = Clock::now();
  for (bool both = false; !both && Clock::now() - scraped < 30s; std::this_thread::sleep_for(200ms)) {
    auto r = prom->Query("count(stasis_actor_start_seconds_count{kind=\"boot\"})", UnixNow());
    both = r.ok() && !(*r)["result"].empty() && (*r)["result"][0]["value"][1] == "2";
  }
  for (const auto& [name, node] : std::vector<std::pair<std::string, std::string>>{
           {"alpha", "mon-a"}, {"beta", "mon-a"}, {"crash", "mon-a"}, {"victim", "mon-b"}}) {
    CreateActor(name, node);
  }
  for (const char* name : {"alpha", "beta", "crash", "victim"}) ASSERT_TRUE(WaitStatus(name, "STATUS_RUNNING"));

  // Pauses, suspends (with commits) and resumes (restores from both kinds of snapshot).
  ASSERT_NO_FATAL_FAILURE(Cycle("alpha"));
  ASSERT_NO_FATAL_FAILURE(Cycle("beta"));
  ASSERT_NO_FATAL_FAILURE(Cycle("alpha"));

  // A checkpoint that fails for real: the sandbox dies just before it.
  Arm("mon-a", "crash");
  SetDesired("crash", "Paused");
  ASSERT_TRUE(WaitStatus("crash", "STATUS_FAILED"));

  // The forced cleanup: mon-b's agent dies while `victim` is SUSPENDING; after its 4 s
  // heartbeat lease the controller cleans the actor (node_lost). Prometheus sees the agent down
  // until it comes back on the same port.
  Arm("mon-b", "victim");
  SetDesired("victim", "Suspended");
  ASSERT_TRUE(WaitStatus("victim", "STATUS_SUSPENDING", 30s));
  agents_["mon-b"].proc->Kill(SIGKILL);
  agents_["mon-b"].proc->Wait(10s);
  ASSERT_TRUE(WaitStatus("victim", "STATUS_FAILED"));
  // A rule evaluation has seen the agent down (its alert pending) before the agent returns.
  bool seen_down = false;
  for (const auto until = Clock::now() + 60s; !seen_down && Clock::now() < until;) {
    auto down = prom->Query("ALERTS{alertname=\"StasisNodeAgentDown\"}", UnixNow());
    seen_down = down.ok() && HasFiniteSample(*down);
    if (!seen_down) std::this_thread::sleep_for(250ms);
  }
  ASSERT_TRUE(seen_down) << "Prometheus never evaluated StasisNodeAgentDown as pending";
  ASSERT_NO_FATAL_FAILURE(StartAgent("mon-b", 1, ""));

  // Life goes on after the incident; then the last gauges (every 5 s) and scrapes land.
  ASSERT_NO_FATAL_FAILURE(Cycle("beta"));
  // STASIS_MONITORING_EXTRA_CYCLES=N: N more cycles, alternating actors, for longer plots.
  if (const char* extra = std::getenv("STASIS_MONITORING_EXTRA_CYCLES"); extra && *extra) {
    for (int i = 0; i < std::atoi(extra); ++i) ASSERT_NO_FATAL_FAILURE(Cycle(i % 2 ? "beta" : "alpha"));
  }
  // The last gauges (every 5 s) and scrapes land: polled until every query that must have data
  // has it and both alerts went off, or a minute passed (the assertions below then say what
  // is missing).
  double end = UnixNow();
  for (const auto until = Clock::now() + 60s; Clock::now() < until; std::this_thread::sleep_for(1s)) {
    end = UnixNow();
    if (NotYetThere(*prom, *dashboard, start, end).empty()) break;
  }
  const double run_s = end - start;
  std::cout << "[ measure  ] scenario " << run_s << " s\n";

  // --- every rule loaded and evaluating without error ------------------------------------
  EXPECT_EQ(ExpectEveryRuleHealthy(*prom), 14);

  // --- the node variable lists both nodes ------------------------------------------------
  for (const auto& v : dashboard->variables) {
    if (v.type != "query") continue;
    ASSERT_EQ(v.query, "label_values(stasis_workers, node)") << "a variable query this test cannot run";
    auto values = prom->Api("label/node/values", {{"match[]", "stasis_workers"},
                                                  {"start", std::to_string(start)},
                                                  {"end", std::to_string(end)}});
    ASSERT_TRUE(values.ok()) << values.status().message();
    EXPECT_EQ(*values, json({"mon-a", "mon-b"})) << "$" << v.name;
  }

  // --- every panel query and rule expression has data ------------------------------------
  const std::vector<QueryCheck> checks = ChecksFor(*dashboard, run_s);
  ASSERT_FALSE(checks.empty());
  int with_data = 0;
  std::vector<std::string> empty;
  for (const auto& c : checks) {
    auto data = c.instant ? prom->Query(c.expr, end) : prom->QueryRange(c.expr, start, end, 1);
    ASSERT_TRUE(data.ok()) << c.name << ": " << data.status().message() << "\n" << c.expr;
    if (HasFiniteSample(*data)) {
      ++with_data;
      continue;
    }
    empty.push_back(c.name);
    EXPECT_TRUE(kMayBeEmpty.count(c.name)) << c.name << " has no data in the run:\n" << c.expr;
  }
  std::cout << "[ measure  ] queries with data: " << with_data << " of " << checks.size() << "\n";
  for (const auto& e : empty) {
    std::cout << "[ no data  ] " << e << (kMayBeEmpty.count(e) ? " (allowed: " + kMayBeEmpty.at(e) + ")" : "") << "\n";
  }

  // --- the alerts that this run should set off did ---------------------------------------
  auto alerts = prom->QueryRange("max by (alertname, alertstate) (ALERTS)", start, end, 1);
  ASSERT_TRUE(alerts.ok()) << alerts.status().message();
  std::set<std::string> went_off;
  for (const auto& s : (*alerts)["result"]) {
    const std::string a = s["metric"].value("alertname", "") + "=" + s["metric"].value("alertstate", "");
    went_off.insert(s["metric"].value("alertname", ""));
    std::cout << "[ alert    ] " << a << " for " << s["values"].size() << " s\n";
  }
  // Their `for` (2 and 5 minutes) is longer than the run: pending is as far as they get.
  EXPECT_TRUE(went_off.count("StasisNodeAgentDown")) << "mon-b's agent was down for seconds";
  EXPECT_TRUE(went_off.count("StasisSnapshotFailuresRising")) << "1 of 7 checkpoints on mon-a failed";

  // --- each process exports exactly the families documented for it ------------------------
  for (const auto& [job, process] : std::vector<std::pair<std::string, std::string>>{
           {"stasis-node", "node"}, {"stasis-controller", "controller"}}) {
    std::set<std::string> want;
    for (const auto& [name, f] : doc->families) {
      if (f.from.count(process) && !kPerTemplateFamilies.count(name)) want.insert(name);
    }
    EXPECT_EQ(FamiliesOf(*prom, job, end, *doc), want) << job << " against docs/metrics.md";
  }

  // --- the plots for people -----------------------------------------------------------------
  std::string out = (work_.path() / "plots").string();
  if (const char* dir = std::getenv("STASIS_MONITORING_PLOTS_DIR"); dir && *dir) out = dir;
  auto plot = RunCommand({kSource + "/hack/plot-snapshot-health.py", "--prometheus", prom->url(), "--start",
                          std::to_string(start), "--end", std::to_string(end), "--step", "1",
                          "--rate-interval", "10s", "--out", out},
                         120s);
  ASSERT_TRUE(plot.ok()) << plot.status().message();
  EXPECT_EQ(plot->exit_code, 0) << plot->out << plot->err;
  std::cout << plot->out;
  for (const char* png : {"snapshot-size.png", "checkpoint-latency.png", "restore-latency.png",
                          "commit-latency.png", "checkpoint-throughput.png", "operations.png",
                          "actors-by-status.png"}) {
    const std::string bytes = ReadFile(fs::path(out) / png);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << png;
    EXPECT_GT(bytes.size(), 10000u) << png << " is too small to hold a plot";
  }
  std::cout << "[ measure  ] test " << std::chrono::duration<double>(Clock::now() - test_start).count() << " s\n";
}

}  // namespace
}  // namespace stasis::testing
