// The queries a dashboard and a rules file send to Prometheus, expanded as Grafana and the rule
// evaluator would, for tests that assert each has data from a real run; and the checks a run
// without an object store, an image or an ActorTemplate may leave empty, with the reason.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/grafana_dashboard.h"
#include "tests/support/prometheus_server.h"

namespace stasis::testing {

struct QueryCheck {
  std::string name;  // `panel "TITLE" REFID node=VALUE`, or the rule's record/alert name
  std::string expr;
  bool instant = false;
};

// Every panel query (for all nodes and, where it has $node, for `node`) and every rule expression
// of `rules` (a Prometheus rules file), for a run of `run_s` seconds queried at a 1 s step with a
// scrape every `scrape_s` seconds: $__rate_interval = max($__interval + scrape, 4 × scrape).
// A variable without a value fails the calling test (ExpandVariables) and drops that check.
std::vector<QueryCheck> DashboardAndRuleChecks(const Dashboard& dashboard, const std::filesystem::path& rules,
                                               const std::string& node, double run_s, int scrape_s);

// The checks that may have no data in a run that commits to a directory store, starts actors
// from bundles and has no ActorTemplate, and the alerts whose firing only promtool's unit test
// shows, each with the reason; `node` as given to DashboardAndRuleChecks.
std::map<std::string, std::string> MayBeEmptyInABundleRun(const std::string& node);

// Fails the calling test for every rule Prometheus loaded (/api/v1/rules) that is not healthy,
// naming it and its last error; returns how many rules it loaded (-1 when it cannot say).
int ExpectEveryRuleHealthy(const PrometheusServer& prom);

}  // namespace stasis::testing
