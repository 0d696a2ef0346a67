// A Grafana dashboard JSON as the tests see it: every panel query (nested row panels
// included), the template variables, and Grafana's variable expansion ($var, ${var},
// [[var]]), so that each query can be sent to a real Prometheus the way Grafana would send it.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis::testing {

struct DashboardQuery {
  std::string panel;   // the panel's title
  std::string type;    // the panel's type: timeseries, stat, heatmap, …
  std::string ref_id;  // the target's refId
  std::string expr;    // PromQL, with Grafana variables unexpanded
  bool instant = false;
};

struct DashboardVariable {
  std::string name;
  std::string type;   // datasource, query, …
  std::string query;  // for type query: e.g. "label_values(stasis_workers, node)"
};

struct Dashboard {
  std::string title;
  std::string uid;
  std::vector<std::string> panel_titles;  // every non-row panel, in order
  std::vector<DashboardQuery> queries;
  std::vector<DashboardVariable> variables;
  // Every panel's and target's datasource uid (rows have none), for checking they all use
  // the dashboard's data source variable.
  std::vector<std::string> datasource_uids;
};

// Errors: kNotFound (no file), kInvalidArgument (not JSON, or a target without an expr).
Result<Dashboard> LoadDashboard(const std::filesystem::path& path);

// Replaces every $name, ${name} and [[name]] by values.at(name). kInvalidArgument naming the
// variable when one has no value: a query must never reach Prometheus half-expanded.
Result<std::string> ExpandVariables(const std::string& expr,
                                    const std::map<std::string, std::string>& values);

}  // namespace stasis::testing
