// manifests/monitoring/ checked with the real promtool (Debian's, or $STASIS_PROMTOOL): the
// rule file loads (`promtool check rules`) and its unit tests pass (`promtool test rules`);
// every alert has a promtool case where it fires and one where it does not; the PrometheusRule
// holds exactly the plain file's groups; the dashboard is importable as documented (a data
// source variable every panel uses, a node variable, the panels the issue asks for).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "base/subprocess.h"
#include "tests/support/grafana_dashboard.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kMonitoring = kSource + "/manifests/monitoring";
const std::string kRules = kMonitoring + "/rules/stasis.rules.yaml";
const std::string kRuleTests = kMonitoring + "/rules/stasis.rules.test.yaml";

std::string Promtool() {
  if (const char* env = std::getenv("STASIS_PROMTOOL"); env && *env) return env;
  return "promtool";
}

CommandResult RunTool(const std::vector<std::string>& argv) {
  auto r = RunCommand(argv, 120s);
  if (!r.ok()) {
    ADD_FAILURE() << argv[0] << " cannot be run: " << r.status().message();
    return CommandResult{};
  }
  return *r;
}

// A YAML tree as JSON (every scalar a string), for structural comparison.
json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = ToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& e : n) j.push_back(ToJson(e));
      return j;
    }
    case YAML::NodeType::Scalar:
      return n.as<std::string>();
    default:
      return nullptr;
  }
}

std::set<std::string> Alerts() {
  std::set<std::string> out;
  for (const auto& g : YAML::LoadFile(kRules)["groups"]) {
    for (const auto& r : g["rules"]) {
      if (r["alert"]) out.insert(r["alert"].as<std::string>());
    }
  }
  return out;
}

TEST(MonitoringRulesTest, PromtoolChecksTheRuleFile) {
  auto r = RunTool({Promtool(), "check", "rules", kRules});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SUCCESS: 14 rules found"), std::string::npos) << r.out;
}

TEST(MonitoringRulesTest, PromtoolUnitTestsPass) {
  auto r = RunTool({Promtool(), "test", "rules", kRuleTests});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SUCCESS"), std::string::npos) << r.out;
}

TEST(MonitoringRulesTest, PromtoolUnitTestsFailWhenARuleChanges) {
  // The same tests against a rule file whose node-agent alert waits 10 minutes instead of 2:
  // promtool must notice, or the tests above prove nothing.
  TempDir tmp("stasis-rules-mutant-");
  const std::string dir = tmp.path().string();
  std::filesystem::copy_file(kRuleTests, dir + "/stasis.rules.test.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  YAML::Node rules = YAML::LoadFile(kRules);
  bool changed = false;
  for (auto g : rules["groups"]) {
    for (auto r : g["rules"]) {
      if (r["alert"] && r["alert"].as<std::string>() == "StasisNodeAgentDown") {
        r["for"] = "10m";
        changed = true;
      }
    }
  }
  ASSERT_TRUE(changed);
  std::ofstream(dir + "/stasis.rules.yaml") << YAML::Dump(rules) << "\n";
  auto r = RunTool({Promtool(), "test", "rules", dir + "/stasis.rules.test.yaml"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE((r.out + r.err).find("StasisNodeAgentDown"), std::string::npos) << r.out << r.err;
}

TEST(MonitoringRulesTest, EveryAlertHasAFiringAndANonFiringCase) {
  std::map<std::string, int> firing, quiet;
  for (const auto& t : YAML::LoadFile(kRuleTests)["tests"]) {
    for (const auto& c : t["alert_rule_test"]) {
      const std::string name = c["alertname"].as<std::string>();
      const bool fires = c["exp_alerts"] && c["exp_alerts"].size() > 0;
      (fires ? firing : quiet)[name]++;
    }
  }
  const auto alerts = Alerts();
  ASSERT_EQ(alerts.size(), 9u);
  for (const auto& a : alerts) {
    EXPECT_GT(firing[a], 0) << a << " has no promtool case where it fires";
    EXPECT_GT(quiet[a], 0) << a << " has no promtool case where it stays quiet";
  }
  for (const auto& [name, n] : firing) EXPECT_TRUE(alerts.count(name)) << "test of unknown alert " << name;
}

// GitHub's anchor of a Markdown heading: lowercase, spaces to '-', punctuation dropped.
std::string Anchor(const std::string& heading) {
  std::string out;
  for (char c : heading) {
    if (std::isalnum(static_cast<unsigned char>(c))) out.push_back(static_cast<char>(std::tolower(c)));
    else if (c == ' ' || c == '-') out.push_back('-');
  }
  return out;
}

TEST(MonitoringRulesTest, EveryAlertsRunbookIsAnAnchorInTheDocs) {
  std::set<std::string> anchors;
  std::ifstream doc(kSource + "/docs/monitoring.md");
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind('#', 0) == 0) anchors.insert(Anchor(line.substr(line.find_first_not_of("# "))));
  }
  int alerts = 0;
  for (const auto& g : YAML::LoadFile(kRules)["groups"]) {
    for (const auto& r : g["rules"]) {
      if (!r["alert"]) continue;
      ++alerts;
      const std::string name = r["alert"].as<std::string>();
      const std::string url = r["annotations"]["runbook_url"].as<std::string>("");
      const std::string prefix = "docs/monitoring.md#";
      ASSERT_EQ(url.rfind(prefix, 0), 0u) << name << " runbook_url " << url;
      EXPECT_TRUE(anchors.count(url.substr(prefix.size()))) << name << ": no heading for " << url;
      EXPECT_FALSE(r["annotations"]["summary"].as<std::string>("").empty()) << name;
    }
  }
  EXPECT_EQ(alerts, 9);
}

TEST(MonitoringRulesTest, PrometheusRuleHoldsThePlainRuleFile) {
  YAML::Node cr = YAML::LoadFile(kMonitoring + "/prometheusrule.yaml");
  EXPECT_EQ(cr["apiVersion"].as<std::string>(), "monitoring.coreos.com/v1");
  EXPECT_EQ(cr["kind"].as<std::string>(), "PrometheusRule");
  EXPECT_EQ(ToJson(cr["spec"]), ToJson(YAML::LoadFile(kRules)));
  auto r = RunTool({kSource + "/hack/gen-prometheusrule.sh", "--check"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(MonitoringRulesTest, ServiceMonitorsSetTheJobAndNodeLabelsTheRulesUse) {
  std::map<std::string, json> monitors;
  for (const auto& doc : YAML::LoadAllFromFile(kMonitoring + "/servicemonitor.yaml")) {
    ASSERT_EQ(doc["kind"].as<std::string>(), "ServiceMonitor");
    monitors[doc["metadata"]["name"].as<std::string>()] = ToJson(doc["spec"]);
  }
  ASSERT_EQ(monitors.size(), 2u);
  for (const auto& [name, component] : {std::pair<std::string, std::string>{"stasis-node", "node"},
                                        {"stasis-controller", "controller"}}) {
    const json& spec = monitors[name];
    EXPECT_EQ(spec["selector"]["matchLabels"]["app.kubernetes.io/component"], component);
    std::map<std::string, std::string> set;  // targetLabel -> replacement or source
    for (const auto& r : spec["endpoints"][0]["relabelings"]) {
      set[r["targetLabel"]] = r.contains("replacement") ? r["replacement"].get<std::string>()
                                                        : r["sourceLabels"][0].get<std::string>();
    }
    EXPECT_EQ(set["job"], name);
    if (component == "node") EXPECT_EQ(set["node"], "__meta_kubernetes_pod_node_name");
    // The pods serve /metrics over HTTPS to authenticated scrapers (--metrics-secure).
    const json& endpoint = spec["endpoints"][0];
    EXPECT_EQ(endpoint["scheme"], "https");
    EXPECT_EQ(endpoint["bearerTokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token");
    EXPECT_EQ(endpoint["tlsConfig"]["insecureSkipVerify"], "true");  // self-signed by default
  }
}

TEST(MonitoringRulesTest, DashboardIsImportableAndHasThePanelsAskedFor) {
  auto d = LoadDashboard(kMonitoring + "/dashboards/stasis-snapshot-health.json");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->title, "stasis — snapshot health");
  EXPECT_EQ(d->uid, "stasis-snapshot-health");
  std::map<std::string, std::string> vars;
  for (const auto& v : d->variables) vars[v.name] = v.type;
  EXPECT_EQ(vars["datasource"], "datasource");
  EXPECT_EQ(vars["node"], "query");
  // Every panel and query goes to the data source the importer picks.
  for (const auto& uid : d->datasource_uids) EXPECT_EQ(uid, "${datasource}");
  std::set<std::string> titles(d->panel_titles.begin(), d->panel_titles.end());
  EXPECT_EQ(titles.size(), d->panel_titles.size()) << "panel titles are unique";
  for (const char* want :
       {"Snapshot size p50 / p95 / p99 by trigger, scope, gpu", "Snapshot size distribution",
        "Checkpoint latency p50 / p99", "Restore latency p50 / p99", "Commit latency p50 / p99",
        "Checkpoint throughput p50 / p10", "Snapshot operations / s", "Failure ratio by reason",
        "Forced cleanups by reason", "Actors by status", "Stuck actors", "Worker utilisation",
        "Reconciles / s by result", "Work queue depth"}) {
    EXPECT_TRUE(titles.count(want)) << "no panel \"" << want << "\"";
  }
  // Snapshot panels follow the node variable (the store's deletions are the controller's: cluster-wide).
  for (const auto& q : d->queries) {
    if (q.expr.find("stasis_snapshot_store_deletions_total") != std::string::npos) continue;
    if (q.expr.find("stasis_snapshot") != std::string::npos || q.expr.find("stasis_workers") != std::string::npos ||
        q.expr.find("stasis_object_store") != std::string::npos) {
      EXPECT_NE(q.expr.find("node=~\"$node\""), std::string::npos) << q.panel << ": " << q.expr;
    }
  }
}

TEST(MonitoringRulesTest, GrafanaVariablesExpandOrFailLoudly) {
  auto e = ExpandVariables("rate(x{node=~\"$node\"}[$__rate_interval]) + y[${__range}] + [[node]]",
                           {{"node", "a|b"}, {"__rate_interval", "4s"}, {"__range", "60s"}});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(*e, "rate(x{node=~\"a|b\"}[4s]) + y[60s] + a|b");
  auto missing = ExpandVariables("rate(x[$__interval])", {{"node", ".*"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("$__interval"), std::string::npos);
}

}  // namespace
}  // namespace stasis::testing
