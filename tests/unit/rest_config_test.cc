// Kubeconfig and in-cluster parsing: good files load, every malformed one says why.
#include "controller/rest_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stasis {
namespace {

namespace fs = std::filesystem;

const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const char* kPemB64 =  // base64 of kPem
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";

class RestConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stasis-restcfg-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) {
    auto p = dir_ / name;
    std::ofstream(p) << content;
    return p.string();
  }
  std::string Kubeconfig(const std::string& cluster, const std::string& user) {
    return Write("kubeconfig", "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                               "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                               "clusters:\n- name: k\n  cluster:\n" + cluster +
                               "users:\n- name: u\n  user:\n" + user);
  }
  fs::path dir_;
};

TEST_F(RestConfigTest, InlineDataAndToken) {
  auto path = Kubeconfig(std::string("    server: https://127.0.0.1:6443/\n    certificate-authority-data: ") +
                             kPemB64 + "\n",
                         std::string("    client-certificate-data: ") + kPemB64 +
                             "\n    client-key-data: " + kPemB64 + "\n    token: abc\n");
  auto c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, kPem);
  EXPECT_EQ(c->client_cert_pem, kPem);
  EXPECT_EQ(c->client_key_pem, kPem);
  ASSERT_TRUE(c->bearer_token);
  EXPECT_EQ(*c->bearer_token(), "abc");
}

TEST_F(RestConfigTest, FilesRelativeToKubeconfig) {
  Write("ca.crt", kPem);
  Write("token", "tok\n");
  auto path = Kubeconfig("    server: https://h:1\n    certificate-authority: ca.crt\n",
                         "    tokenFile: token\n");
  auto c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ca_pem, kPem);
  EXPECT_EQ(*c->bearer_token(), "tok");
  EXPECT_TRUE(c->client_cert_pem.empty());
}

struct BadCase {
  std::string name, content, message;
};

TEST_F(RestConfigTest, MalformedFilesSayWhy) {
  const std::string ca = std::string("    certificate-authority-data: ") + kPemB64 + "\n";
  const std::vector<BadCase> cases = {
      {"not yaml", "{{{", "is not valid YAML"},
      {"not a map", "- a\n- b\n", "is not a YAML map"},
      {"no context", "apiVersion: v1\nclusters: []\n", "has no current-context"},
      {"missing context", "current-context: x\ncontexts: []\n", "no context named 'x'"},
      {"http server", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                      "clusters:\n- name: k\n  cluster: {server: 'http://h:1'}\n",
       "must be an https:// URL"},
      {"no CA", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                "clusters:\n- name: k\n  cluster: {server: 'https://h:1'}\n",
       "has neither certificate-authority nor certificate-authority-data"},
      {"insecure", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                   "clusters:\n- name: k\n  cluster: {server: 'https://h:1', insecure-skip-tls-verify: true}\n",
       "insecure-skip-tls-verify"},
      {"bad base64", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                     "clusters:\n- name: k\n  cluster: {server: 'https://h:1', certificate-authority-data: '***'}\n",
       "is not valid base64"},
      {"CA file missing", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                          "clusters:\n- name: k\n  cluster: {server: 'https://h:1', certificate-authority: /nonexistent/ca}\n",
       "cannot read /nonexistent/ca"},
      {"cert without key", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                           "clusters:\n- name: k\n  cluster:\n    server: https://h:1\n" + ca +
                           "users:\n- name: u\n  user:\n    client-certificate-data: " + kPemB64 + "\n",
       "without a key"},
      {"auth provider", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                        "clusters:\n- name: k\n  cluster:\n    server: https://h:1\n" + ca +
                        "users:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n",
       "auth-provider"},
      {"wrong type", "current-context: c\ncontexts: 5\n", "'contexts' must be a list"},
  };
  for (const auto& c : cases) {
    auto r = LoadKubeconfig(Write("bad", c.content));
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.name;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("kubeconfig"), std::string::npos) << c.name;
  }
  auto missing = LoadKubeconfig((dir_ / "absent").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot be read"), std::string::npos);
}

TEST_F(RestConfigTest, InClusterReadsRotatedToken) {
  Write("ca.crt", kPem);
  Write("token", "first");
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto c = LoadInClusterConfig(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:443");
  EXPECT_EQ(*c->bearer_token(), "first");
  // Rotation: a new file with a new modification time is picked up.
  Write("token", "second");
  fs::last_write_time(dir_ / "token", fs::file_time_type::clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(*c->bearer_token(), "second");
  unsetenv("KUBERNETES_SERVICE_HOST");
  auto none = LoadInClusterConfig(dir_.string());
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  unsetenv("KUBERNETES_SERVICE_PORT");
}

}  // namespace
}  // namespace stasis
