// The monitoring of a deployed stasis: a real Prometheus finds both roles through Kubernetes
// service discovery against the cluster's API server, relabelled by the shipped ServiceMonitors
// (ClusterTest::StartPrometheus), while actors pause, suspend and resume, one checkpoint fails
// for real (its sandbox killed first) and the agent hangs long enough to be scraped as down.
// Then every dashboard query and rule expression must have data from this cluster, except those
// tests/support/dashboard_checks.h lists for a run without an object store, images or templates.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/cluster_fixture.h"
#include "tests/support/dashboard_checks.h"
#include "tests/support/grafana_dashboard.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kRules = kSource + "/manifests/monitoring/rules/stasis.rules.yaml";
const std::string kDashboard = kSource + "/manifests/monitoring/dashboards/stasis-snapshot-health.json";

const std::map<std::string, std::string> kMayBeEmpty = [] {
  auto m = MayBeEmptyInABundleRun(kClusterNode);
  m["StasisActorStuck"] =
      "nothing is stuck in this run: no transition passes its deadline and no node is lost "
      "(tests/e2e/monitoring_test.cc and promtool's unit test show it)";
  return m;
}();

// Checks without data that must have some, and the two alerts the run sets off that have not.
std::vector<std::string> Missing(const PrometheusServer& prom, const Dashboard& dashboard, double start, double end) {
  std::vector<std::string> missing;
  for (const auto& c : DashboardAndRuleChecks(dashboard, kRules, kClusterNode, end - start,
                                              ClusterTest::kScrapeSeconds)) {
    if (kMayBeEmpty.count(c.name)) continue;
    auto data = c.instant ? prom.Query(c.expr, end) : prom.QueryRange(c.expr, start, end, 1);
    if (!data.ok() || !HasFiniteSample(*data)) missing.push_back(c.name + (data.ok() ? "" : ": " + data.status().message()));
  }
  auto alerts = prom.QueryRange("max by (alertname) (ALERTS)", start, end, 1);
  std::set<std::string> went_off;
  if (alerts.ok()) {
    for (const auto& s : (*alerts)["result"]) went_off.insert(s["metric"].value("alertname", ""));
  }
  for (const char* a : {"StasisNodeAgentDown", "StasisSnapshotFailuresRising"}) {
    if (!went_off.count(a)) missing.push_back(a);
  }
  return missing;
}

// Pause, resume from the pause snapshot, suspend, resume from the committed one.
void Cycle(const std::string& actor) {
  for (const auto& [desired, status] : std::vector<std::pair<std::string, std::string>>{
           {"Paused", "STATUS_PAUSED"}, {"Running", "STATUS_RUNNING"},
           {"Suspended", "STATUS_SUSPENDED"}, {"Running", "STATUS_RUNNING"}}) {
    ClusterTest::SetActor(actor, desired);
    ASSERT_TRUE(ClusterTest::Reaches(actor, status)) << actor << ": " << ClusterTest::StatusOf(actor);
  }
}

TEST_F(ClusterTest, EveryPanelQueryAndRuleHasDataFromTheCluster) {
  auto dashboard = LoadDashboard(kDashboard);
  ASSERT_TRUE(dashboard.ok()) << dashboard.status().message();
  auto prom = StartPrometheus();
  ASSERT_NE(prom, nullptr);

  // Discovery: the one agent, labelled with its node, and both controller replicas.
  ASSERT_TRUE(Eventually([&] { return UpTargets(*prom, "stasis-node").size() == 1 &&
                                      UpTargets(*prom, "stasis-controller").size() == 2; }, 120s))
      << "up: " << UpTargets(*prom, "stasis-node").dump() << " " << UpTargets(*prom, "stasis-controller").dump()
      << "\n(Prometheus' log: " << prom->log_path() << ")";
  const json agent = UpTargets(*prom, "stasis-node")[0]["metric"];
  EXPECT_EQ(agent.value("node", ""), kClusterNode);
  EXPECT_EQ(agent.value("namespace", ""), "stasis-system");
  EXPECT_EQ(agent.value("pod", ""), AgentPod());
  const double start = UnixNow();
  // The start histogram is scraped at zero before the first start (a start is shorter than a
  // scrape interval, and rate() needs a sample before it).
  ASSERT_TRUE(Eventually([&] {
    auto r = prom->Query("stasis_actor_start_seconds_count{kind=\"boot\"}", UnixNow());
    return r.ok() && !(*r)["result"].empty();
  }, 30s));

  SetActor("alpha", "Running");
  ASSERT_TRUE(Reaches("alpha", "STATUS_RUNNING")) << StatusOf("alpha");
  ASSERT_NO_FATAL_FAILURE(Cycle("alpha"));
  ASSERT_NO_FATAL_FAILURE(Cycle("alpha"));
  SetActor("alpha", "Suspended");
  ASSERT_TRUE(Reaches("alpha", "STATUS_SUSPENDED"));

  // A checkpoint that fails for real: the sandbox killed on the host just before it.
  SetActor("crash", "Running");
  ASSERT_TRUE(Reaches("crash", "STATUS_RUNNING")) << StatusOf("crash");
  const long pid = SandboxPid("crash");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(RunCommand({"kill", "-9", std::to_string(pid)}, 10s).ok());
  SetActor("crash", "Paused");
  ASSERT_TRUE(Reaches("crash", "STATUS_FAILED")) << StatusOf("crash");

  // The agent hung (stopped) until a rule evaluation has seen it down, then let go.
  ASSERT_TRUE(RunCommand({"pkill", "-STOP", "-x", "-f", "stasis node"}, 10s).ok());
  const bool seen_down = Eventually([&] {
    auto r = prom->Query("ALERTS{alertname=\"StasisNodeAgentDown\"}", UnixNow());
    return r.ok() && HasFiniteSample(*r);
  }, 60s);
  ASSERT_TRUE(RunCommand({"pkill", "-CONT", "-x", "-f", "stasis node"}, 10s).ok());
  ASSERT_TRUE(seen_down) << "Prometheus never evaluated StasisNodeAgentDown as pending";
  ASSERT_TRUE(AgentReady(180s));

  // Life goes on; then the last gauges (every 5 s) and scrapes land.
  SetActor("alpha", "Running");
  ASSERT_TRUE(Reaches("alpha", "STATUS_RUNNING")) << StatusOf("alpha");
  SetActor("alpha", "Suspended");
  ASSERT_TRUE(Reaches("alpha", "STATUS_SUSPENDED"));
  double end = UnixNow();
  for (const auto until = Clock::now() + 90s; Clock::now() < until; std::this_thread::sleep_for(2s)) {
    end = UnixNow();
    if (Missing(*prom, *dashboard, start, end).empty()) break;
  }
  std::cout << "[ measure  ] scenario " << end - start << " s\n";

  EXPECT_GT(ExpectEveryRuleHealthy(*prom), 0);
  auto nodes = prom->Api("label/node/values", {{"match[]", "stasis_workers"}, {"start", std::to_string(start)},
                                               {"end", std::to_string(end)}});
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ(*nodes, json({kClusterNode})) << "the dashboard's $node choices";
  for (const auto& m : Missing(*prom, *dashboard, start, end)) ADD_FAILURE() << m << " has no data from the cluster";
  for (const auto& c : DashboardAndRuleChecks(*dashboard, kRules, kClusterNode, end - start, kScrapeSeconds)) {
    auto data = c.instant ? prom->Query(c.expr, end) : prom->QueryRange(c.expr, start, end, 1);
    if (kMayBeEmpty.count(c.name) && data.ok() && !HasFiniteSample(*data)) {
      std::cout << "[ no data  ] " << c.name << " (allowed: " << kMayBeEmpty.at(c.name) << ")\n";
    }
  }
}

}  // namespace
}  // namespace stasis::testing
