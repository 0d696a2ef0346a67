// How manifests/ composes, on a real kube-apiserver: every overlay renders (`kubectl kustomize`)
// and passes a server-side dry run; each node agent's DaemonSet runs only on nodes opted in by
// the label stasis.dev/agent, so no overlay places an agent on an unlabelled node; the CPU and
// GPU agents of overlays/cpu-and-gpu never share a name, a node or a pod, and are the very
// agents of overlays/default and overlays/gpu; the monitoring component adds the
// ServiceMonitors, the PrometheusRule and the dashboard ConfigMap to whichever overlay includes
// it, and to no other, validated against the Prometheus Operator's real CRD schemas
// (tests/support/prometheus-operator-crds/, installed here). deploy_manifests_test.cc checks
// the objects themselves (RBAC, flags, probes, images).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kManifests = kSource + "/manifests";
const std::string kSystemNs = "stasis-system";
const std::string kAgentLabel = "stasis.dev/agent";

// Each overlay's node agents: DaemonSet name → the value of stasis.dev/agent it runs on. A new
// overlay must be added here, with the placement it is meant to have.
const std::map<std::string, std::map<std::string, std::string>> kAgents = {
    {"default", {{"stasis-node-cpu", "cpu"}}},
    {"gpu", {{"stasis-node-gpu", "gpu"}}},
    {"cpu-and-gpu", {{"stasis-node-cpu", "cpu"}, {"stasis-node-gpu", "gpu"}}},
    {"local", {{"stasis-node-cpu", "cpu"}}},  // default, with the image never pulled
};

CommandResult Kubectl(const std::vector<std::string>& args) {
  return ControlPlane::Get().Kubectl(args);
}

std::string Show(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out.substr(0, 2000) +
         "\nstderr: " + r.err;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json At(const json& j, const std::string& pointer) {
  if (!j.is_object() && !j.is_array()) return json();
  const json::json_pointer p(pointer);
  return j.contains(p) ? j.at(p) : json();
}

std::string Name(const json& o) { return At(o, "/metadata/name").get<std::string>(); }

// Whether every key/value of `selector` (matchLabels, a nodeSelector, a Service's selector) is
// among `labels`. An empty selector selects nothing here: none of ours may be empty.
bool Selects(const json& selector, const json& labels) {
  if (!selector.is_object() || selector.empty() || !labels.is_object()) return false;
  for (const auto& [k, v] : selector.items()) {
    if (!labels.contains(k) || labels[k] != v) return false;
  }
  return true;
}

// A kustomization directory rendered, then as the server would store it (`apply --dry-run=server`
// with kubectl's strict field validation): its objects, with the test failed if either refused.
json Objects(const std::string& dir) {
  const CommandResult rendered = Kubectl({"kustomize", dir});
  EXPECT_EQ(rendered.exit_code, 0) << dir << ": " << Show(rendered);
  const CommandResult r = Kubectl({"apply", "--dry-run=server", "-k", dir, "-o", "json"});
  EXPECT_EQ(r.exit_code, 0) << dir << ": " << Show(r);
  if (r.exit_code != 0) return json::array();
  return At(json::parse(r.out, nullptr, false), "/items");
}

std::vector<json> OfKind(const json& objects, const std::string& kind) {
  std::vector<json> out;
  for (const auto& o : objects) {
    if (o.value("kind", "") == kind) out.push_back(o);
  }
  return out;
}

json Find(const json& objects, const std::string& kind, const std::string& name) {
  for (const auto& o : OfKind(objects, kind)) {
    if (Name(o) == name) return o;
  }
  return json();
}

// An overlay of our own in a temporary directory: `overlay` plus the monitoring component, the
// way docs/deploy.md tells users to write one (paths relative: kustomize refuses absolute ones).
class MonitoredOverlay {
 public:
  explicit MonitoredOverlay(const std::string& overlay) {
    const fs::path rel = fs::relative(kManifests, tmp_.path());
    std::ofstream(tmp_.path() / "kustomization.yaml")
        << "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        << "resources:\n  - " << (rel / "overlays" / overlay).string() << "\n"
        << "components:\n  - " << (rel / "components" / "monitoring").string() << "\n";
  }
  std::string dir() const { return tmp_.path().string(); }

 private:
  TempDir tmp_;
};

class DeployOverlaysTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ControlPlane::Get();
    // A server-side dry run refuses namespaced objects whose namespace does not exist yet.
    const CommandResult ns = Kubectl({"apply", "-f", kManifests + "/base/namespace.yaml"});
    ASSERT_EQ(ns.exit_code, 0) << Show(ns);
    const std::string crds = kSource + "/tests/support/prometheus-operator-crds/";
    const CommandResult op = Kubectl({"apply", "--server-side", "-f", crds});
    ASSERT_EQ(op.exit_code, 0) << Show(op);
    // `kubectl wait` fails at once on a CRD the server has not yet given conditions: retried.
    CommandResult established;
    for (int i = 0; i < 30; ++i) {
      established = Kubectl({"wait", "--for=condition=Established", "--timeout=60s",
                             "crd/servicemonitors.monitoring.coreos.com",
                             "crd/prometheusrules.monitoring.coreos.com"});
      if (established.exit_code == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_EQ(established.exit_code, 0) << Show(established);
    for (const auto& entry : fs::directory_iterator(kManifests + "/overlays")) {
      if (entry.is_directory()) {
        overlays_[entry.path().filename().string()] = Objects(entry.path().string());
      }
    }
  }

  static inline std::map<std::string, json> overlays_;
};

TEST_F(DeployOverlaysTest, EveryOverlayIsKnownRendersAndPassesAServerSideDryRun) {
  ASSERT_EQ(overlays_.size(), kAgents.size());
  for (const auto& [name, objects] : overlays_) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(kAgents.count(name)) << "a new overlay: add its agents to kAgents";
    EXPECT_FALSE(objects.empty());
    for (const auto& o : objects) {
      const json ns = At(o, "/metadata/namespace");
      if (!ns.is_null()) {
        EXPECT_EQ(ns, kSystemNs) << o.value("kind", "") << " " << Name(o);
      }
    }
  }
}

// A node runs an agent only when an operator labelled it, and then exactly one: the DaemonSets'
// nodeSelectors, evaluated on the labels a node may carry.
TEST_F(DeployOverlaysTest, NodeAgentsRunOnlyOnNodesOptedInByLabel) {
  const std::vector<std::pair<json, std::string>> nodes = {
      {json::object(), ""},
      {{{"nvidia.com/gpu.present", "true"}}, ""},  // GPU feature discovery alone opts nothing in
      {{{"kubernetes.io/os", "linux"}, {kAgentLabel, "cpu"}}, "cpu"},
      {{{"nvidia.com/gpu.present", "true"}, {kAgentLabel, "gpu"}}, "gpu"},
      {{{kAgentLabel, "none"}}, ""},
  };
  for (const auto& [overlay, agents] : kAgents) {
    SCOPED_TRACE(overlay);
    const json& objects = overlays_[overlay];
    std::map<std::string, std::string> found;
    for (const json& ds : OfKind(objects, "DaemonSet")) {
      const json selector = At(ds, "/spec/template/spec/nodeSelector");
      // Required, whatever else the selector holds.
      EXPECT_TRUE(selector.contains(kAgentLabel)) << Name(ds) << " " << selector.dump();
      found[Name(ds)] = selector.value(kAgentLabel, "");
      // Its pods carry the same value, in its own selector too (never adopting the other's).
      EXPECT_EQ(At(ds, "/spec/selector/matchLabels").value(kAgentLabel, ""), found[Name(ds)]);
      EXPECT_EQ(At(ds, "/spec/template/metadata/labels").value(kAgentLabel, ""), found[Name(ds)]);
    }
    EXPECT_EQ(found, agents);
    for (const auto& [labels, want] : nodes) {
      std::vector<std::string> placed;
      for (const json& ds : OfKind(objects, "DaemonSet")) {
        if (Selects(At(ds, "/spec/template/spec/nodeSelector"), labels)) placed.push_back(Name(ds));
      }
      bool offered = false;  // does this overlay have an agent for this node's label?
      for (const auto& agent : agents) offered = offered || agent.second == want;
      EXPECT_EQ(placed.size(), offered ? 1u : 0u) << "node labels " << labels.dump();
      if (offered && placed.size() == 1) {
        EXPECT_EQ(agents.at(placed[0]), want);
      }
    }
  }
}

// The mixed cluster's two agents: distinct names, nodeSelectors no node satisfies together, pod
// selectors that never pick the other's pods; both are the single-kind overlays' agents, and
// the mixed overlay is exactly the union of those two; it applies for real.
TEST_F(DeployOverlaysTest, CpuAndGpuAgentsShareNoNameNodeOrPod) {
  const json& mixed = overlays_["cpu-and-gpu"];
  const std::vector<json> ds = OfKind(mixed, "DaemonSet");
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_NE(Name(ds[0]), Name(ds[1]));
  const json s0 = At(ds[0], "/spec/template/spec/nodeSelector");
  const json s1 = At(ds[1], "/spec/template/spec/nodeSelector");
  bool disjoint = false;  // some key both require, with different values
  for (const auto& [k, v] : s0.items()) {
    if (s1.contains(k) && s1[k] != v) disjoint = true;
  }
  EXPECT_TRUE(disjoint) << s0.dump() << " and " << s1.dump() << " can both match one node";
  for (const auto& [a, b] : {std::pair{ds[0], ds[1]}, std::pair{ds[1], ds[0]}}) {
    EXPECT_FALSE(Selects(At(a, "/spec/selector/matchLabels"), At(b, "/spec/template/metadata/labels")))
        << Name(a) << "'s selector picks " << Name(b) << "'s pods";
  }

  std::set<std::pair<std::string, std::string>> ids, united;
  for (const auto& o : mixed) ids.insert({o.value("kind", ""), Name(o)});
  for (const char* single : {"default", "gpu"}) {
    for (const auto& o : overlays_[single]) {
      united.insert({o.value("kind", ""), Name(o)});
      if (o.value("kind", "") == "DaemonSet") {
        EXPECT_EQ(At(Find(mixed, "DaemonSet", Name(o)), "/spec"), At(o, "/spec")) << Name(o);
      }
    }
  }
  EXPECT_EQ(ids, united);

  const CommandResult applied = Kubectl({"apply", "-k", kManifests + "/overlays/cpu-and-gpu"});
  ASSERT_EQ(applied.exit_code, 0) << Show(applied);
  const CommandResult got = Kubectl({"get", "daemonsets", "-n", kSystemNs, "-o", "name"});
  EXPECT_EQ(got.out, "daemonset.apps/stasis-node-cpu\ndaemonset.apps/stasis-node-gpu\n")
      << Show(got);
}

const std::set<std::pair<std::string, std::string>> kMonitoringObjects = {
    {"ServiceMonitor", "stasis-node"},
    {"ServiceMonitor", "stasis-controller"},
    {"PrometheusRule", "stasis"},
    {"ConfigMap", "stasis-dashboard"},
};

// The component adds exactly the monitoring objects to any overlay that includes it, passes the
// operator's schemas, and scrapes every agent; the overlays without it have none of them.
TEST_F(DeployOverlaysTest, MonitoringComponentAddsItsObjectsOnlyWhereIncluded) {
  const json rule_file = Objects(kManifests + "/monitoring");  // also a kustomization itself
  const std::string dashboard =
      ReadFile(kManifests + "/monitoring/dashboards/stasis-snapshot-health.json");
  for (const auto& [overlay, plain] : overlays_) {
    SCOPED_TRACE(overlay);
    for (const auto& o : plain) {
      EXPECT_EQ(kMonitoringObjects.count({o.value("kind", ""), Name(o)}), 0u)
          << Name(o) << " without the monitoring component";
      EXPECT_EQ(o.value("apiVersion", "").rfind("monitoring.coreos.com/", 0), std::string::npos);
    }
    MonitoredOverlay with(overlay);
    const json objects = Objects(with.dir());
    std::set<std::pair<std::string, std::string>> added, before;
    for (const auto& o : plain) before.insert({o.value("kind", ""), Name(o)});
    for (const auto& o : objects) {
      const auto id = std::make_pair(o.value("kind", ""), Name(o));
      if (!before.count(id)) added.insert(id);
      const json ns = At(o, "/metadata/namespace");
      if (!ns.is_null()) {
        EXPECT_EQ(ns, kSystemNs) << Name(o);
      }
    }
    EXPECT_EQ(added, kMonitoringObjects);
    EXPECT_EQ(objects.size(), plain.size() + kMonitoringObjects.size());

    // The generated PrometheusRule as committed, the dashboard byte for byte, for the sidecar.
    EXPECT_EQ(At(Find(objects, "PrometheusRule", "stasis"), "/spec"),
              At(Find(rule_file, "PrometheusRule", "stasis"), "/spec"));
    const json cm = Find(objects, "ConfigMap", "stasis-dashboard");
    EXPECT_TRUE(At(cm, "/data/stasis-snapshot-health.json") == dashboard)
        << "stasis-dashboard does not hold dashboards/stasis-snapshot-health.json";
    EXPECT_EQ(At(cm, "/metadata/labels/grafana_dashboard"), "1");

    // Each ServiceMonitor finds its metrics Service, by labels and port name, in stasis-system;
    // the node agents' Service selects every agent's pods.
    for (const auto& [monitor, service] :
         {std::pair<std::string, std::string>{"stasis-node", "stasis-node-metrics"},
          {"stasis-controller", "stasis-controller-metrics"}}) {
      const json sm = Find(objects, "ServiceMonitor", monitor);
      const json svc = Find(objects, "Service", service);
      EXPECT_TRUE(Selects(At(sm, "/spec/selector/matchLabels"), At(svc, "/metadata/labels")))
          << monitor;
      EXPECT_EQ(At(sm, "/spec/namespaceSelector/matchNames"), json::array({kSystemNs}));
      EXPECT_EQ(At(sm, "/spec/endpoints/0/port"), At(svc, "/spec/ports/0/name")) << monitor;
    }
    const json node_service = At(Find(objects, "Service", "stasis-node-metrics"), "/spec/selector");
    for (const json& ds : OfKind(objects, "DaemonSet")) {
      EXPECT_TRUE(Selects(node_service, At(ds, "/spec/template/metadata/labels"))) << Name(ds);
    }
  }

  MonitoredOverlay mixed("cpu-and-gpu");
  const CommandResult applied = Kubectl({"apply", "-k", mixed.dir()});
  ASSERT_EQ(applied.exit_code, 0) << Show(applied);
  const CommandResult got = Kubectl({"get", "servicemonitors,prometheusrules", "-n", kSystemNs,
                                     "-o", "name"});
  EXPECT_EQ(got.out,
            "servicemonitor.monitoring.coreos.com/stasis-controller\n"
            "servicemonitor.monitoring.coreos.com/stasis-node\n"
            "prometheusrule.monitoring.coreos.com/stasis\n")
      << Show(got);
}

}  // namespace
}  // namespace stasis::testing
