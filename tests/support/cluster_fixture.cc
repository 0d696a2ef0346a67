#include "tests/support/cluster_fixture.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "tests/support/service_monitor.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const fs::path kSource = STASIS_SOURCE_DIR;
// Under the DaemonSet's bundle root (its hostPath), where the agent may read bundles from.
const fs::path kBundle = "/var/lib/stasis/bundles/stasis-cluster-test-counter";

}  // namespace

bool Eventually(const std::function<bool()>& pred, std::chrono::seconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(500ms);
  }
  return pred();
}

void ClusterTest::SetUpTestSuite() {
  dir_ = new TempDir("stasis-test-cluster-");
  auto up = Hack({"cluster.sh", "up"}, 900s);
  ASSERT_TRUE(up.success()) << up.Summary() << "\n" << up.err;
  ASSERT_TRUE(Hack({"cluster.sh", "import", ImageArchive().string(), "docker.io/library/stasis:0.1.0"}, 300s).success());
  ASSERT_TRUE(Kubectl({"label", "node", kClusterNode, "stasis.dev/agent=cpu"}).success());
  auto apply = Kubectl({"apply", "-k", (kSource / "manifests/overlays/local").string()});
  ASSERT_TRUE(apply.success()) << apply.err;
  auto r = Kubectl({"-n", "stasis-system", "rollout", "status", "deployment/stasis-controller", "--timeout=240s"}, 300s);
  ASSERT_TRUE(r.success()) << r.out << r.err;
  ASSERT_TRUE(AgentReady(240s));
  ASSERT_TRUE(Hack({"make-bundle.sh", kBundle.string()}, 120s).success());
  ASSERT_TRUE(Kubectl({"create", "namespace", kClusterNamespace}).success());
}

void ClusterTest::TearDownTestSuite() {
  // Actors first, while their agent still runs to release them; then the cluster.
  (void)Kubectl({"-n", kClusterNamespace, "delete", "actors", "--all", "--timeout=120s"}, 150s);
  auto down = Hack({"cluster.sh", "down"}, 300s);
  EXPECT_TRUE(down.success()) << down.Summary() << "\n" << down.err;
  for (const auto& left : Leftovers()) ADD_FAILURE() << "left after hack/cluster.sh down: " << left;
  std::error_code ec;
  fs::remove_all(kBundle, ec);
  delete dir_;
  dir_ = nullptr;
}

void ClusterTest::TearDown() {
  if (HasFailure()) std::cout << Diagnostics();
}

std::string ClusterTest::Diagnostics() {
  std::string out = "--- the cluster at the failure ---\n";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"get", "nodes", "-o",
            "jsonpath={range .items[*]}{.metadata.name} taints={.spec.taints} "
            "conditions={range .status.conditions[*]}{.type}={.status}({.reason}) {end}{\"\\n\"}{end}"},
           {"get", "pods", "-A", "-o", "wide"},
           {"-n", "stasis-system", "get", "pods", "-o",
            "jsonpath={range .items[*]}{.metadata.name} phase={.status.phase} deleting={.metadata.deletionTimestamp} "
            "reason={.status.reason} {.status.message} "
            "last={.status.containerStatuses[0].lastState.terminated}{\"\\n\"}{end}"},
           {"get", "events", "-A", "--sort-by=.lastTimestamp"}}) {
    auto r = Kubectl(args);
    out += "$ kubectl " + args[0] + " " + args[1] + "\n" + r.out + r.err;
  }
  return out;
}

std::vector<std::string> ClusterTest::Leftovers() {
  std::vector<std::string> out;
  const std::string dir = dir_->path().string();
  auto lines = [](const std::vector<std::string>& argv) {
    auto r = RunCommand(argv, 30s);
    return r.ok() ? r->out : std::string("(" + argv[0] + " failed)");
  };
  for (const auto& [what, text, needle] :
       {std::tuple{"process", lines({"pgrep", "-a", "-f", dir}), dir},
        {"sandbox", lines({"pgrep", "-a", "-f", "--", "--root=/var/lib/stasis/run/"}), std::string("--root=")},
        {"mount", lines({"cat", "/proc/mounts"}), dir},
        {"network device", lines({"ip", "-o", "link"}), std::string("stasis-cni0")},
        {"address", lines({"ip", "-o", "addr", "show", "dev", "lo"}), std::string("172.31.255.1")},
        {"iptables chain", lines({"iptables-save"}), std::string(":KUBE-")},
        {"iptables chain", lines({"iptables-save"}), std::string(":CNI-")}}) {
    if (text.find(needle) != std::string::npos) out.push_back(std::string(what) + ": " + text);
  }
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (fs::exists(h.path() / "stasis-sandboxes")) out.push_back("cgroup: " + (h.path() / "stasis-sandboxes").string());
  }
  return out;
}

fs::path ClusterTest::ImageArchive(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kSource / "build-image" / dir, ec)) {
    if (e.path().filename().string().ends_with(".oci.tar")) return e.path();
  }
  ADD_FAILURE() << "no image archive in build-image/" << dir << ": build it with hack/image.sh (hack/test.sh does)";
  return {};
}

CommandResult ClusterTest::Run(const std::vector<std::string>& argv, std::chrono::seconds deadline) {
  CommandOptions o;
  o.extra_env = {"STASIS_CLUSTER_DIR=" + dir_->path().string()};
  auto r = RunCommand(argv, deadline, o);
  if (r.ok()) return *r;
  CommandResult failed;
  failed.err = r.status().ToString();
  return failed;
}

CommandResult ClusterTest::Hack(std::vector<std::string> argv, std::chrono::seconds deadline) {
  argv[0] = (kSource / "hack" / argv[0]).string();
  return Run(argv, deadline);
}

CommandResult ClusterTest::Kubectl(std::vector<std::string> args, std::chrono::seconds deadline) {
  args.insert(args.begin(), {"kubectl", "--kubeconfig", (dir_->path() / "admin.kubeconfig").string()});
  return Run(args, deadline);
}

std::string ClusterTest::Get(const std::string& what, const std::string& jsonpath, const std::string& ns) {
  auto r = Kubectl({"-n", ns, "get", what, "-o", "jsonpath=" + jsonpath});
  return r.success() ? r.out : "";
}

void ClusterTest::SetActor(const std::string& name, const std::string& desired) {
  const json actor = {{"apiVersion", "stasis.dev/v1alpha1"},
                      {"kind", "Actor"},
                      {"metadata", {{"name", name}, {"namespace", kClusterNamespace}}},
                      {"spec",
                       {{"runtime", "gvisor"},
                        {"bundle", kBundle.string()},
                        {"desiredState", desired},
                        {"snapshots", {{"onPause", "Full"}, {"onCommit", "Full"}}}}}};
  CommandOptions o;
  o.stdin_data = actor.dump();
  auto r = RunCommand({"kubectl", "--kubeconfig", (dir_->path() / "admin.kubeconfig").string(), "apply", "-f", "-"},
                      60s, o);
  ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.status().ToString());
}

bool ClusterTest::Reaches(const std::string& actor, const std::string& status, std::chrono::seconds deadline) {
  return Eventually([&] { return StatusOf(actor) == status; }, deadline);
}

void ClusterTest::SuspendAll() {
  auto r = Kubectl({"-n", kClusterNamespace, "get", "actors", "-o", "jsonpath={.items[*].metadata.name}"});
  ASSERT_TRUE(r.success()) << r.err;
  std::istringstream names(r.out);
  for (std::string n; names >> n;) SetActor(n, "Suspended");
  names.clear();
  names.str(r.out);
  for (std::string n; names >> n;) ASSERT_TRUE(Reaches(n, "STATUS_SUSPENDED")) << n << ": " << StatusOf(n);
}

bool ClusterTest::AgentReady(std::chrono::seconds deadline) {
  auto r = Kubectl({"-n", "stasis-system", "rollout", "status", "daemonset/stasis-node-cpu",
                    "--timeout=" + std::to_string(deadline.count()) + "s"},
                   deadline + 30s);
  return r.success() && Eventually([] { return Get("daemonset/stasis-node-cpu", "{.status.numberReady}",
                                                   "stasis-system") == "1"; }, 60s);
}

std::string ClusterTest::AgentPod() {
  auto r = Kubectl({"-n", "stasis-system", "get", "pods", "-l", "app.kubernetes.io/component=node", "-o", "json"});
  if (!r.success()) return "";
  for (const auto& pod : json::parse(r.out, nullptr, false).value("items", json::array())) {
    if (!pod["metadata"].contains("deletionTimestamp")) return pod["metadata"].value("name", "");
  }
  return "";
}

std::string ClusterTest::ControllerPod(std::chrono::seconds deadline) {
  std::string name;
  bool noticed = false;
  Eventually(
      [&] {
        auto r = Kubectl({"-n", "stasis-system", "get", "pods", "-l", "app.kubernetes.io/component=controller",
                          "-o", "json"});
        if (!r.success()) return false;
        for (const auto& pod : json::parse(r.out, nullptr, false).value("items", json::array())) {
          if (pod["metadata"].contains("deletionTimestamp") || pod["status"].value("phase", "") != "Running") {
            // Nothing in these tests deletes a controller pod before the failover test: say
            // what took it away, and wait for its replacement.
            if (!std::exchange(noticed, true)) {
              std::cout << "[ notice   ] controller pod " << pod["metadata"].value("name", "") << " is "
                        << pod["status"].value("phase", "") << ", not Running\n" << Diagnostics();
            }
            continue;
          }
          for (const auto& c : pod["status"].value("conditions", json::array())) {
            if (c.value("type", "") == "Ready" && c.value("status", "") == "True") {
              name = pod["metadata"].value("name", "");
              return true;
            }
          }
        }
        return false;
      },
      deadline);
  return name;
}

CommandResult ClusterTest::InAgent(const std::vector<std::string>& argv, std::chrono::seconds deadline) {
  std::vector<std::string> args = {"-n", "stasis-system", "exec", "daemonset/stasis-node-cpu", "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  return Kubectl(args, deadline);
}

long ClusterTest::SandboxPid(const std::string& actor) {
  const std::string id = Get("actor/" + actor, "{.status.sandboxID}");
  if (id.empty()) return -1;
  auto r = InAgent({"runsc", "-root", "/var/lib/stasis/run/" + id, "state", id});
  if (!r.success()) return -1;
  return json::parse(r.out, nullptr, false).value("pid", -1L);
}

long ClusterTest::Counter(const std::string& actor) {
  const std::string id = Get("actor/" + actor, "{.status.sandboxID}");
  if (id.empty()) return -1;
  auto r = InAgent({"runsc", "-root", "/var/lib/stasis/run/" + id, "exec", id, "cat", "/tmp/counter"});
  if (!r.success() || r.out.empty()) return -1;
  try {
    return std::stol(r.out);
  } catch (const std::exception&) {
    return -1;  // a write caught half-way
  }
}

std::unique_ptr<PrometheusServer> ClusterTest::StartPrometheus() {
  auto built = RunCommand({(kSource / "hack" / "build-prometheus.sh").string()}, 1200s);
  EXPECT_TRUE(built.ok() && built->success()) << (built.ok() ? built->err : built.status().ToString());
  if (!built.ok() || !built->success()) return nullptr;
  const std::string binary = built->out.substr(0, built->out.find('\n'));

  // What a Prometheus in the cluster would be given: a ServiceAccount bound to the shipped role.
  if (Get("serviceaccount/prometheus", "{.metadata.name}").empty()) {
    EXPECT_TRUE(Kubectl({"-n", kClusterNamespace, "create", "serviceaccount", "prometheus"}).success());
    EXPECT_TRUE(Kubectl({"create", "clusterrolebinding", "stasis-cluster-test-metrics", "--clusterrole",
                         "stasis-metrics-reader", "--serviceaccount", kClusterNamespace + ":prometheus"})
                    .success());
  }
  auto token = Kubectl({"-n", kClusterNamespace, "create", "token", "prometheus", "--duration", "2h"});
  EXPECT_TRUE(token.success()) << token.err;
  if (!token.success()) return nullptr;
  const fs::path dir = dir_->path() / "prometheus";
  fs::create_directories(dir);
  std::ofstream(dir / "token") << token.out;

  const fs::path pki = dir_->path() / "pki";
  auto configs = ScrapeConfigsFor(kSource / "manifests/monitoring/servicemonitor.yaml",
                                  {.api_server = kClusterApiServer,
                                   .ca_file = (pki / "ca.crt").string(),
                                   .client_cert_file = (pki / "admin.crt").string(),
                                   .client_key_file = (pki / "admin.key").string(),
                                   .scrape_token_file = (dir / "token").string(),
                                   .scrape_interval = std::to_string(kScrapeSeconds) + "s"});
  EXPECT_TRUE(configs.ok()) << configs.status().ToString();
  if (!configs.ok()) return nullptr;
  PrometheusOptions po;
  po.dir = dir / "server";
  po.binary = binary;
  po.extra_scrape_configs = *configs;
  po.scrape_interval = std::to_string(kScrapeSeconds) + "s";
  po.rule_files = {(kSource / "manifests/monitoring/rules/stasis.rules.yaml").string()};
  auto prom = PrometheusServer::Start(po);
  EXPECT_NE(prom, nullptr) << binary << " did not start";
  return prom;
}

json ClusterTest::UpTargets(const PrometheusServer& prom, const std::string& job) {
  auto r = prom.Query("up{job=\"" + job + "\"} == 1", UnixNow());
  return r.ok() ? (*r)["result"] : json::array();
}

}  // namespace stasis::testing
