// docs/metrics.md against the code: the families each process registers (by the same classes
// the node agent and the controller wire up), with their types, labels and buckets, must be
// exactly the documented ones; and every metric the dashboard and the rules name must be a
// documented family (or a recording rule of the rule file), selected only by labels it has.
// The e2e test (monitoring_test) checks the real processes' families through Prometheus.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "controller/metrics.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "reconcilers/node/image_metrics.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "tests/support/grafana_dashboard.h"
#include "tests/support/metrics_reference.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

const std::string kSource = STASIS_SOURCE_DIR;

struct Registered {
  std::string type;
  std::set<std::string> labels;
  std::vector<double> buckets;
  std::set<std::string> from;
  bool has_series = false;
};

const char* TypeName(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter: return "counter";
    case prometheus::MetricType::Gauge: return "gauge";
    case prometheus::MetricType::Histogram: return "histogram";
    case prometheus::MetricType::Summary: return "summary";
    case prometheus::MetricType::Untyped: return "untyped";
  }
  return "?";
}

// Adds what `registry` exports (families with at least one series) as exported by `process`.
void Collect(const prometheus::Registry& registry, const std::string& process,
             std::map<std::string, Registered>& out) {
  for (const auto& f : registry.Collect()) {
    if (f.metric.empty()) continue;  // registered, never used in this process: not exported
    Registered& r = out[f.name];
    r.type = TypeName(f.type);
    r.from.insert(process);
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) r.labels.insert(l.name);
      if (f.type == prometheus::MetricType::Histogram) {
        std::vector<double> bounds;
        for (const auto& b : m.histogram.bucket) {
          if (!std::isinf(b.upper_bound)) bounds.push_back(b.upper_bound);
        }
        if (r.buckets.empty()) r.buckets = bounds;
        EXPECT_EQ(bounds, r.buckets) << f.name << ": every series has the same buckets";
      }
    }
  }
}

// What a running `stasis node` and `stasis controller` register (node_agent.cc,
// cluster_controller.cc), with each family used once so its labels show.
std::map<std::string, Registered> RegisteredFamilies() {
  std::map<std::string, Registered> out;
  {
    Metrics m;
    SnapshotMetrics s(*m.registry());
    ImageMetrics images(*m.registry());
    m.RegisterController("actor");
    auto q = m.NewWorkQueueMetrics("actor");
    m.RestClientObserver("127.0.0.1:6443")("GET", "200");
    s.SetWorkers(1, 1);
    s.ObserveSnapshot("Pause", "Full", false, 1e6, 0.1);
    s.ObserveDuration("checkpoint", "Pause", false, "error", 0.2);
    s.CountOperation("checkpoint", "error", "container_stopped");
    s.CountForcedCleanup("sandbox_died");
    images.Pull("success", 1 << 20, 0.5);
    images.Unpack(2 << 20, 0.2);
    m.SetBuildInfo("0.1.0", "0123456789ab");
    Collect(*m.registry(), "node", out);
  }
  {
    Metrics m;
    ClusterMetrics c(*m.registry());
    m.RegisterController("cluster");
    auto q = m.NewWorkQueueMetrics("cluster");
    m.RestClientObserver("127.0.0.1:6443")("PATCH", "409");
    m.SetLeaderStatus("stasis-controller", true);
    c.SetActors({{"STATUS_RUNNING", 1}}, {});
    c.CountForcedCleanup("node_lost");
    c.SetWarmPool("ns", "counter", 2);
    m.SetBuildInfo("0.1.0", "0123456789ab");
    Collect(*m.registry(), "controller", out);
  }
  return out;
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

TEST(MetricsReferenceTest, DocumentsExactlyTheRegisteredFamilies) {
  auto doc = LoadMetricsReference(kSource + "/docs/metrics.md");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const auto registered = RegisteredFamilies();
  ASSERT_GE(registered.size(), 19u);

  for (const auto& [name, r] : registered) {
    auto it = doc->families.find(name);
    if (it == doc->families.end()) {
      ADD_FAILURE() << name << " is registered but not in docs/metrics.md";
      continue;
    }
    const DocumentedFamily& d = it->second;
    EXPECT_EQ(d.type, r.type) << name;
    EXPECT_EQ(Join(d.labels), Join(r.labels)) << name << ": labels";
    EXPECT_EQ(Join(d.from), Join(r.from)) << name << ": exported by";
    if (r.type == "histogram") {
      ASSERT_TRUE(doc->bucket_sets.count(d.buckets)) << name;
      const auto& want = doc->bucket_sets.at(d.buckets);
      ASSERT_EQ(want.size(), r.buckets.size()) << name << ": bucket count of set " << d.buckets;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(want[i], r.buckets[i], want[i] * 1e-9) << name << " bucket " << i;
      }
    }
  }
  for (const auto& [name, d] : doc->families) {
    EXPECT_TRUE(registered.count(name)) << name << " is documented but no process registers it";
  }
}

TEST(MetricsReferenceTest, ReaderRejectsAMalformedTable) {
  TempDir tmp("stasis-metrics-doc-");
  const std::string path = (tmp.path() / "metrics-bad.md").string();
  {
    std::ofstream out(path);
    out << "| metric | type | labels | buckets | from | meaning |\n|---|---|---|---|---|---|\n"
        << "| `x_seconds` | histogram | `a` | `nope` | node | a histogram with an unknown bucket set |\n\n"
        << "| bucket set | upper bounds |\n|---|---|\n| `size` | 1Ki, 2Ki |\n";
  }
  auto r = LoadMetricsReference(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unknown bucket set nope"), std::string::npos) << r.status().message();
}

// ---- metric names used by the dashboard and the rules ---------------------------------------

struct MetricUse {
  std::string name;                 // as written: stasis_x_bucket, stasis:rule:name, up
  std::set<std::string> matchers;   // label names in its {…} selector
};

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }

// Every identifier outside string literals that is one of ours (stasis_, stasis:, the
// controller-runtime prefixes) or `up`, with the label names of the selector that follows it.
std::vector<MetricUse> MetricUses(const std::string& expr) {
  static const std::regex ours(
      "^(stasis_|stasis:|controller_runtime_|workqueue_|rest_client_|leader_election_|up$).*");
  std::vector<MetricUse> out;
  for (size_t i = 0; i < expr.size();) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {  // skip a string literal
      size_t j = i + 1;
      while (j < expr.size() && expr[j] != c) j += expr[j] == '\\' ? 2 : 1;
      i = j + 1;
      continue;
    }
    if (!IdentStart(c) || (i > 0 && IdentChar(expr[i - 1]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < expr.size() && IdentChar(expr[j])) ++j;
    const std::string ident = expr.substr(i, j - i);
    i = j;
    if (!std::regex_match(ident, ours)) continue;
    MetricUse use{ident, {}};
    size_t k = j;
    while (k < expr.size() && expr[k] == ' ') ++k;
    if (k < expr.size() && expr[k] == '{') {
      const size_t close = expr.find('}', k);
      if (close == std::string::npos) {
        ADD_FAILURE() << "unclosed selector after " << ident << " in: " << expr;
        break;
      }
      static const std::regex matcher("([a-zA-Z_][a-zA-Z0-9_]*)\\s*(=~|!~|!=|=)\\s*\"[^\"]*\"");
      const std::string sel = expr.substr(k + 1, close - k - 1);
      for (auto m = std::sregex_iterator(sel.begin(), sel.end(), matcher); m != std::sregex_iterator(); ++m) {
        use.matchers.insert((*m)[1]);
      }
      i = close + 1;
    }
    out.push_back(use);
  }
  return out;
}

struct RuleFile {
  std::set<std::string> records;
  std::vector<std::pair<std::string, std::string>> exprs;  // (rule name, expr)
};

RuleFile LoadRules() {
  RuleFile f;
  YAML::Node root = YAML::LoadFile(kSource + "/manifests/monitoring/rules/stasis.rules.yaml");
  for (const auto& g : root["groups"]) {
    for (const auto& r : g["rules"]) {
      const std::string name = r["record"] ? r["record"].as<std::string>() : r["alert"].as<std::string>();
      if (r["record"]) f.records.insert(name);
      f.exprs.emplace_back(name, r["expr"].as<std::string>());
    }
  }
  return f;
}

TEST(MetricsReferenceTest, DashboardAndRulesNameOnlyDocumentedMetricsAndLabels) {
  auto doc = LoadMetricsReference(kSource + "/docs/metrics.md");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  auto dash = LoadDashboard(kSource + "/manifests/monitoring/dashboards/stasis-snapshot-health.json");
  ASSERT_TRUE(dash.ok()) << dash.status().message();
  const RuleFile rules = LoadRules();

  std::vector<std::pair<std::string, std::string>> exprs = rules.exprs;
  for (const auto& q : dash->queries) exprs.emplace_back("panel \"" + q.panel + "\" " + q.ref_id, q.expr);
  for (const auto& v : dash->variables) {
    if (v.type == "query") exprs.emplace_back("variable $" + v.name, v.query);
  }
  const std::set<std::string> scrape_labels = {"job", "instance", "node"};
  int checked = 0;
  for (const auto& [where, expr] : exprs) {
    const auto uses = MetricUses(expr);
    EXPECT_FALSE(uses.empty()) << where << " names no stasis metric: " << expr;
    for (const auto& use : uses) {
      ++checked;
      if (use.name.find(':') != std::string::npos) {
        EXPECT_TRUE(rules.records.count(use.name)) << where << ": " << use.name << " is not a recording rule";
        continue;
      }
      std::set<std::string> allowed = scrape_labels;
      if (use.name != "up") {
        std::string family = use.name;
        bool bucket = false;
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          const std::string s = suffix;
          if (!doc->families.count(family) && family.size() > s.size() &&
              family.compare(family.size() - s.size(), s.size(), s) == 0) {
            family.resize(family.size() - s.size());
            bucket = s == "_bucket";
          }
        }
        auto it = doc->families.find(family);
        if (it == doc->families.end()) {
          ADD_FAILURE() << where << ": " << use.name << " is not a documented metric";
          continue;
        }
        if (family != use.name) {
          EXPECT_EQ(it->second.type, "histogram") << where << ": " << use.name << " of a " << it->second.type;
        }
        allowed.insert(it->second.labels.begin(), it->second.labels.end());
        if (bucket) allowed.insert("le");
      }
      for (const auto& l : use.matchers) {
        EXPECT_TRUE(allowed.count(l)) << where << ": " << use.name << " has no label " << l;
      }
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(MetricsReferenceTest, MetricUsesSkipStringsAndReadSelectors) {
  auto uses = MetricUses(
      "sum by (le) (rate(stasis_x_bucket{a=\"stasis_not_a_metric\", b=~\"x\"}[5m])) / up{job!=\"j\"}"
      " > stasis:rec:ord");
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].name, "stasis_x_bucket");
  EXPECT_EQ(uses[0].matchers, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(uses[1].name, "up");
  EXPECT_EQ(uses[1].matchers, (std::set<std::string>{"job"}));
  EXPECT_EQ(uses[2].name, "stasis:rec:ord");
}

}  // namespace
}  // namespace stasis::testing
