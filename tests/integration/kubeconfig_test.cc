// Kubeconfigs as users bring them, against a real kube-apiserver: a KUBECONFIG list whose
// cluster and user live in different files, and exec credential plugins (scripts written by the
// test) whose token the server authenticates, whose failure carries the plugin's stderr, and
// which run again once their token expires or is refused with a 401.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "controller/kube_client.h"
#include "controller/rest_config.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ControlPlane;

const ResourceType kNamespaces{"", "v1", "namespaces", false};
const ResourceType kReviews{"authentication.k8s.io", "v1", "selfsubjectreviews", false};

class KubeconfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content, bool executable = false) {
    return tmp_.Write(name, content, executable);
  }
  std::string Read(const std::string& name) const { return tmp_.Read(name); }
  int Runs() const { return std::atoi(Read("count").c_str()); }

  // A ServiceAccount of its own in a namespace of the test's own, and a token for it.
  std::string ServiceAccountToken(std::string& username) {
    const ControlPlane& cp = ControlPlane::Get();
    const std::string ns = cp.CreateTestNamespace("kubeconfig");
    auto sa = cp.Kubectl({"create", "serviceaccount", "plugin-user", "-n", ns});
    EXPECT_EQ(sa.exit_code, 0) << sa.err;
    auto token = cp.Kubectl({"create", "token", "plugin-user", "-n", ns, "--duration=1h"});
    EXPECT_EQ(token.exit_code, 0) << token.err;
    username = "system:serviceaccount:" + ns + ":plugin-user";
    std::string t = token.out;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t;
  }

  // A plugin script: counts its runs in `count`, keeps its KUBERNETES_EXEC_INFO in `exec-info`,
  // then runs `body` with $n set to this run's number (1, 2, …).
  std::string Plugin(const std::string& body) {
    return Write("plugin.sh", "#!/bin/sh\nset -e\nn=$(( $(cat \"$DIR/count\" 2>/dev/null || echo 0) + 1 ))\n"
                              "echo $n > \"$DIR/count\"\nprintf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$DIR/exec-info\"\n" +
                                  body,
                 true);
  }
  // Prints an ExecCredential with `token` (a shell word) and, when `seconds` > 0, an expiry
  // that many seconds ahead.
  static std::string PrintCredential(const std::string& token, int seconds = 0) {
    const std::string expiry =
        seconds > 0 ? ", \\\"expirationTimestamp\\\": \\\"$(date -u -d '+" + std::to_string(seconds) +
                          " seconds' +%Y-%m-%dT%H:%M:%SZ)\\\""
                    : "";
    return "echo \"{\\\"apiVersion\\\": \\\"client.authentication.k8s.io/v1\\\", \\\"kind\\\": "
           "\\\"ExecCredential\\\", \\\"status\\\": {\\\"token\\\": \\\"" + token + "\\\"" + expiry + "}}\"\n";
  }
  // A kubeconfig for the control plane whose user is the plugin at ./plugin.sh.
  std::string ExecKubeconfig() {
    const ControlPlane& cp = ControlPlane::Get();
    return Write("config", "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                           "clusters:\n- name: local\n  cluster:\n    server: " + cp.server() +
                               "\n    certificate-authority: " + cp.dir() + "/pki/ca.crt\n"
                               "users:\n- name: plugged\n  user:\n    exec:\n"
                               "      apiVersion: client.authentication.k8s.io/v1\n"
                               "      command: ./plugin.sh\n      interactiveMode: Never\n"
                               "      provideClusterInfo: true\n"
                               "      env: [{name: DIR, value: '" + dir_.string() + "'}]\n"
                               "contexts:\n- name: c\n  context: {cluster: local, user: plugged}\n");
  }
  static Result<json> WhoAmI(KubeClient& client) {
    json review = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}};
    return client.Create(kReviews, "", review);
  }

  stasis::testing::TempDir tmp_{"stasis-kubeconfig-it-"};
  const fs::path dir_ = tmp_.path();
};

// The cluster and its CA in one file, the user (admin certificate files) and the context in
// another, listed after a missing file and before a third file whose cluster of the same name
// points nowhere: the first definition wins, each file's relative paths resolve beside it.
TEST_F(KubeconfigTest, AKubeconfigListReachesTheServer) {
  const ControlPlane& cp = ControlPlane::Get();
  fs::create_directories(dir_ / "cluster-dir");
  fs::create_directories(dir_ / "user-dir");
  fs::copy_file(cp.dir() + "/pki/ca.crt", dir_ / "cluster-dir/ca.crt");
  fs::copy_file(cp.dir() + "/pki/admin.crt", dir_ / "user-dir/admin.crt");
  fs::copy_file(cp.dir() + "/pki/admin.key", dir_ / "user-dir/admin.key");
  const std::string cluster = Write("cluster-dir/config", "clusters:\n- name: local\n  cluster:\n    server: " +
                                                              cp.server() + "\n    certificate-authority: ca.crt\n");
  const std::string user = Write("user-dir/config", "current-context: c\nusers:\n- name: admin\n  user:\n"
                                                    "    client-certificate: admin.crt\n    client-key: admin.key\n"
                                                    "contexts:\n- name: c\n  context: {cluster: local, user: admin}\n");
  const std::string decoy = Write("decoy", "current-context: other\nclusters:\n- name: local\n  cluster:\n"
                                           "    server: https://127.0.0.1:1\n    certificate-authority: ca.crt\n");
  const std::string list = (dir_ / "absent").string() + ":" + user + ":" + cluster + ":" + decoy;
  ::setenv("KUBECONFIG", list.c_str(), 1);
  auto config = LoadRestConfig("");
  ::unsetenv("KUBECONFIG");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, cp.server());
  KubeClient client(NewCpprestTransport(*config));
  auto got = client.Get(kNamespaces, "", "default");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["metadata"]["name"], "default");
}

// The plugin's token is what the server authenticates: the request is made as the
// ServiceAccount the token belongs to, and the plugin was told the cluster it serves.
TEST_F(KubeconfigTest, AnExecPluginsTokenIsWhoTheServerSees) {
  std::string username;
  const std::string token = ServiceAccountToken(username);
  ASSERT_FALSE(token.empty());
  Plugin(PrintCredential(token));
  auto config = LoadKubeconfig(ExecKubeconfig());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  KubeClient client(NewCpprestTransport(*config));
  auto review = WhoAmI(client);
  ASSERT_TRUE(review.ok()) << review.status().ToString();
  EXPECT_EQ((*review)["status"]["userInfo"]["username"], username) << review->dump();
  const json info = json::parse(Read("exec-info"));
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], ControlPlane::Get().server()) << info.dump();
  EXPECT_EQ(Runs(), 1) << "one run at load; the request used the cached token";
}

// A plugin that fails at load stops the load with its stderr; one that fails when its token
// must be renewed fails that request with its stderr.
TEST_F(KubeconfigTest, AFailingPluginsStderrIsInTheError) {
  Plugin("echo 'login expired: run cloud-login' >&2\nexit 4\n");
  auto config = LoadKubeconfig(ExecKubeconfig());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kUnauthenticated);
  EXPECT_NE(config.status().message().find("exit code 4"), std::string::npos) << config.status().message();
  EXPECT_NE(config.status().message().find("login expired: run cloud-login"), std::string::npos);
  EXPECT_NE(config.status().message().find("plugin.sh"), std::string::npos);

  fs::remove(dir_ / "count");
  std::string username;
  const std::string token = ServiceAccountToken(username);
  Plugin("if [ $n -gt 1 ]; then echo 'refresh refused by the identity provider' >&2; exit 5; fi\n" +
         PrintCredential(token, 2));
  config = LoadKubeconfig(ExecKubeconfig());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  KubeClient client(NewCpprestTransport(*config));
  ASSERT_TRUE(WhoAmI(client).ok());
  std::this_thread::sleep_for(3500ms);  // past the expiry (whole seconds: 1 to 2 s ahead)
  auto after = WhoAmI(client);
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("refresh refused by the identity provider"), std::string::npos)
      << after.status().message();
  EXPECT_NE(after.status().message().find("exit code 5"), std::string::npos);
}

// The token expires two seconds after each run: requests within that use it, the first after it
// runs the plugin again, and the server accepts the new token.
TEST_F(KubeconfigTest, AnExpiredTokenRunsThePluginAgain) {
  std::string username;
  const std::string token = ServiceAccountToken(username);
  Plugin(PrintCredential(token, 2));
  auto config = LoadKubeconfig(ExecKubeconfig());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  KubeClient client(NewCpprestTransport(*config));
  ASSERT_TRUE(WhoAmI(client).ok());
  ASSERT_TRUE(WhoAmI(client).ok());
  EXPECT_EQ(Runs(), 1);
  std::this_thread::sleep_for(3500ms);
  auto after = WhoAmI(client);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ((*after)["status"]["userInfo"]["username"], username);
  EXPECT_EQ(Runs(), 2);
}

// A token the server refuses (401) is dropped: the next request runs the plugin again and
// succeeds with the new token (the refused request itself fails, as in client-go).
TEST_F(KubeconfigTest, A401RunsThePluginAgainForTheNextRequest) {
  std::string username;
  const std::string token = ServiceAccountToken(username);
  Plugin("if [ $n -eq 1 ]; then " + PrintCredential("not-a-valid-token") + "else " + PrintCredential(token) + "fi\n");
  auto config = LoadKubeconfig(ExecKubeconfig());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  KubeClient client(NewCpprestTransport(*config));
  auto refused = WhoAmI(client);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnauthenticated) << refused.status().ToString();
  auto retried = WhoAmI(client);
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ((*retried)["status"]["userInfo"]["username"], username);
  EXPECT_EQ(Runs(), 2);
}

}  // namespace
}  // namespace stasis
