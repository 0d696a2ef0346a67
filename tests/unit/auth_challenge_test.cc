// WWW-Authenticate challenges as registries send them (Docker Hub, GHCR, distribution's
// htpasswd), the malformed ones refused, and the token URL they lead to.
#include "images/auth_challenge.h"

#include <gtest/gtest.h>

namespace stasis::images {
namespace {

TEST(AuthChallenge, ParsesDockerHubsBearerChallenge) {
  auto c = ParseAuthChallenge(
      R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull")");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheme, "bearer");
  EXPECT_EQ(c->Param("realm"), "https://auth.docker.io/token");
  EXPECT_EQ(c->Param("service"), "registry.docker.io");
  EXPECT_EQ(c->Param("scope"), "repository:library/busybox:pull");
  EXPECT_EQ(c->Param("error"), "");
}

TEST(AuthChallenge, SchemeAndKeysAreCaseInsensitiveValuesAreNot) {
  auto c = ParseAuthChallenge(R"(BASIC Realm="Stasis Test", charset=UTF-8)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheme, "basic");
  EXPECT_EQ(c->Param("realm"), "Stasis Test");
  EXPECT_EQ(c->Param("charset"), "UTF-8");
  auto bare = ParseAuthChallenge("Basic");
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->params.empty());
}

TEST(AuthChallenge, QuotedValuesKeepCommasAndEscapes) {
  auto c = ParseAuthChallenge(
      R"(Bearer realm="https://a/t?x=1,y=2", error="insufficient_scope" , scope="a \"b\"")");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Param("realm"), "https://a/t?x=1,y=2");
  EXPECT_EQ(c->Param("error"), "insufficient_scope");
  EXPECT_EQ(c->Param("scope"), "a \"b\"");
}

TEST(AuthChallenge, RefusesMalformedHeaders) {
  for (const std::string bad :
       {"", "   ", "=realm", R"(Bearer realm="unterminated)", "Bearer realm",
        "Bearer realm=", R"(Bearer realm="a" service="b")", "Bearer =x"}) {
    auto c = ParseAuthChallenge(bad);
    EXPECT_FALSE(c.ok()) << "accepted: " << bad;
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
      EXPECT_EQ(c.status().reason(), "bad_auth_challenge") << bad;
    }
  }
}

TEST(TokenRequestUrl, EncodesServiceAndScope) {
  AuthChallenge c{"bearer", {{"realm", "https://auth.example/token"}, {"service", "reg istry&1"}}};
  EXPECT_EQ(
      TokenRequestUrl(c, "repository:team/app:pull"),
      "https://auth.example/token?service=reg%20istry%261&scope=repository%3Ateam%2Fapp%3Apull");
}

TEST(TokenRequestUrl, TheChallengesScopeWinsAndARealmWithAQueryIsExtended) {
  AuthChallenge c{"bearer", {{"realm", "https://a/t?x=1"}, {"scope", "repository:o/r:pull"}}};
  EXPECT_EQ(TokenRequestUrl(c, "repository:other:pull"),
            "https://a/t?x=1&scope=repository%3Ao%2Fr%3Apull");
}

}  // namespace
}  // namespace stasis::images
