#include "tests/support/dashboard_checks.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace stasis::testing {
namespace {

constexpr char kNoObjectStore[] =
    "the run commits to a directory store: no object-store transfer, and a quantile of no observations is NaN";
constexpr char kNoImage[] =
    "the run's actors start from bundles: no image is pulled or looked up, and a quantile or ratio of nothing is NaN "
    "(tests/e2e/node_images_test.cc covers the image metrics)";
constexpr char kNoTemplate[] =
    "the run has no ActorTemplate: no pool exists to report (tests/e2e/node_templates_test.cc checks the pool "
    "series against a real pool)";

}  // namespace

std::vector<QueryCheck> DashboardAndRuleChecks(const Dashboard& dashboard, const std::filesystem::path& rules,
                                               const std::string& node, double run_s, int scrape_s) {
  const std::map<std::string, std::string> all_nodes = {
      {"node", ".*"},
      {"__interval", "1s"},
      {"__rate_interval", std::to_string(std::max(1 + scrape_s, 4 * scrape_s)) + "s"},
      {"__range", std::to_string(static_cast<int>(run_s)) + "s"}};
  const auto one_node = [&] {
    auto m = all_nodes;
    m["node"] = node;  // `.*` would also match series without a node label
    return m;
  }();
  std::vector<QueryCheck> checks;
  for (const auto& q : dashboard.queries) {
    for (const std::map<std::string, std::string>* values : {&all_nodes, &one_node}) {
      if (values == &one_node && q.expr.find("$node") == std::string::npos) continue;
      auto e = ExpandVariables(q.expr, *values);
      EXPECT_TRUE(e.ok()) << e.status().message();
      if (!e.ok()) continue;
      checks.push_back({"panel \"" + q.panel + "\" " + q.ref_id + " node=" + values->at("node"), *e, q.instant});
    }
  }
  for (const auto& g : YAML::LoadFile(rules.string())["groups"]) {
    for (const auto& r : g["rules"]) {
      const std::string name = r["record"] ? r["record"].as<std::string>() : r["alert"].as<std::string>();
      checks.push_back({name, r["expr"].as<std::string>(), false});
    }
  }
  return checks;
}

int ExpectEveryRuleHealthy(const PrometheusServer& prom) {
  auto rules = prom.Api("rules", {});
  EXPECT_TRUE(rules.ok()) << rules.status().message();
  if (!rules.ok()) return -1;
  int count = 0;
  for (const auto& g : (*rules)["groups"]) {
    for (const auto& r : g["rules"]) {
      ++count;
      EXPECT_EQ(r.value("health", ""), "ok") << r.value("name", "") << ": " << r.value("lastError", "");
    }
  }
  return count;
}

std::map<std::string, std::string> MayBeEmptyInABundleRun(const std::string& node) {
  std::map<std::string, std::string> out = {
      {"StasisCheckpointLatencyRegression",
       "compares the last 10 minutes with the previous day, ending 10 minutes ago: a run of "
       "minutes has no such history (promtool's unit test shows it firing)"},
      {"StasisControllerDown", "the controller stays up for the whole run (promtool's unit test shows it firing)"},
      {"StasisControllerNoLeader", "one replica leads for the whole run (promtool's unit test shows it firing)"},
      {"StasisReconcileErrors", "fewer than 10% of reconciles fail in this run (promtool's unit test shows it firing)"},
      {"StasisTargetsAbsent", "both jobs are scraped for the whole run (promtool's unit test shows it firing)"},
      {"StasisCommitsFailing", "no commit fails in this run (promtool's unit test shows it firing)"},
  };
  const std::vector<std::pair<std::string, const char*>> panels = {
      {"Snapshot transfer p50 / p99\" A", kNoObjectStore}, {"Snapshot transfer p50 / p99\" B", kNoObjectStore},
      {"Store compression ratio\" A", kNoObjectStore},    {"Image pull p50 / p99\" A", kNoImage},
      {"Image pull p50 / p99\" B", kNoImage},             {"Image pull p50 / p99\" C", kNoImage},
      {"Image cache hit ratio\" A", kNoImage},            {"Warm pool ready\" A", kNoTemplate},
      {"Warm pool claims / s by result\" A", kNoTemplate}};
  for (const auto& [panel, why] : panels) {
    for (const std::string& n : {std::string(".*"), node}) out["panel \"" + panel + " node=" + n] = why;
  }
  return out;
}

}  // namespace stasis::testing
