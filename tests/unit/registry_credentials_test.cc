// Pull secrets as `kubectl create secret docker-registry` and `docker login` write them, keys
// matched as the kubelet matches them, malformed entries refused by name.
#include "images/registry_credentials.h"

#include <gtest/gtest.h>

namespace stasis::images {
namespace {

TEST(DockerConfigJson, DecodesAuthAndUsernamePassword) {
  // base64("alice:s3cr:et") — a password may hold ':'.
  auto auths = ParseDockerConfigJson(R"({"auths": {
      "registry.example:5000": {"auth": "YWxpY2U6czNjcjpldA=="},
      "https://index.docker.io/v1/": {"username": "bob", "password": "pw", "auth": ""}}})");
  ASSERT_TRUE(auths.ok()) << auths.status().ToString();
  ASSERT_EQ(auths->size(), 2u);
  EXPECT_EQ(CredentialsFor(*auths, "registry.example:5000"),
            (BasicCredentials{"alice", "s3cr:et"}));
  EXPECT_EQ(CredentialsFor(*auths, "docker.io"), (BasicCredentials{"bob", "pw"}));
}

TEST(DockerConfigJson, KeysMatchWithoutSchemeOrPathAndHostPortExactly) {
  auto auths = ParseDockerConfigJson(R"({"auths": {
      "https://Registry.Example:5000/v2/": {"username": "a", "password": "1"},
      "http://other.example/": {"username": "b", "password": "2"},
      "registry-1.docker.io": {"username": "c", "password": "3"}}})");
  ASSERT_TRUE(auths.ok()) << auths.status().ToString();
  EXPECT_EQ(CredentialsFor(*auths, "registry.example:5000")->username, "a");
  EXPECT_FALSE(CredentialsFor(*auths, "registry.example"));  // the port differs
  EXPECT_FALSE(CredentialsFor(*auths, "registry.example:5001"));
  EXPECT_EQ(CredentialsFor(*auths, "other.example")->username, "b");
  EXPECT_EQ(CredentialsFor(*auths, "docker.io")->username, "c");  // one registry, three names
  EXPECT_EQ(CredentialsFor(*auths, "index.docker.io")->username, "c");
  EXPECT_FALSE(CredentialsFor(*auths, "ghcr.io"));
}

TEST(DockerConfigJson, TheFirstMatchingEntryWinsAcrossSecrets) {
  auto first =
      ParseDockerConfigJson(R"({"auths": {"r.example": {"username": "first", "password": "1"}}})");
  auto second =
      ParseDockerConfigJson(R"({"auths": {"r.example": {"username": "second", "password": "2"}}})");
  ASSERT_TRUE(first.ok() && second.ok());
  std::vector<RegistryAuth> all = *first;
  all.insert(all.end(), second->begin(), second->end());
  EXPECT_EQ(CredentialsFor(all, "r.example")->username, "first");
}

TEST(DockerConfigJson, RefusesMalformedEntriesByName) {
  struct Case {
    std::string json, names;
  };
  for (const Case& c : std::vector<Case>{
           {"not json", ".dockerconfigjson"},
           {R"({"registry.example": {}})", "auths"},
           {R"({"auths": {"r.example": {"auth": "!!!notbase64"}}})", "r.example"},
           {R"({"auths": {"r.example": {"auth": "bm9jb2xvbg=="}}})", "r.example"},  // "nocolon"
           {R"({"auths": {"r.example": {"auth": 7}}})", "r.example"},
           {R"({"auths": {"r.example": "user:pw"}})", "r.example"},
           {R"({"auths": {"r.example": {"password": "pw"}}})", "r.example"},
       }) {
    auto r = ParseDockerConfigJson(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.json;
    EXPECT_EQ(r.status().reason(), "bad_pull_secret") << c.json;
    EXPECT_NE(r.status().message().find(c.names), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace stasis::images
