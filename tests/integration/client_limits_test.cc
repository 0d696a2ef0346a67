// What the client accepts from, and asks of, a real kube-apiserver: it trusts only the
// configured CA, it paces itself (qps/burst), it waits out a 429's Retry-After, it refuses a
// response or a watch line larger than its bounds, and it can act as another user.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "controller/kube_client.h"
#include "controller/rest_config.h"
#include "tests/support/control_plane.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using testing::ControlPlane;

const ResourceType kConfigMaps{"", "v1", "configmaps", true};
const ResourceType kNamespaces{"", "v1", "namespaces", false};
const ResourceType kReviews{"authentication.k8s.io", "v1", "selfsubjectreviews", false};

RestConfig AdminConfig() {
  auto config = LoadKubeconfig(ControlPlane::Get().kubeconfig());
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// OpenSSL's default CA store is where SSL_CERT_FILE points; here it holds the cluster's CA.
// A client configured with another CA must still refuse the server: a cluster client trusts
// its cluster's CA only, never the machine's store.
TEST(ClientLimitsTest, TrustsOnlyTheConfiguredCA) {
  const std::string cluster_ca = ControlPlane::Get().dir() + "/pki/ca.crt";
  ASSERT_NE(ReadFile(cluster_ca).find("BEGIN CERTIFICATE"), std::string::npos) << cluster_ca;
  RestConfig config = AdminConfig();
  config.ca_pem = ReadFile("/etc/ssl/certs/ca-certificates.crt");  // many CAs, not the cluster's
  ASSERT_FALSE(config.ca_pem.empty());
  ::setenv("SSL_CERT_FILE", cluster_ca.c_str(), 1);
  KubeClient client(NewCpprestTransport(config));
  auto r = client.Get(kNamespaces, "", "default");
  ::unsetenv("SSL_CERT_FILE");
  ASSERT_FALSE(r.ok()) << "the server was trusted through the system CA store";
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  // The same client configuration with the cluster's CA connects.
  config.ca_pem = ReadFile(cluster_ca);
  KubeClient good(NewCpprestTransport(config));
  auto ok = good.Get(kNamespaces, "", "default");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(ClientLimitsTest, ImpersonatesUserGroupAndExtra) {
  RestConfig config = AdminConfig();
  config.impersonate_user = "system:serviceaccount:stasis-system:stasis-node";
  config.impersonate_group = "system:serviceaccounts";
  config.impersonate_extra["authentication.kubernetes.io/node-name"] = "node-a";
  KubeClient client(NewCpprestTransport(config));
  json review = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}};
  auto r = client.Create(kReviews, "", review);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json& user = (*r)["status"]["userInfo"];
  EXPECT_EQ(user.value("username", ""), config.impersonate_user);
  EXPECT_NE(user["groups"].dump().find("system:serviceaccounts"), std::string::npos) << user.dump();
  EXPECT_EQ(user["extra"]["authentication.kubernetes.io/node-name"], json::array({"node-a"}))
      << user.dump();
}

TEST(ClientLimitsTest, QpsAndBurstPaceRequests) {
  ClientOptions paced;
  paced.qps = 5;
  paced.burst = 2;
  KubeClient client(NewCpprestTransport(AdminConfig()), nullptr, paced);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(client.Get(kNamespaces, "", "default").ok());
  // 2 at once, then 10 more at 5 a second: at least 2 s, whatever the server's speed.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1900ms);
}

// A real 429 with Retry-After, from the real server: an eviction that a PodDisruptionBudget not
// yet processed (no disruption controller runs here) refuses, "retryAfterSeconds": 10.
TEST(ClientLimitsTest, TooManyRequestsIsRetriedAfterRetryAfter) {
  auto& cp = ControlPlane::Get();
  const std::string ns = cp.CreateTestNamespace("limits");
  ASSERT_FALSE(ns.empty());
  const std::string objects = R"(
apiVersion: v1
kind: Pod
metadata: {name: guarded, labels: {app: guarded}}
spec: {containers: [{name: c, image: example.invalid/none}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guard}
spec: {minAvailable: 1, selector: {matchLabels: {app: guarded}}}
)";
  ASSERT_EQ(cp.Kubectl({"apply", "-n", ns, "-f", "-"}, objects).exit_code, 0);
  // A pending pod may be evicted whatever the budget says; a running one may not.
  ASSERT_EQ(cp.Kubectl({"patch", "pod", "guarded", "-n", ns, "--subresource=status", "--type=merge",
                        "-p", R"({"status":{"phase":"Running"}})"})
                .exit_code,
            0);
  const ResourceType kEviction{"", "v1", "pods/guarded/eviction", true};
  const json eviction = {{"apiVersion", "policy/v1"},
                         {"kind", "Eviction"},
                         {"metadata", {{"name", "guarded"}, {"namespace", ns}}}};
  // The server's answer, as a client that does not retry sees it.
  ClientOptions no_retries;
  no_retries.max_retries = 0;
  KubeClient once(NewCpprestTransport(AdminConfig()), nullptr, no_retries);
  auto refused = once.Create(kEviction, ns, eviction);
  ASSERT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  ASSERT_EQ(KubeClient::LastError().http_code, 429);

  std::mutex mu;
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> seen;
  KubeClient client(NewCpprestTransport(AdminConfig()), [&](const std::string&, const std::string& code) {
    std::lock_guard lock(mu);
    seen.emplace_back(std::chrono::steady_clock::now(), code);
  });
  // The budget goes away 2 s in: the resend after Retry-After (10 s) succeeds.
  std::thread relief([&] {
    std::this_thread::sleep_for(2s);
    (void)cp.Kubectl({"delete", "pdb", "guard", "-n", ns});
  });
  auto evicted = client.Create(kEviction, ns, eviction);
  relief.join();
  ASSERT_TRUE(evicted.ok()) << evicted.status().ToString();
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].second, "429");
  EXPECT_EQ(seen[1].second, "201");
  EXPECT_GE(seen[1].first - seen[0].first, 9950ms) << "resent before the server's Retry-After";
  (void)cp.Kubectl({"delete", "namespace", ns, "--wait=false"});
}

// A response larger than the client accepts ends with a clear error, whatever its size: here
// a real list of 100 MiB.
TEST(ClientLimitsTest, AHundredMebibyteResponseIsRefused) {
  auto& cp = ControlPlane::Get();
  const std::string ns = cp.CreateTestNamespace("limits");
  ASSERT_FALSE(ns.empty());
  auto admin = cp.NewClient();
  const std::string mib(1000 * 1000, 'x');
  for (int i = 0; i < 105; ++i) {
    json cm = {{"metadata", {{"name", "big-" + std::to_string(i)}}}, {"data", {{"blob", mib}}}};
    ASSERT_TRUE(admin->Create(kConfigMaps, ns, cm).ok()) << i;
  }
  KubeClient client(NewCpprestTransport(AdminConfig()));  // the default bound: 64 MiB
  ListOptions unpaged;
  unpaged.limit = 0;
  auto all = client.ListPage(kConfigMaps, ns, unpaged);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), Code::kResourceExhausted) << all.status().ToString();
  EXPECT_NE(all.status().message().find("larger than the client accepts (67108864 bytes)"),
            std::string::npos)
      << all.status().ToString();
  // Pages that fit are read.
  ListOptions paged;
  paged.limit = 20;
  auto list = client.List(kConfigMaps, ns, paged);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)["items"].size(), 105u);
  (void)cp.Kubectl({"delete", "namespace", ns, "--wait=false"});
}

TEST(ClientLimitsTest, AWatchLineLongerThanTheBoundEndsTheWatch) {
  auto& cp = ControlPlane::Get();
  const std::string ns = cp.CreateTestNamespace("limits");
  ASSERT_FALSE(ns.empty());
  auto admin = cp.NewClient();
  RestConfig config = AdminConfig();
  config.max_line_bytes = 64 * 1024;
  KubeClient client(NewCpprestTransport(config));
  auto list = client.ListPage(kConfigMaps, ns, {});
  ASSERT_TRUE(list.ok());
  WatchOptions wo;
  wo.resource_version = (*list)["metadata"].value("resourceVersion", "");
  wo.timeout_seconds = 30;
  std::atomic<int> events{0};
  std::thread writer([&] {
    std::this_thread::sleep_for(500ms);
    json small = {{"metadata", {{"name", "small"}}}, {"data", {{"a", "b"}}}};
    (void)admin->Create(kConfigMaps, ns, small);
    json big = {{"metadata", {{"name", "big"}}}, {"data", {{"blob", std::string(100 * 1024, 'y')}}}};
    (void)admin->Create(kConfigMaps, ns, big);
  });
  Status s = client.Watch(kConfigMaps, ns, wo, [&](const json&) { return ++events < 10; }, nullptr);
  writer.join();
  EXPECT_EQ(events.load(), 1) << "the small object's event arrives; the big one's line is refused";
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("a line of the stream is larger than the client accepts (65536 bytes)"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace stasis
