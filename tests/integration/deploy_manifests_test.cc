// The deployment manifests (manifests/base, manifests/overlays/*) on a real kube-apiserver with
// --authorization-mode=RBAC: every overlay passes a server-side dry run; the RBAC, applied for
// real, allows every row of docs/deploy.md's audit table and denies every row of its deny
// table, and grants nothing beyond the audit table; the real `stasis node` and `stasis
// controller`, authenticated as their ServiceAccounts, do their work without one refused
// request; and the workloads use the binary's real flags, health endpoints and image.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/actor.h"
#include "api/names.h"
#include "base/time.h"
#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"
#include "tests/support/service_account_tokens.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";
const std::string kSystemNs = "stasis-system";  // manifests/base/kustomization.yaml
const std::string kActorNs = "rbac-actors";     // where this test's actors live

CommandResult Kubectl(const std::vector<std::string>& args, const std::string& stdin_data = "") {
  return ControlPlane::Get().Kubectl(args, stdin_data);
}

std::string Show(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json GetJson(const std::vector<std::string>& args) {
  std::vector<std::string> full = args;
  full.insert(full.end(), {"-o", "json"});
  CommandResult r = Kubectl(full);
  if (r.exit_code != 0) return json();
  return json::parse(r.out, nullptr, false);
}

// j at a JSON pointer, or null when absent (never nlohmann's assertion on a const miss).
json At(const json& j, const std::string& pointer) {
  if (!j.is_object() && !j.is_array()) return json();
  const json::json_pointer p(pointer);
  return j.contains(p) ? j.at(p) : json();
}

std::string Field(const json& j, const std::string& pointer) {
  const json v = At(j, pointer);
  return v.is_string() ? v.get<std::string>() : "";
}

// Polls pred until it holds or the deadline passes; gives up at once when `process` (the
// binary whose work pred waits for) has exited, e.g. on a refused request at start-up.
bool Eventually(const std::function<bool()>& pred, std::chrono::seconds deadline,
                BackgroundProcess* process = nullptr) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    if (process && !process->Running()) break;
    std::this_thread::sleep_for(200ms);
  }
  return pred();
}

std::string ServiceAccountUser(const std::string& role) {
  return "system:serviceaccount:" + kSystemNs + ":stasis-" + role;
}

// ---- docs/deploy.md's RBAC tables -------------------------------------------------------

struct RbacRow {
  std::string role, verb, resource, subresource, ns, name;
  std::string Describe() const {
    return role + " " + verb + " " + resource + (subresource.empty() ? "" : "/" + subresource) +
           (name.empty() ? "" : " name=" + name) + " ns=" + ns;
  }
};

std::string Trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t`"));
  s.erase(s.find_last_not_of(" \t`") + 1);
  return s;
}

// The rows between <!-- MARKER:begin --> and <!-- MARKER:end -->, header and rule skipped.
std::vector<RbacRow> ReadTable(const std::string& marker) {
  std::ifstream in(kSource + "/docs/deploy.md");
  std::vector<RbacRow> rows;
  bool inside = false;
  int skipped = 0;
  for (std::string line; std::getline(in, line);) {
    if (line == "<!-- " + marker + ":begin -->") {
      inside = true;
      continue;
    }
    if (line == "<!-- " + marker + ":end -->") break;
    if (!inside || line.empty()) continue;
    if (skipped < 2) {  // the header and |---|
      ++skipped;
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, '|');) cells.push_back(Trim(cell));
    // "| a | … | g |" splits into "", a … g.
    if (cells.size() < 8) {
      ADD_FAILURE() << "docs/deploy.md " << marker << ": malformed row: " << line;
      continue;
    }
    rows.push_back({cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]});
  }
  EXPECT_TRUE(inside) << "docs/deploy.md has no " << marker << " table";
  return rows;
}

// `kubectl auth can-i` as the role's ServiceAccount, in one namespace or ("") cluster-wide.
// Returns "yes" or "no"; anything else (a resource type the server does not know, which
// would make a deny row pass vacuously) is a test failure.
std::string CanI(const RbacRow& row, const std::string& ns) {
  std::vector<std::string> args = {"auth", "can-i", row.verb,
                                   row.resource + (row.name.empty() ? "" : "/" + row.name),
                                   "--as=" + ServiceAccountUser(row.role)};
  if (!row.subresource.empty()) args.push_back("--subresource=" + row.subresource);
  if (ns.empty()) {
    args.push_back("--all-namespaces");
  } else {
    args.insert(args.end(), {"-n", ns});
  }
  CommandResult r = Kubectl(args);
  const std::string answer = Trim(r.out.substr(0, r.out.find('\n')));
  EXPECT_TRUE((answer == "yes" && r.exit_code == 0) || (answer == "no" && r.exit_code == 1))
      << row.Describe() << ": " << Show(r);
  EXPECT_EQ(r.err.find("Warning"), std::string::npos) << row.Describe() << ": " << r.err;
  return answer;
}

// "role|verb|resource[.group]|subresource|scope|name", scope "*" for anything cluster-wide.
std::string Key(const std::string& role, const std::string& verb, const std::string& resource,
                const std::string& sub, const std::string& scope, const std::string& name) {
  return role + "|" + verb + "|" + resource + "|" + sub + "|" + scope + "|" + name;
}

std::string Scope(const std::string& table_ns) {
  return table_ns == "all" || table_ns == "cluster" ? "*" : table_ns;
}

// ---- the suite's one-time setup: dry runs, then the default overlay for real ----------------

struct Overlay {
  std::string dir;
  CommandResult dry_run;
  json objects;  // the dry run's objects as the server would store them
};

class DeployManifestsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ControlPlane::Get();
    // A server-side dry run refuses namespaced objects whose namespace does not exist yet.
    CommandResult ns = Kubectl({"apply", "-f", kSource + "/manifests/base/namespace.yaml"});
    ASSERT_EQ(ns.exit_code, 0) << Show(ns);
    for (const auto& entry : fs::directory_iterator(kSource + "/manifests/overlays")) {
      if (!entry.is_directory()) continue;
      Overlay o;
      o.dir = entry.path().string();
      o.dry_run = Kubectl({"apply", "--dry-run=server", "-k", o.dir, "-o", "json"});
      if (o.dry_run.exit_code == 0) o.objects = json::parse(o.dry_run.out, nullptr, false);
      overlays_.push_back(std::move(o));
    }
    // For real: can-i is only meaningful against RBAC that exists.
    CommandResult applied = Kubectl({"apply", "-k", kSource + "/manifests/overlays/default"});
    ASSERT_EQ(applied.exit_code, 0) << Show(applied);
    CommandResult actors_ns = Kubectl({"create", "namespace", kActorNs});
    ASSERT_EQ(actors_ns.exit_code, 0) << Show(actors_ns);
    ASSERT_EQ(Kubectl({"wait", "--for=condition=Established", "--timeout=60s",
                       "crd/actors.stasis.dev", "crd/actortemplates.stasis.dev",
                       "crd/workers.stasis.dev"})
                  .exit_code,
              0);
  }

  static const std::vector<Overlay>& Overlays() { return overlays_; }

  static json Find(const json& objects, const std::string& kind, const std::string& name) {
    for (const auto& item : At(objects, "/items")) {
      if (item.value("kind", "") == kind && Field(item, "/metadata/name") == name) return item;
    }
    return json();
  }

  static std::vector<RbacRow> Allowed() { return ReadTable("rbac-allowed"); }
  static std::vector<RbacRow> Denied() { return ReadTable("rbac-denied"); }

  static inline std::vector<Overlay> overlays_;
};

TEST_F(DeployManifestsTest, EveryOverlayPassesAServerSideDryRun) {
  ASSERT_GE(Overlays().size(), 3u)
      << "expected at least manifests/overlays/{default,gpu,cpu-and-gpu}";
  for (const Overlay& o : Overlays()) {
    SCOPED_TRACE(o.dir);
    ASSERT_EQ(o.dry_run.exit_code, 0) << Show(o.dry_run);
    ASSERT_TRUE(o.objects.is_object()) << o.dry_run.out.substr(0, 500);
    std::map<std::string, int> kinds;
    for (const auto& item : At(o.objects, "/items")) kinds[item.value("kind", "")]++;
    EXPECT_EQ(kinds["Namespace"], 1);
    EXPECT_EQ(kinds["CustomResourceDefinition"], 3);
    EXPECT_EQ(kinds["ServiceAccount"], 2);
    // The roles' two, stasis-metrics-reader and stasis-image-pull-secrets (both bound to nothing).
    EXPECT_EQ(kinds["ClusterRole"], 4);
    EXPECT_EQ(kinds["ClusterRoleBinding"], 2);
    EXPECT_EQ(kinds["Role"], 2);
    EXPECT_EQ(kinds["RoleBinding"], 2);
    EXPECT_GE(kinds["DaemonSet"], 1);  // cpu-and-gpu has two (deploy_overlays_test.cc)
    EXPECT_EQ(kinds["Deployment"], 1);
    EXPECT_EQ(kinds["Service"], 2);
    EXPECT_EQ(kinds["PodDisruptionBudget"], 1);
    for (const auto& item : At(o.objects, "/items")) {
      const json ns = At(item, "/metadata/namespace");
      if (!ns.is_null()) {
        EXPECT_EQ(ns, kSystemNs) << item["metadata"].dump();
      }
    }
  }
  // manifests/crd/Kustomization has no .yaml extension so that the directory form the demo
  // and the end-to-end tests use still applies only the CRDs.
  CommandResult crds =
      Kubectl({"apply", "--dry-run=server", "-f", kSource + "/manifests/crd/", "-o", "name"});
  EXPECT_EQ(crds.exit_code, 0) << Show(crds);
  EXPECT_EQ(crds.out,
            "customresourcedefinition.apiextensions.k8s.io/actors.stasis.dev\n"
            "customresourcedefinition.apiextensions.k8s.io/actortemplates.stasis.dev\n"
            "customresourcedefinition.apiextensions.k8s.io/workers.stasis.dev\n");
}

// Every STASIS_* variable must be a flag of the role: the environment is only read for
// defined flags, so a misspelt one would be ignored without a word.
std::set<std::string> FlagEnvNames(const std::string& role) {
  auto r = RunCommand({kStasis, role, "--help"}, 30s);
  EXPECT_TRUE(r.ok() && r->exit_code == 0) << kStasis << " " << role << " --help";
  std::set<std::string> names;
  if (!r.ok()) return names;
  std::regex env_re(R"(\[env (STASIS_[A-Z0-9_]+)\])");
  for (std::sregex_iterator it(r->out.begin(), r->out.end(), env_re), end; it != end; ++it) {
    names.insert((*it)[1]);
  }
  EXPECT_FALSE(names.empty()) << r->out;
  return names;
}

std::map<std::string, json> EnvOf(const json& container) {
  std::map<std::string, json> env;
  for (const auto& e : container.value("env", json::array())) env[e.value("name", "")] = e;
  return env;
}

// The container port named `name`, or 0.
int NamedPort(const json& container, const std::string& name) {
  for (const auto& p : container.value("ports", json::array())) {
    if (p.value("name", "") == name) return p.value("containerPort", 0);
  }
  return 0;
}

// /metrics over HTTPS on port `metrics`, authenticated and authorized (--metrics-secure); the
// probes plain HTTP on port `health`, which the kubelet reaches without credentials.
void CheckHealthProbes(const json& container, const std::map<std::string, json>& env) {
  ASSERT_TRUE(env.count("POD_IP"));
  EXPECT_EQ(At(env.at("POD_IP"), "/valueFrom/fieldRef/fieldPath"), "status.podIP");
  for (const auto& [var, port_name] : {std::pair<std::string, std::string>{"STASIS_METRICS_ADDR", "metrics"},
                                       {"STASIS_HEALTH_PROBE_ADDR", "health"}}) {
    ASSERT_TRUE(env.count(var)) << var;
    const std::string addr = env.at(var).value("value", "");
    // Bound to the pod's IP, not every interface (the binary's default is loopback, which the
    // kubelet's probes could not reach).
    EXPECT_EQ(addr.substr(0, addr.rfind(':')), "$(POD_IP)") << var;
    EXPECT_EQ(NamedPort(container, port_name), std::stoi(addr.substr(addr.rfind(':') + 1)))
        << "port '" << port_name << "' must be " << var << "'s";
  }
  ASSERT_TRUE(env.count("STASIS_METRICS_SECURE"));
  EXPECT_EQ(env.at("STASIS_METRICS_SECURE").value("value", ""), "true");
  EXPECT_EQ(At(container, "/livenessProbe/httpGet/path"), "/healthz");
  EXPECT_EQ(At(container, "/livenessProbe/httpGet/port"), "health");
  EXPECT_EQ(At(container, "/readinessProbe/httpGet/path"), "/readyz");
  EXPECT_EQ(At(container, "/readinessProbe/httpGet/port"), "health");
  EXPECT_NE(At(container, "/livenessProbe/httpGet/scheme"), "HTTPS");
}

// One node agent's DaemonSet (an overlay may hold several: stasis-node-cpu, stasis-node-gpu): its
// flags, its node from the downward API, privileged, its probes, the runsc the image installs.
void CheckNodeAgent(const json& ds, const std::set<std::string>& flags,
                    const std::string& image_install) {
  SCOPED_TRACE(Field(ds, "/metadata/name"));
  const json pod = At(ds, "/spec/template/spec");
  ASSERT_EQ(At(pod, "/containers").size(), 1u) << ds.dump();
  const json node = At(pod, "/containers/0");
  auto env = EnvOf(node);
  for (const auto& [name, e] : env) {
    if (name.rfind("STASIS_", 0) == 0) {
      EXPECT_TRUE(flags.count(name)) << name << " is no flag of stasis node";
    }
  }
  ASSERT_TRUE(env.count("STASIS_NODE_NAME"));
  EXPECT_EQ(At(env["STASIS_NODE_NAME"], "/valueFrom/fieldRef/fieldPath"), "spec.nodeName");
  EXPECT_EQ(At(env["STASIS_LEASE_NAMESPACE"], "/valueFrom/fieldRef/fieldPath"),
            "metadata.namespace");
  EXPECT_EQ(At(node, "/securityContext/privileged"), true);
  EXPECT_EQ(At(pod, "/serviceAccountName"), "stasis-node");
  CheckHealthProbes(node, env);
  const json args = At(node, "/args");
  const bool plain = args == json({"stasis", "node"});
  const bool wrapped =
      args.size() == 3 && args[0] == "sh" && args[1] == "-c" &&
      std::regex_search(args[2].get<std::string>(), std::regex(R"(exec stasis node\s*$)"));
  EXPECT_TRUE(plain || wrapped) << args.dump();
  // The runsc the agent is told to run is the one the image installs (both image builds install
  // stasis's files with hack/image-install.sh).
  const std::string runsc = Field(env["STASIS_RUNSC"], "/value");
  EXPECT_NE(image_install.find("\"${root}" + runsc + "\""), std::string::npos)
      << "hack/image-install.sh does not install runsc at '" << runsc << "'";
}

// Whether a label selector (matchLabels or a Service's selector) picks pods labelled `labels`.
bool Selects(const json& selector, const json& labels) {
  if (!selector.is_object() || selector.empty() || !labels.is_object()) return false;
  for (const auto& [k, v] : selector.items()) {
    if (!labels.contains(k) || labels[k] != v) return false;
  }
  return true;
}

TEST_F(DeployManifestsTest, WorkloadsUseTheRealFlagsProbesAndOneImage) {
  const std::set<std::string> node_env = FlagEnvNames("node");
  const std::set<std::string> controller_env = FlagEnvNames("controller");
  const std::string image_install = ReadFile(kSource + "/hack/image-install.sh");
  for (const Overlay& o : Overlays()) {
    SCOPED_TRACE(o.dir);
    ASSERT_TRUE(o.objects.is_object());
    const json deploy = Find(o.objects, "Deployment", "stasis-controller");
    const json ctl_pod = At(deploy, "/spec/template/spec");
    ASSERT_EQ(At(ctl_pod, "/containers").size(), 1u) << deploy.dump();
    const json ctl = At(ctl_pod, "/containers/0");
    std::vector<json> daemonsets;
    for (const auto& item : At(o.objects, "/items")) {
      if (item.value("kind", "") == "DaemonSet") daemonsets.push_back(item);
    }
    ASSERT_FALSE(daemonsets.empty());
    for (const json& ds : daemonsets) CheckNodeAgent(ds, node_env, image_install);

    // The controller: its flags, leader election, two replicas, its probes.
    auto cenv = EnvOf(ctl);
    for (const auto& [name, e] : cenv) {
      if (name.rfind("STASIS_", 0) == 0) {
        EXPECT_TRUE(controller_env.count(name)) << name << " is no flag of stasis controller";
      }
    }
    EXPECT_EQ(At(ctl, "/args"), json({"stasis", "controller"}));
    EXPECT_EQ(At(cenv["STASIS_LEADER_ELECT"], "/value"), "true");
    EXPECT_EQ(At(cenv["STASIS_NAMESPACE"], "/valueFrom/fieldRef/fieldPath"), "metadata.namespace");
    EXPECT_EQ(At(deploy, "/spec/replicas"), 2);
    EXPECT_EQ(At(ctl_pod, "/serviceAccountName"), "stasis-controller");
    CheckHealthProbes(ctl, cenv);

    // One image for every container, init containers included.
    std::set<std::string> images;
    std::vector<json> pods = {ctl_pod};
    for (const json& ds : daemonsets) pods.push_back(At(ds, "/spec/template/spec"));
    for (const json& pod : pods) {
      for (const char* list : {"containers", "initContainers"}) {
        for (const auto& c : pod.value(list, json::array())) images.insert(c.value("image", ""));
      }
    }
    EXPECT_EQ(images.size(), 1u) << json(images).dump();

    // The PodDisruptionBudget and the metrics Services select the pods they are for: the
    // node agents' Service every DaemonSet's pods, and never the controller's.
    const json pdb = Find(o.objects, "PodDisruptionBudget", "stasis-controller");
    const json ctl_labels = At(deploy, "/spec/selector/matchLabels");
    EXPECT_FALSE(ctl_labels.is_null());
    EXPECT_EQ(At(pdb, "/spec/selector/matchLabels"), ctl_labels);
    const json node_service = At(Find(o.objects, "Service", "stasis-node-metrics"), "/spec/selector");
    for (const json& ds : daemonsets) {
      EXPECT_TRUE(Selects(node_service, At(ds, "/spec/template/metadata/labels")))
          << Field(ds, "/metadata/name") << " " << node_service.dump();
    }
    EXPECT_FALSE(Selects(node_service, At(deploy, "/spec/template/metadata/labels")));
    EXPECT_EQ(At(Find(o.objects, "Service", "stasis-controller-metrics"), "/spec/selector"),
              ctl_labels);
    for (const char* svc : {"stasis-node-metrics", "stasis-controller-metrics"}) {
      EXPECT_EQ(At(Find(o.objects, "Service", svc), "/spec/ports/0/targetPort"), "metrics") << svc;
    }
    // What Prometheus is bound to: get on the non-resource URL /metrics, nothing else.
    EXPECT_EQ(At(Find(o.objects, "ClusterRole", "stasis-metrics-reader"), "/rules"),
              json::parse(R"([{"nonResourceURLs":["/metrics"],"verbs":["get"]}])"));
  }
}

// The gpu overlay: its DaemonSet on opted-in nodes, the CDI spec it installs, and one worker
// per GPU the agent discovers.
TEST_F(DeployManifestsTest, GpuOverlayAsksForEveryGpuAndInstallsItsCdiSpec) {
  const Overlay* gpu = nullptr;
  for (const Overlay& o : Overlays()) {
    if (fs::path(o.dir).filename() == "gpu") gpu = &o;
  }
  ASSERT_NE(gpu, nullptr);
  ASSERT_TRUE(gpu->objects.is_object());
  const json ds = Find(gpu->objects, "DaemonSet", "stasis-node-gpu");
  EXPECT_EQ(At(ds, "/spec/template/spec/nodeSelector"), json({{"stasis.dev/agent", "gpu"}}));

  // Its CDI ConfigMap is manifests/cdi/'s spec, byte for byte, and it is the one the
  // DaemonSet mounts (kustomize replaced the generated name in the volume).
  std::string cdi;
  for (const auto& item : At(gpu->objects, "/items")) {
    if (item.value("kind", "") == "ConfigMap" &&
        Field(item, "/metadata/name").rfind("stasis-cdi", 0) == 0 &&
        Field(item, "/data/stasis-cuda-checkpoint.yaml") ==
            ReadFile(kSource + "/manifests/cdi/stasis-cuda-checkpoint.yaml")) {
      cdi = Field(item, "/metadata/name");
    }
  }
  EXPECT_FALSE(cdi.empty()) << "the gpu overlay lacks the stasis-cdi ConfigMap of manifests/cdi/";
  std::string mounted;
  for (const auto& v : At(ds, "/spec/template/spec/volumes")) {
    if (v.value("name", "") == "cdi-spec") mounted = Field(v, "/configMap/name");
  }
  EXPECT_EQ(mounted, cdi);

  // Discovery is the agent's own (--gpus=auto: NVML, else the driver's /proc files; unit and
  // e2e tests): the overlay only asks for it, in place of the base's CPU workers.
  const json container = At(ds, "/spec/template/spec/containers/0");
  EXPECT_EQ(container.value("args", json()), json({"stasis", "node"}));
  std::map<std::string, std::string> env;
  for (const auto& e : container.value("env", json::array())) env[e.value("name", "")] = e.value("value", "");
  EXPECT_EQ(env["STASIS_GPUS"], "auto");
  EXPECT_EQ(env.count("STASIS_WORKERS"), 0u) << "--workers would be ignored beside --gpus";
}

TEST_F(DeployManifestsTest, ServiceAccountsMayDoEveryVerbTheCodeUses) {
  const auto rows = Allowed();
  ASSERT_FALSE(rows.empty());
  for (const RbacRow& row : rows) {
    const std::string ns = Scope(row.ns) == "*" ? "" : row.ns;
    EXPECT_EQ(CanI(row, ns), "yes") << row.Describe();
  }
}

TEST_F(DeployManifestsTest, ServiceAccountsAreDeniedEverythingElseListed) {
  const auto rows = Denied();
  ASSERT_FALSE(rows.empty());
  for (const RbacRow& row : rows) {
    std::vector<std::string> namespaces;
    if (row.ns == "all") {
      namespaces = {"", kSystemNs, "default"};
    } else if (row.ns == "cluster") {
      namespaces = {""};
    } else {
      namespaces = {row.ns};
    }
    for (const std::string& ns : namespaces) {
      EXPECT_EQ(CanI(row, ns), "no") << row.Describe() << " asked in '" << ns << "'";
    }
  }
}

// What the server says each ServiceAccount is bound to, rule by rule, equals the audit table:
// no verb is granted that the code does not use.
TEST_F(DeployManifestsTest, RbacGrantsNothingBeyondTheAuditTable) {
  const json cluster_roles = GetJson({"get", "clusterroles"});
  const json roles = GetJson({"get", "roles", "--all-namespaces"});
  const json cluster_bindings = GetJson({"get", "clusterrolebindings"});
  const json bindings = GetJson({"get", "rolebindings", "--all-namespaces"});
  ASSERT_TRUE(cluster_roles.is_object() && roles.is_object() && cluster_bindings.is_object() &&
              bindings.is_object());
  auto rules_of = [&](const json& ref, const std::string& binding_ns) {
    const bool cluster = Field(ref, "/kind") == "ClusterRole";
    for (const auto& r : At(cluster ? cluster_roles : roles, "/items")) {
      if (Field(r, "/metadata/name") != Field(ref, "/name")) continue;
      if (!cluster && Field(r, "/metadata/namespace") != binding_ns) continue;
      return r.value("rules", json::array());
    }
    ADD_FAILURE() << "binding refers to a missing " << ref.dump();
    return json::array();
  };
  std::set<std::string> granted;
  for (const auto* list : {&cluster_bindings, &bindings}) {
    for (const auto& b : At(*list, "/items")) {
      const std::string scope =
          b.contains("metadata") ? b["metadata"].value("namespace", "*") : "*";
      for (const auto& s : b.value("subjects", json::array())) {
        const std::string subject = s.value("name", "");
        if (s.value("kind", "") != "ServiceAccount" || s.value("namespace", "") != kSystemNs ||
            subject.rfind("stasis-", 0) != 0) {
          continue;
        }
        const std::string role = subject.substr(std::string("stasis-").size());
        for (const auto& rule : rules_of(At(b, "/roleRef"), scope)) {
          json names = rule.value("resourceNames", json::array({""}));
          for (const auto& group : rule.value("apiGroups", json::array())) {
            for (const auto& res : rule.value("resources", json::array())) {
              std::string resource = res, sub;
              if (auto slash = resource.find('/'); slash != std::string::npos) {
                sub = resource.substr(slash + 1);
                resource.resize(slash);
              }
              if (group != "") resource += "." + group.get<std::string>();
              for (const auto& verb : rule.value("verbs", json::array())) {
                for (const auto& name : names)
                  granted.insert(Key(role, verb, resource, sub, scope, name));
              }
            }
          }
        }
      }
    }
  }
  std::set<std::string> audited;
  for (const RbacRow& row : Allowed()) {
    audited.insert(Key(row.role, row.verb, row.resource, row.subresource, Scope(row.ns), row.name));
  }
  for (const auto& k : granted)
    EXPECT_TRUE(audited.count(k)) << "granted but not in the audit table: " << k;
  for (const auto& k : audited)
    EXPECT_TRUE(granted.count(k)) << "in the audit table but not granted: " << k;
}

// The text between <!-- MARKER:begin --> and <!-- MARKER:end --> of a doc, inside its ``` fence.
std::string DocBlock(const std::string& doc, const std::string& marker) {
  const std::string text = ReadFile(kSource + "/docs/" + doc);
  const size_t begin = text.find("<!-- " + marker + ":begin -->");
  const size_t end = text.find("<!-- " + marker + ":end -->");
  if (begin == std::string::npos || end == std::string::npos) return "";
  const std::string block = text.substr(begin, end - begin);
  const size_t open = block.find("```yaml\n");
  const size_t close = block.rfind("```");
  if (open == std::string::npos || close <= open) return "";
  return block.substr(open + 8, close - open - 8);
}

// Pull secrets (spec.imagePullSecrets): the ClusterRole grants `get` on Secrets and nothing
// else, no overlay binds it, and the RoleBinding docs/security.md gives (applied as written, its
// namespace replaced) lets the node agents read Secrets in that namespace only, by name.
TEST_F(DeployManifestsTest, ImagePullSecretsRoleIsGetOnlyAndBoundOnlyWhereANamespaceOptsIn) {
  for (const Overlay& o : Overlays()) {
    SCOPED_TRACE(o.dir);
    ASSERT_TRUE(o.objects.is_object());
    EXPECT_EQ(At(Find(o.objects, "ClusterRole", "stasis-image-pull-secrets"), "/rules"),
              json::parse(R"([{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}])"));
    for (const auto& item : At(o.objects, "/items")) {
      const std::string kind = item.value("kind", "");
      if (kind != "ClusterRoleBinding" && kind != "RoleBinding") continue;
      EXPECT_NE(Field(item, "/roleRef/name"), "stasis-image-pull-secrets")
          << "the base must not bind it: " << item["metadata"].dump();
    }
  }
  const RbacRow get{"node", "get", "secrets", "", "", ""};
  const RbacRow list{"node", "list", "secrets", "", "", ""};
  const RbacRow watch{"node", "watch", "secrets", "", "", ""};
  const RbacRow controller_get{"controller", "get", "secrets", "", "", ""};
  EXPECT_EQ(CanI(get, kActorNs), "no") << "before the namespace opts in";

  std::string binding = DocBlock("security.md", "image-pull-secrets-binding");
  ASSERT_NE(binding.find("kind: RoleBinding"), std::string::npos) << binding;
  const std::string ns_line = "namespace: team-a";
  const size_t at = binding.find(ns_line);
  ASSERT_NE(at, std::string::npos) << binding;
  binding.replace(at, ns_line.size(), "namespace: " + kActorNs);
  CommandResult r = Kubectl({"apply", "-f", "-"}, binding);
  ASSERT_EQ(r.exit_code, 0) << Show(r) << "\n" << binding;
  struct Unbind {
    ~Unbind() {
      Kubectl({"delete", "rolebinding", "stasis-image-pull-secrets", "-n", kActorNs, "--wait"});
    }
  } unbind;

  EXPECT_EQ(CanI(get, kActorNs), "yes");
  EXPECT_EQ(CanI(list, kActorNs), "no");
  EXPECT_EQ(CanI(watch, kActorNs), "no");
  for (const std::string& other : {std::string("default"), kSystemNs, std::string("")}) {
    EXPECT_EQ(CanI(get, other), "no") << "asked in '" << other << "'";
  }
  EXPECT_EQ(CanI(controller_get, kActorNs), "no");
}

// ---- the real binaries, authenticated as their ServiceAccounts -----------------------------

// A kubeconfig with a token for the ServiceAccount stasis-<role> (the TokenRequest API); the
// node agent's bound to a Pod on `node`, as the kubelet projects it (the node-scope admission
// policy refuses the agent's writes without the node in its token).
std::string ServiceAccountKubeconfig(const std::string& role, const fs::path& dir,
                                     const std::string& node = "") {
  const std::string token = role == "node" ? NodeAgentToken(node) : UnboundToken(role);
  EXPECT_FALSE(token.empty());
  return TokenKubeconfig(token, role, dir);
}

// A refused request shows in the logs as the API's Forbidden, mapped to PermissionDenied.
void ExpectNothingRefused(const BackgroundProcess& p, const std::string& what) {
  const std::string log = p.Log();
  EXPECT_EQ(log.find("PermissionDenied"), std::string::npos) << what << " log:\n" << log;
  EXPECT_EQ(log.find("forbidden"), std::string::npos) << what << " log:\n" << log;
}

void Apply(const json& object) {
  CommandResult r = Kubectl({"apply", "-f", "-"}, object.dump());
  ASSERT_EQ(r.exit_code, 0) << Show(r) << "\n" << object.dump();
}

void PatchStatus(const std::string& resource, const std::string& name, const std::string& ns,
                 const json& patch) {
  std::vector<std::string> args = {"patch",        resource, name,        "--subresource=status",
                                   "--type=merge", "-p",     patch.dump()};
  if (!ns.empty()) args.insert(args.end(), {"-n", ns});
  CommandResult r = Kubectl(args);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
}

json Actor(const std::string& name, const std::string& node, const std::string& bundle) {
  json a = {{"apiVersion", api::kApiVersion},
            {"kind", api::kActorKind},
            {"metadata", {{"name", name}, {"namespace", kActorNs}}},
            {"spec", {{"runtime", "gvisor"}, {"bundle", bundle}, {"desiredState", "Running"}}}};
  if (!node.empty()) a["spec"]["nodeName"] = node;
  return a;
}

json Worker(const std::string& node) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kWorkerKind},
          {"metadata", {{"name", node + "-slot0"}, {"labels", {{api::kNodeLabel, node}}}}},
          {"spec", {{"nodeName", node}, {"devices", json::array()}}}};
}

json HeartbeatLease(const std::string& node, std::chrono::system_clock::time_point renewed,
                    int duration_seconds) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", "stasis-node-" + node}, {"namespace", kSystemNs}}},
          {"spec",
           {{"holderIdentity", node},
            {"leaseDurationSeconds", duration_seconds},
            {"renewTime", FormatMicroTime(renewed)}}}};
}

// True once the API server answers NotFound (not on any other failure of kubectl).
bool Gone(const std::string& resource, const std::string& name, const std::string& ns) {
  CommandResult r = Kubectl({"get", resource, name, "-n", ns, "-o", "name"});
  return r.exit_code != 0 && r.err.find("NotFound") != std::string::npos;
}

std::string ConditionReason(const json& actor, const std::string& type) {
  if (!actor.is_object()) return "";
  for (const auto& c : actor.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("reason", "");
  }
  return "";
}

bool HasEvent(const std::string& actor, const std::string& reason, const std::string& component) {
  const json events = GetJson({"get", "events", "-n", kActorNs});
  if (!events.is_object()) return false;
  for (const auto& e : At(events, "/items")) {
    if (Field(e, "/involvedObject/name") == actor && Field(e, "/reason") == reason &&
        Field(e, "/source/component") == component) {
      return true;
    }
  }
  return false;
}

TEST_F(DeployManifestsTest, NodeAgentWorksWithOnlyItsServiceAccount) {
  const std::string node = "rbac-node";
  TempDir tmp;
  const std::string kubeconfig = ServiceAccountKubeconfig("node", tmp.path(), node);
  BackgroundProcess agent({kStasis, "node", "--kubeconfig=" + kubeconfig, "--node-name=" + node,
                           "--root=" + (tmp.path() / "root").string(), "--runsc=" + PinnedRunsc(),
                           "--metrics-addr=127.0.0.1:0", "--workers=1", "--heartbeat-period=1",
                           "--heartbeat-lease-duration=3", "--lease-namespace=" + kSystemNs},
                          (tmp.path() / "agent.log").string());
  auto fail = [&] { return "agent log:\n" + agent.LogTail(); };

  // Registration: create, then /status patch to Free.
  json worker;
  ASSERT_TRUE(Eventually(
      [&] {
        worker = GetJson({"get", "worker", node + "-slot0"});
        return Field(worker, "/status/phase") == "Free";
      },
      60s, &agent))
      << fail();
  // The heartbeat: created, then patched every second.
  std::string first_renew;
  ASSERT_TRUE(Eventually(
      [&] {
        first_renew = Field(GetJson({"get", "lease", "stasis-node-" + node, "-n", kSystemNs}),
                            "/spec/renewTime");
        return !first_renew.empty();
      },
      30s, &agent))
      << fail();
  ASSERT_TRUE(Eventually(
      [&] {
        const auto now = Field(GetJson({"get", "lease", "stasis-node-" + node, "-n", kSystemNs}),
                               "/spec/renewTime");
        return !now.empty() && now != first_renew;
      },
      30s, &agent))
      << fail();

  // An actor with a bundle that cannot exist: finalizer (patch), worker claimed and freed
  // (list, /status patches), FAILED with BadBundle (/status patch), an Event (create).
  const std::string name = "bad-bundle";
  // Under the default --bundle-root (<root>/bundles), so that it is runsc's check that fails.
  Apply(Actor(name, node, (tmp.path() / "root" / "bundles" / "nonexistent").string()));
  json actor;
  ASSERT_TRUE(Eventually(
      [&] {
        actor = GetJson({"get", "actor", name, "-n", kActorNs});
        return Field(actor, "/status/status") == api::ToString(api::ActorState::kFailed);
      },
      60s, &agent))
      << fail();
  EXPECT_EQ(ConditionReason(actor, "Ready"), "BadBundle") << actor.dump();
  EXPECT_EQ(actor["metadata"]["finalizers"], json({api::kActorFinalizer}));
  EXPECT_TRUE(
      Eventually([&] { return HasEvent(name, "ResumeFailed", "stasis-node"); }, 30s, &agent))
      << fail();
  json after = GetJson({"get", "worker", node + "-slot0"});
  EXPECT_EQ(Field(after, "/status/phase"), "Free");
  EXPECT_NE(Field(after, "/metadata/resourceVersion"), Field(worker, "/metadata/resourceVersion"))
      << "the worker was never claimed";

  // Deletion: the agent removes its finalizer.
  CommandResult del = Kubectl({"delete", "actor", name, "-n", kActorNs, "--wait=false"});
  ASSERT_EQ(del.exit_code, 0) << Show(del);
  EXPECT_TRUE(Eventually([&] { return Gone("actor", name, kActorNs); }, 60s, &agent)) << fail();

  EXPECT_EQ(agent.Stop(30s), 0) << fail();
  ExpectNothingRefused(agent, "stasis node");
}

TEST_F(DeployManifestsTest, ControllerWorksWithOnlyItsServiceAccount) {
  const auto now = std::chrono::system_clock::now();
  const std::string live = "rbac-live", dead = "rbac-dead";
  // A live node with a free worker, and a lost node whose worker a stranded actor holds.
  for (const std::string& n : {live, dead}) {
    Apply(Worker(n));
    PatchStatus("worker", n + "-slot0", "", {{"status", {{"phase", "Free"}}}});
  }
  Apply(HeartbeatLease(live, now, 3600));
  Apply(HeartbeatLease(dead, now - 1h, 5));  // lost 5 s after the controller first sees it
  Apply(Actor("bind-me", "", "/var/lib/stasis/bundles/counter"));
  Apply(Actor("stranded", "", "/var/lib/stasis/bundles/counter"));
  PatchStatus("actor", "stranded", kActorNs,
              {{"status",
                {{"status", api::ToString(api::ActorState::kSuspending)},
                 {"nodeName", dead},
                 {"workerName", dead + "-slot0"},
                 {"transitionStartTime", FormatTime(now)}}}});
  PatchStatus(
      "worker", dead + "-slot0", "",
      {{"status",
        {{"phase", "Held"}, {"actorRef", {{"namespace", kActorNs}, {"name", "stranded"}}}}}});
  // An actor deleted while on the lost node: only the controller can finish its deletion.
  json orphan = Actor("orphan", "", "/var/lib/stasis/bundles/counter");
  orphan["metadata"]["finalizers"] = {api::kActorFinalizer};
  Apply(orphan);
  PatchStatus("actor", "orphan", kActorNs, {{"status", {{"nodeName", dead}}}});
  ASSERT_EQ(Kubectl({"delete", "actor", "orphan", "-n", kActorNs, "--wait=false"}).exit_code, 0);

  TempDir tmp;
  const std::string kubeconfig = ServiceAccountKubeconfig("controller", tmp.path());
  BackgroundProcess controller(
      {kStasis, "controller", "--kubeconfig=" + kubeconfig, "--metrics-addr=127.0.0.1:0",
       "--metrics-secure=true", "--health-probe-addr=127.0.0.1:0", "--namespace=" + kSystemNs, "--leader-elect=true", "--leader-elect-lease-duration=4s",
       "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s", "--grace=0"},
      (tmp.path() / "controller.log").string());
  auto fail = [&] { return "controller log:\n" + controller.LogTail(); };

  // Leader election: create (or take) the Lease, then renew it by update.
  std::string first_renew;
  ASSERT_TRUE(Eventually(
      [&] {
        const json lease = GetJson({"get", "lease", "stasis-controller", "-n", kSystemNs});
        first_renew = Field(lease, "/spec/renewTime");
        return !Field(lease, "/spec/holderIdentity").empty();
      },
      60s, &controller))
      << fail();
  ASSERT_TRUE(Eventually(
      [&] {
        const auto renew = Field(GetJson({"get", "lease", "stasis-controller", "-n", kSystemNs}),
                                 "/spec/renewTime");
        return !renew.empty() && renew != first_renew;
      },
      30s, &controller))
      << fail();

  // /metrics as the manifests serve it (--metrics-secure), the reviews made with only the
  // ServiceAccount's RBAC: no token is 401; the controller's own token is authenticated but
  // not bound to stasis-metrics-reader, 403 (a missing review verb would make both 503).
  std::smatch listen;
  const std::string log = controller.Log();
  ASSERT_TRUE(std::regex_search(log, listen, std::regex(R"(op=listen address=\S+ port=(\d+) tls=true)")))
      << fail();
  const std::string metrics_url = "https://127.0.0.1:" + listen[1].str() + "/metrics";
  auto scrape = [&](const std::string& token) {
    std::vector<std::string> argv = {"curl", "-sk", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}"};
    if (!token.empty()) argv.insert(argv.end(), {"-H", "Authorization: Bearer " + token});
    argv.push_back(metrics_url);
    auto r = RunCommand(argv, 20s);
    return r.ok() ? r->out : r.status().ToString();
  };
  EXPECT_EQ(scrape(""), "401") << fail();
  EXPECT_EQ(scrape(UnboundToken("controller")), "403") << fail();

  // Binding: the label (patch) and status.nodeName (/status patch).
  json bound;
  EXPECT_TRUE(Eventually(
      [&] {
        bound = GetJson({"get", "actor", "bind-me", "-n", kActorNs});
        return Field(bound, "/status/nodeName") == live;
      },
      60s, &controller))
      << fail();
  EXPECT_EQ(Field(bound, "/metadata/labels/" + std::string("stasis.dev~1node")), live);

  // Forced cleanup: the worker freed (/status patch), the actor FAILED with Stuck=NodeLost
  // (/status patch), an Event (create).
  json stranded;
  EXPECT_TRUE(Eventually(
      [&] {
        stranded = GetJson({"get", "actor", "stranded", "-n", kActorNs});
        return Field(stranded, "/status/status") == api::ToString(api::ActorState::kFailed);
      },
      60s, &controller))
      << fail();
  EXPECT_EQ(ConditionReason(stranded, "Stuck"), "NodeLost") << stranded.dump();
  EXPECT_EQ(Field(GetJson({"get", "worker", dead + "-slot0"}), "/status/phase"), "Free");
  EXPECT_TRUE(Eventually([&] { return HasEvent("stranded", "ForcedCleanup", "stasis-controller"); },
                         30s, &controller))
      << fail();

  // The lost node's deleted actor: its finalizer removed (patch), so it is gone.
  EXPECT_TRUE(Eventually([&] { return Gone("actor", "orphan", kActorNs); }, 60s, &controller))
      << fail();

  // SIGTERM releases the Lease (update).
  EXPECT_EQ(controller.Stop(30s), 0) << fail();
  EXPECT_EQ(Field(GetJson({"get", "lease", "stasis-controller", "-n", kSystemNs}),
                  "/spec/holderIdentity"),
            "")
      << fail();
  ExpectNothingRefused(controller, "stasis controller");
}

}  // namespace
}  // namespace stasis::testing
