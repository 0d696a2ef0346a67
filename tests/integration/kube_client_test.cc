// The REST client against a real kube-apiserver over HTTPS with the admin client certificate.
#include "controller/kube_client.h"

#include <gtest/gtest.h>

#include "controller/rest_config.h"
#include "tests/support/control_plane.h"

namespace stasis {
namespace {

const ResourceType kConfigMaps{"", "v1", "configmaps", true};
const ResourceType kNamespaces{"", "v1", "namespaces", false};

std::unique_ptr<KubeClient> NewClient() { return testing::ControlPlane::Get().NewClient(); }

TEST(KubeClientTest, CreatesAndReadsBackAConfigMap) {
  auto client = NewClient();
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "hello"}, {"namespace", "default"}}},
             {"data", {{"greeting", "from C++"}}}};
  auto created = client->Create(kConfigMaps, "default", cm);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_FALSE((*created)["metadata"].value("uid", "").empty());

  auto got = client->Get(kConfigMaps, "default", "hello");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["data"]["greeting"], "from C++");
  // And kubectl, an independent client, sees the same object.
  auto k = testing::ControlPlane::Get().Kubectl(
      {"get", "configmap", "hello", "-n", "default", "-o", "jsonpath={.data.greeting}"});
  EXPECT_EQ(k.exit_code, 0) << k.err;
  EXPECT_EQ(k.out, "from C++");
}

TEST(KubeClientTest, ErrorsCarryCodeAndReason) {
  auto client = NewClient();
  auto missing = client->Get(kConfigMaps, "default", "absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(KubeClient::LastError().http_code, 404);
  EXPECT_EQ(KubeClient::LastError().reason, "NotFound");

  json cm = {{"metadata", {{"name", "dup"}}}, {"data", {{"a", "1"}}}};
  ASSERT_TRUE(client->Create(kConfigMaps, "default", cm).ok());
  auto again = client->Create(kConfigMaps, "default", cm);
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);

  json bad = {{"metadata", {{"name", "Not_Valid"}}}};
  auto invalid = client->Create(kConfigMaps, "default", bad);
  EXPECT_EQ(invalid.status().code(), Code::kInvalidArgument);
  EXPECT_NE(invalid.status().message().find("Invalid"), std::string::npos);
}

TEST(KubeClientTest, TlsIsVerifiedAgainstTheConfiguredCA) {
  auto config = LoadKubeconfig(testing::ControlPlane::Get().kubeconfig());
  ASSERT_TRUE(config.ok());
  // A CA that did not sign the server certificate: the handshake must fail.
  auto other = *config;
  other.ca_pem = other.client_cert_pem;  // a certificate, but not a CA for the server
  KubeClient client(NewCpprestTransport(other));
  auto r = client.Get(kNamespaces, "", "default");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
}

}  // namespace
}  // namespace stasis
