// Exec credential plugins: the kubeconfig stanza checked as clientcmd checks it, what the plugin
// is told (KUBERNETES_EXEC_INFO), what it prints parsed as client-go parses it, the cache's
// expiry and 401 rules on an injected clock, and real plugin runs (scripts) that fail.
#include "controller/exec_credential.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/time.h"
#include "controller/rest_config.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const char* kPemB64 =  // base64 of kPem
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
const std::string kV1 = "client.authentication.k8s.io/v1";
const std::string kV1beta1 = "client.authentication.k8s.io/v1beta1";

class ExecCredentialTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content, bool executable = false) {
    return tmp_.Write(name, content, executable);
  }
  std::string Read(const std::string& name) { return tmp_.Read(name); }
  Result<ExecConfig> Parse(const std::string& yaml) {
    return ParseExecConfig(YAML::Load(yaml), dir_, "kubeconfig f user 'u' exec");
  }
  stasis::testing::TempDir tmp_{"stasis-exec-"};
  const fs::path dir_ = tmp_.path();
};

std::string Credential(const std::string& api_version, const json& status) {
  return json{{"apiVersion", api_version}, {"kind", "ExecCredential"}, {"status", status}}.dump();
}

TEST_F(ExecCredentialTest, ParsesTokenAndExpiryInBothVersions) {
  for (const auto& version : {kV1, kV1beta1}) {
    auto c = ParseExecCredential(
        Credential(version, {{"token", "tok"}, {"expirationTimestamp", "2030-01-02T03:04:05Z"}}), version, "w");
    ASSERT_TRUE(c.ok()) << version << ": " << c.status().ToString();
    EXPECT_EQ(c->token, "tok");
    ASSERT_TRUE(c->expiry);
    EXPECT_EQ(FormatTime(*c->expiry), "2030-01-02T03:04:05Z");
    EXPECT_TRUE(c->client_cert_pem.empty());
  }
  auto no_expiry = ParseExecCredential(Credential(kV1, {{"token", "t"}}), kV1, "w");
  ASSERT_TRUE(no_expiry.ok());
  EXPECT_FALSE(no_expiry->expiry);
}

TEST_F(ExecCredentialTest, ParsesAClientCertificateAndKey) {
  auto c = ParseExecCredential(Credential(kV1, {{"clientCertificateData", kPem}, {"clientKeyData", kPem}}), kV1, "w");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->client_cert_pem, kPem);
  EXPECT_EQ(c->client_key_pem, kPem);
  EXPECT_TRUE(c->token.empty());
}

TEST_F(ExecCredentialTest, MalformedCredentialsSayWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "is not a JSON object"},
      {Credential(kV1beta1, {{"token", "t"}}), "not the configured " + kV1},
      {json{{"apiVersion", kV1}, {"kind", "Other"}, {"status", {{"token", "t"}}}}.dump(), "kind other than"},
      {json{{"apiVersion", kV1}, {"kind", "ExecCredential"}}.dump(), "has no status"},
      {Credential(kV1, json::object()), "neither status.token nor"},
      {Credential(kV1, {{"clientCertificateData", kPem}}), "only one of"},
      {Credential(kV1, {{"clientKeyData", kPem}}), "only one of"},
      {Credential(kV1, {{"clientCertificateData", "x"}, {"clientKeyData", "y"}}), "not PEM"},
      {Credential(kV1, {{"token", 5}}), "status.token is not a string"},
      {Credential(kV1, {{"token", "t"}, {"expirationTimestamp", "tomorrow"}}), "not RFC 3339"},
  };
  for (const auto& [out, message] : cases) {
    auto c = ParseExecCredential(out, kV1, "kubeconfig f user 'u' exec");
    ASSERT_FALSE(c.ok()) << out;
    EXPECT_EQ(c.status().code(), Code::kUnauthenticated) << out;
    EXPECT_NE(c.status().message().find(message), std::string::npos) << out << ": " << c.status().message();
    EXPECT_NE(c.status().message().find("kubeconfig f user 'u' exec"), std::string::npos);
  }
}

TEST_F(ExecCredentialTest, ExecInfoSaysNotInteractiveAndGivesTheClusterOnlyWhenAsked) {
  auto exec = Parse("apiVersion: " + kV1 + "\ncommand: p\ninteractiveMode: Never\n");
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  const YAML::Node cluster = YAML::Load(
      "server: https://h:1\ntls-server-name: api.example\ncertificate-authority-data: " + std::string(kPemB64) +
      "\nextensions:\n- name: client.authentication.k8s.io/exec\n  extension: {audience: x, port: 7}\n"
      "- name: other\n  extension: {ignored: true}\n");
  EXPECT_EQ(json::parse(ExecInfoJson(*exec, cluster, kPem)),
            json({{"apiVersion", kV1}, {"kind", "ExecCredential"}, {"spec", {{"interactive", false}}}}));
  exec->provide_cluster_info = true;
  const json info = json::parse(ExecInfoJson(*exec, cluster, kPem));
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"],
            json({{"server", "https://h:1"}, {"tls-server-name", "api.example"},
                  {"certificate-authority-data", kPemB64}, {"config", {{"audience", "x"}, {"port", 7}}}}))
      << info.dump();
}

TEST_F(ExecCredentialTest, ConfigIsReadAsClientcmdReadsIt) {
  auto exec = Parse("apiVersion: " + kV1 + "\ncommand: bin/plugin\nargs: [a, '--b=c']\n"
                    "env: [{name: X, value: '1'}, {name: EMPTY}]\ninstallHint: install it\n"
                    "provideClusterInfo: true\ninteractiveMode: IfAvailable\n");
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_EQ(exec->command, (dir_ / "bin/plugin").string()) << "a path resolves against the kubeconfig's directory";
  EXPECT_EQ(exec->args, (std::vector<std::string>{"a", "--b=c"}));
  EXPECT_EQ(exec->env, (std::vector<std::string>{"X=1", "EMPTY="}));
  EXPECT_EQ(exec->install_hint, "install it");
  EXPECT_TRUE(exec->provide_cluster_info);
  auto bare = Parse("apiVersion: " + kV1beta1 + "\ncommand: aws\n");  // v1beta1: IfAvailable by default
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->command, "aws") << "a bare name is looked up on PATH";
  auto absolute = Parse("apiVersion: " + kV1 + "\ncommand: /usr/bin/p\ninteractiveMode: Never\n");
  ASSERT_TRUE(absolute.ok());
  EXPECT_EQ(absolute->command, "/usr/bin/p");
}

TEST_F(ExecCredentialTest, MalformedConfigsSayWhichField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"command: p\n", "exec.apiVersion '' is not"},
      {"apiVersion: client.authentication.k8s.io/v1alpha1\ncommand: p\n", "exec.apiVersion 'client"},
      {"apiVersion: " + kV1 + "\ninteractiveMode: Never\n", "exec.command must be set"},
      {"apiVersion: " + kV1 + "\ncommand: p\n", "exec.interactiveMode must be set"},
      {"apiVersion: " + kV1 + "\ncommand: p\ninteractiveMode: Always\n", "exec.interactiveMode is Always"},
      {"apiVersion: " + kV1beta1 + "\ncommand: p\ninteractiveMode: Always\n", "needs a terminal"},
      {"apiVersion: " + kV1 + "\ncommand: p\ninteractiveMode: Sometimes\n", "'Sometimes' is not"},
      {"apiVersion: " + kV1 + "\ncommand: p\ninteractiveMode: Never\nenv: [{value: x}]\n", "exec.env: an entry has no name"},
      {"apiVersion: " + kV1 + "\ncommand: p\ninteractiveMode: Never\nargs: a\n", "exec.args must be a list"},
      {"apiVersion: " + kV1 + "\ncommand: [p]\ninteractiveMode: Never\n", "exec.command must be a string"},
      {"apiVersion: " + kV1 + "\ncommand: p\ninteractiveMode: Never\nprovideClusterInfo: maybe\n",
       "exec.provideClusterInfo must be true or false"},
  };
  for (const auto& [yaml, message] : cases) {
    auto exec = Parse(yaml);
    ASSERT_FALSE(exec.ok()) << yaml;
    EXPECT_EQ(exec.status().code(), Code::kInvalidArgument) << yaml;
    EXPECT_EQ(exec.status().message().rfind("kubeconfig f user 'u' exec.", 0), 0u) << exec.status().message();
    EXPECT_NE(exec.status().message().find(message), std::string::npos) << yaml << ": " << exec.status().message();
  }
}

// The cache on a hand-driven clock: one run until the expiry has passed, none ever without an
// expiry, and a 401 drops the token it was given only.
TEST_F(ExecCredentialTest, CacheRunsThePluginAgainOnlyAfterExpiryOrA401) {
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'000'000));
  int runs = 0;
  bool expires = true;  // each credential for 10 s from its run
  ExecCredentialSource source(
      [&]() -> Result<ExecCredential> {
        ++runs;
        return ExecCredential{"token-" + std::to_string(runs), "", "",
                              expires ? std::optional(now + 10s) : std::nullopt};
      },
      [&] { return now; });
  EXPECT_EQ(source.Get()->token, "token-1");
  now += 10s;  // at the expiry: still valid (client-go refreshes once now is after it)
  EXPECT_EQ(source.Get()->token, "token-1");
  now += 1s;
  EXPECT_EQ(source.Get()->token, "token-2");
  EXPECT_EQ(runs, 2);
  source.Invalidate("token-1");  // a stale 401: another request already refreshed
  EXPECT_EQ(source.Get()->token, "token-2");
  source.Invalidate("token-2");
  expires = false;
  EXPECT_EQ(source.Get()->token, "token-3");
  now += std::chrono::hours(24 * 365);
  EXPECT_EQ(source.Get()->token, "token-3") << "no expiry: cached until a 401";
  EXPECT_EQ(runs, 3);
}

TEST_F(ExecCredentialTest, AFailedRunIsNotCachedAndIsRetriedNextTime) {
  int runs = 0;
  ExecCredentialSource source([&]() -> Result<ExecCredential> {
    if (++runs == 1) return Status(Code::kUnauthenticated, "plugin failed");
    return ExecCredential{"t", "", "", std::nullopt};
  });
  EXPECT_EQ(source.Get().status().code(), Code::kUnauthenticated);
  EXPECT_EQ(source.Get()->token, "t");
  EXPECT_EQ(runs, 2);
}

// A real run: the plugin gets its args, its env (over ours) and KUBERNETES_EXEC_INFO.
TEST_F(ExecCredentialTest, ThePluginGetsArgsEnvAndExecInfo) {
  const std::string plugin = Write("plugin.sh",
                                   "#!/bin/sh\nprintf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$OUT_DIR/info\"\n"
                                   "echo \"$1 $2 $HOME\" > \"$OUT_DIR/args\"\n"
                                   "cat <<'EOF'\n" + Credential(kV1, {{"token", "from-script"}}) + "\nEOF\n",
                                   true);
  auto exec = Parse("apiVersion: " + kV1 + "\ncommand: ./plugin.sh\nargs: [one, two]\ninteractiveMode: Never\n"
                    "env: [{name: OUT_DIR, value: '" + dir_.string() + "'}, {name: HOME, value: /plugin-home}]\n");
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  exec->exec_info = ExecInfoJson(*exec, YAML::Node(), "");
  auto cred = RunExecPlugin(*exec, 10s);
  ASSERT_TRUE(cred.ok()) << cred.status().ToString();
  EXPECT_EQ(cred->token, "from-script");
  EXPECT_EQ(json::parse(Read("info")), json::parse(exec->exec_info));
  EXPECT_EQ(Read("args"), "one two /plugin-home\n");
}

TEST_F(ExecCredentialTest, AFailingPluginIsNamedWithItsExitCodeAndStderr) {
  Write("fail.sh", "#!/bin/sh\necho 'token expired; run login' >&2\nexit 3\n", true);
  auto exec = Parse("apiVersion: " + kV1 + "\ncommand: ./fail.sh\ninteractiveMode: Never\n");
  ASSERT_TRUE(exec.ok());
  auto cred = RunExecPlugin(*exec, 10s);
  ASSERT_FALSE(cred.ok());
  EXPECT_EQ(cred.status().code(), Code::kUnauthenticated);
  const std::string& m = cred.status().message();
  EXPECT_NE(m.find((dir_ / "fail.sh").string()), std::string::npos) << m;
  EXPECT_NE(m.find("exit code 3"), std::string::npos) << m;
  EXPECT_NE(m.find("token expired; run login"), std::string::npos) << m;

  auto missing = Parse("apiVersion: " + kV1 + "\ncommand: stasis-no-such-plugin\ninteractiveMode: Never\n"
                       "installHint: 'install it with: apt install the-plugin'\n");
  ASSERT_TRUE(missing.ok());
  cred = RunExecPlugin(*missing, 10s);
  ASSERT_FALSE(cred.ok());
  EXPECT_NE(cred.status().message().find("stasis-no-such-plugin was not found"), std::string::npos)
      << cred.status().message();
  EXPECT_NE(cred.status().message().find("install it with: apt install the-plugin"), std::string::npos);
}

// Through the loader: a token plugin becomes the config's bearer token; a client certificate
// becomes its certificate; a plugin that fails fails the load.
TEST_F(ExecCredentialTest, KubeconfigWithAnExecUser) {
  Write("token.sh", "#!/bin/sh\ncat <<'EOF'\n" + Credential(kV1, {{"token", "plugged"}}) + "\nEOF\n", true);
  Write("cert.sh", "#!/bin/sh\ncat <<'EOF'\n" +
                       Credential(kV1, {{"clientCertificateData", kPem}, {"clientKeyData", kPem}}) + "\nEOF\n",
        true);
  Write("fail.sh", "#!/bin/sh\necho nope >&2\nexit 1\n", true);
  auto kubeconfig = [&](const std::string& user) {
    return Write("config", std::string("current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                                       "clusters:\n- name: k\n  cluster:\n    server: https://h:1\n"
                                       "    certificate-authority-data: ") + kPemB64 + "\nusers:\n- name: u\n  user:\n" + user);
  };
  const std::string exec = "    exec: {apiVersion: " + kV1 + ", interactiveMode: Never, command: ";
  auto token = LoadKubeconfig(kubeconfig(exec + "./token.sh}\n"));
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  ASSERT_TRUE(token->bearer_token);
  EXPECT_EQ(*token->bearer_token(), "plugged");
  EXPECT_TRUE(token->on_unauthorized);
  auto cert = LoadKubeconfig(kubeconfig(exec + "./cert.sh}\n"));
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  EXPECT_EQ(cert->client_cert_pem, kPem);
  EXPECT_FALSE(cert->bearer_token);
  auto fail = LoadKubeconfig(kubeconfig(exec + "./fail.sh}\n"));
  ASSERT_FALSE(fail.ok());
  EXPECT_NE(fail.status().message().find("nope"), std::string::npos) << fail.status().message();
  auto both = LoadKubeconfig(kubeconfig(exec + "./token.sh}\n    token: static\n"));
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), Code::kInvalidArgument);
  EXPECT_NE(both.status().message().find("sets exec together with token"), std::string::npos);
}

}  // namespace
}  // namespace stasis
