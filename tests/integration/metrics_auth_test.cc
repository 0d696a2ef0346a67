// The secure metrics endpoint (--metrics-secure) of a Manager on a real kube-apiserver with
// --authorization-mode=RBAC. The manager authenticates as the ServiceAccount stasis-controller
// with the RBAC of manifests/base (so the reviews it makes are the ones its ClusterRole
// grants), and scrapers are real ServiceAccounts with TokenRequest tokens: no token and a
// garbage token get 401; a ServiceAccount not bound to stasis-metrics-reader gets 403, and 200
// with the metrics once a ClusterRoleBinding to the manifest's ClusterRole exists (403 again
// once it is gone); plain HTTP to the TLS port gets no answer; the probes stay plain HTTP on
// their own port. Requests by curl (argv, deadline). And the binary refuses the flags'
// contradictions before serving anything.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/subprocess.h"
#include "controller/manager.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"
#include "tests/support/service_account_tokens.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;

const std::string kSource = STASIS_SOURCE_DIR;
const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";

struct CurlResult {
  int code = 0;  // 0: no HTTP answer
  std::string body;
};

CurlResult Curl(const std::string& url, const std::string& token = "", bool insecure = true) {
  std::vector<std::string> argv = {"curl", "-sS", "-m", "10", "-w", "\n%{http_code}"};
  if (insecure) argv.push_back("-k");  // the manager's certificate is self-signed
  if (!token.empty()) argv.insert(argv.end(), {"-H", "Authorization: Bearer " + token});
  argv.push_back(url);
  auto r = RunCommand(argv, 20s);
  CurlResult out;
  if (!r.ok() || r->exit_code != 0) return out;
  auto nl = r->out.rfind('\n');
  out.body = r->out.substr(0, nl);
  out.code = std::stoi(r->out.substr(nl + 1));
  return out;
}

bool Eventually(const std::function<bool()>& pred, std::chrono::seconds deadline = 30s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return pred();
}

std::string Trimmed(std::string s) {
  s.erase(s.find_last_not_of(" \n") + 1);
  return s;
}

class MetricsAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const ControlPlane& cp = ControlPlane::Get();
    // The ServiceAccounts, their RBAC (create tokenreviews and subjectaccessreviews) and the
    // ClusterRole stasis-metrics-reader, as deployed.
    auto applied = cp.Kubectl({"apply", "-k", kSource + "/manifests/base"});
    ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
    dir_ = new TempDir("metrics-auth-");
    ManagerOptions o;
    o.name = "metrics-auth-test";
    o.kubeconfig = TokenKubeconfig(UnboundToken("controller"), "controller", dir_->path());
    o.metrics = metrics_ = new Metrics();
    metrics_->RegisterController("actors");
    o.metrics_addr = "127.0.0.1:0";
    o.probe_addr = "127.0.0.1:0";
    o.secure_metrics.enabled = true;
    // No cache: each request is reviewed, so a new or removed binding shows at once.
    o.secure_metrics.allow_ttl = 0s;
    o.secure_metrics.deny_ttl = 0s;
    auto m = Manager::New(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = m->release();
    thread_ = new std::thread([] { run_status_ = manager_->Run(&stop_); });
    ASSERT_TRUE(Eventually([] { return manager_->port() > 0 || !run_status_.ok(); }))
        << run_status_.ToString();
    ASSERT_NE(manager_->port(), manager_->probe_port());
  }
  static void TearDownTestSuite() {
    stop_ = true;
    if (thread_) thread_->join();
    EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
    delete thread_;
    delete manager_;
    delete metrics_;
    delete dir_;
  }

  static std::string MetricsUrl() {
    return "https://127.0.0.1:" + std::to_string(manager_->port()) + "/metrics";
  }
  static std::string ProbeUrl(const std::string& path) {
    return "http://127.0.0.1:" + std::to_string(manager_->probe_port()) + path;
  }
  // A fresh ServiceAccount in a namespace of its own, and a token for it (TokenRequest).
  std::string ScraperToken(std::string& ns) {
    ns = "metrics-scraper";
    auto created = ControlPlane::Get().Kubectl({"create", "namespace", ns});
    EXPECT_EQ(created.exit_code, 0) << created.err;
    auto sa = ControlPlane::Get().Kubectl({"create", "serviceaccount", "scraper", "-n", ns});
    EXPECT_EQ(sa.exit_code, 0) << sa.err;
    auto token = ControlPlane::Get().Kubectl({"create", "token", "scraper", "-n", ns});
    EXPECT_EQ(token.exit_code, 0) << token.err;
    return Trimmed(token.out);
  }

  static inline TempDir* dir_ = nullptr;
  static inline Metrics* metrics_ = nullptr;
  static inline Manager* manager_ = nullptr;
  static inline std::thread* thread_ = nullptr;
  static inline std::atomic<bool> stop_{false};
  static inline Status run_status_;
};

TEST_F(MetricsAuthTest, NoTokenOrAGarbageTokenIsUnauthorized) {
  EXPECT_EQ(Curl(MetricsUrl()).code, 401);
  EXPECT_EQ(Curl(MetricsUrl(), "not-a-token").code, 401);
  // A well-formed token of no ServiceAccount: signed by nobody the API server trusts.
  EXPECT_EQ(Curl(MetricsUrl(), "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln").code, 401);
}

TEST_F(MetricsAuthTest, AServiceAccountReadsMetricsOnlyWhileBoundToTheMetricsReaderRole) {
  std::string ns;
  const std::string token = ScraperToken(ns);
  ASSERT_FALSE(token.empty());
  auto denied = Curl(MetricsUrl(), token);
  EXPECT_EQ(denied.code, 403) << denied.body;
  EXPECT_EQ(denied.body.find("controller_runtime"), std::string::npos);

  const std::string binding = "scraper-" + ns;
  auto bound = ControlPlane::Get().Kubectl({"create", "clusterrolebinding", binding,
                                            "--clusterrole=stasis-metrics-reader",
                                            "--serviceaccount=" + ns + ":scraper"});
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  CurlResult allowed;
  EXPECT_TRUE(Eventually([&] { return (allowed = Curl(MetricsUrl(), token)).code == 200; }))
      << allowed.code << " " << allowed.body;
  EXPECT_NE(allowed.body.find("# TYPE controller_runtime_reconcile_total counter"), std::string::npos)
      << allowed.body.substr(0, 400);

  ASSERT_EQ(ControlPlane::Get().Kubectl({"delete", "clusterrolebinding", binding}).exit_code, 0);
  EXPECT_TRUE(Eventually([&] { return Curl(MetricsUrl(), token).code == 403; }));
}

TEST_F(MetricsAuthTest, PlainHttpToTheMetricsPortGetsNoAnswer) {
  const std::string plain = "http://127.0.0.1:" + std::to_string(manager_->port()) + "/metrics";
  EXPECT_EQ(Curl(plain, "", false).code, 0);
  // Nor does a client that insists on verifying the self-signed certificate.
  EXPECT_EQ(Curl(MetricsUrl(), "", false).code, 0);
}

TEST_F(MetricsAuthTest, ProbesArePlainHttpOnTheirOwnPortAndOnlyThere) {
  EXPECT_EQ(Curl(ProbeUrl("/healthz"), "", false).code, 200);
  EXPECT_EQ(Curl(ProbeUrl("/readyz"), "", false).code, 200);
  EXPECT_EQ(Curl(ProbeUrl("/metrics"), "", false).code, 404);
  const std::string secure = "https://127.0.0.1:" + std::to_string(manager_->port());
  EXPECT_EQ(Curl(secure + "/healthz").code, 404);
  EXPECT_EQ(Curl(secure + "/readyz").code, 404);
}

// Exit 2 (a usage error) and the reason, for both roles.
TEST_F(MetricsAuthTest, TheBinaryRefusesContradictoryMetricsFlags) {
  const std::string kubeconfig = "--kubeconfig=" + ControlPlane::Get().kubeconfig();
  for (const std::string role : {"node", "controller"}) {
    std::vector<std::string> node_flags;
    if (role == "node") node_flags = {"--node-name=metrics-flags", "--root=" + dir_->path().string()};
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--metrics-secure"}, "--metrics-secure needs --health-probe-addr"},
        {{"--metrics-cert-dir=/etc/stasis"}, "--metrics-cert-dir needs --metrics-secure"},
    };
    for (const auto& [flags, want] : cases) {
      std::vector<std::string> argv = {kStasis, role, kubeconfig};
      argv.insert(argv.end(), node_flags.begin(), node_flags.end());
      argv.insert(argv.end(), flags.begin(), flags.end());
      auto r = RunCommand(argv, 60s);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->exit_code, 2) << role << " " << want << "\n" << r->err;
      EXPECT_NE(r->err.find(want), std::string::npos) << role << ": " << r->err;
    }
  }
  // A certificate directory without a certificate ends the start-up (the controller: the
  // node agent would first need runsc; both start the same manager).
  auto r = RunCommand({kStasis, "controller", kubeconfig, "--leader-elect=false", "--metrics-secure",
                       "--health-probe-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0",
                       "--metrics-cert-dir=" + (dir_->path() / "absent").string()},
                      60s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 2) << r->err;
  EXPECT_NE(r->err.find("tls.crt does not exist"), std::string::npos) << r->err;
}

}  // namespace
}  // namespace stasis::testing
