// RegistryClient against a registry that asks for Bearer tokens (hack/registry.sh --token):
// docker-registry 2.8 configured with `auth: token`, and the distribution project's own token
// server beside it, which checks the user's password and signs a JWT granting only the
// repositories under "<user>/". Nothing is mocked: the challenge, the token request, the
// token's signature and scope are the real programs'. Covered: a pull by tag and a blob with one
// token reused, no or wrong credentials, a repository outside the token's grant, the token
// server down and back, and a cached token the registry stops trusting (a key rotation).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "images/registry_client.h"
#include "tests/support/oci_test_image.h"
#include "tests/support/sandbox.h"
#include "tests/support/test_registry.h"

namespace stasis::images {
namespace {

using stasis::testing::BuiltImage;
using stasis::testing::TempDir;
using stasis::testing::TestRegistry;

class RegistryTokenAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    registry_ = TestRegistry::Start(&error, {.token = true}).release();
    ASSERT_NE(registry_, nullptr) << error;
    ASSERT_TRUE(registry_->credentials());
    layout_ = new TempDir("stasis-oci-layout-");
    auto built = stasis::testing::WriteOciLayout(layout_->path().string(), "v1",
                                                 {stasis::testing::CounterImage()});
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    counter_ = *built;
    // skopeo meets the same challenge and fetches a push token from the same server.
    Status pushed = stasis::testing::PushOciLayout(layout_->path().string(), "v1", *registry_,
                                                   Own("counter"));
    ASSERT_TRUE(pushed.ok()) << pushed.ToString();
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
    delete layout_;
  }

  // A repository inside the user's namespace, the only one the token server grants.
  static std::string Own(const std::string& name) {
    return registry_->credentials()->username + "/" + name;
  }
  static ImageReference Ref(const std::string& repository) {
    auto r = ParseImageReference(registry_->host() + "/" + repository + ":v1");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return *r;
  }
  static RegistryClientOptions Options() {
    RegistryClientOptions o;
    o.ca_file = registry_->ca_file();
    o.connect_timeout = std::chrono::seconds(2);
    return o;
  }
  // Tokens the token server has issued so far, from its own log.
  static int TokensIssued() {
    std::ifstream in(registry_->dir() + "/token/server.log");
    int n = 0;
    for (std::string line; std::getline(in, line);)
      n += line.find("msg=\"get token complete\"") != std::string::npos;
    return n;
  }

  static TestRegistry* registry_;
  static TempDir* layout_;
  static BuiltImage counter_;
  TempDir dir_{"stasis-registry-token-"};
};

TestRegistry* RegistryTokenAuthTest::registry_ = nullptr;
TempDir* RegistryTokenAuthTest::layout_ = nullptr;
BuiltImage RegistryTokenAuthTest::counter_;

TEST_F(RegistryTokenAuthTest, PullsByTagAndBlobWithOneTokenPerScope) {
  ASSERT_FALSE(registry_->realm().empty());
  RegistryClient client(Options());
  int before = TokensIssued();
  auto m = client.GetManifest(Ref(Own("counter")), "v1", registry_->credentials());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->digest, counter_.target.digest);
  auto by_digest = client.GetManifest(Ref(Own("counter")), m->digest, registry_->credentials());
  ASSERT_TRUE(by_digest.ok()) << by_digest.status().ToString();
  const auto& layer = counter_.platforms[0].layers[0];
  std::string path = dir_.path().string() + "/layer";
  Status blob = client.FetchBlob(Ref(Own("counter")), layer.digest, layer.size, path,
                                 registry_->credentials());
  ASSERT_TRUE(blob.ok()) << blob.ToString();
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(stasis::testing::Sha256Digest(bytes.str()), layer.digest);
  // Three requests on one repository's pull scope: one token, kept until it expires.
  EXPECT_EQ(TokensIssued(), before + 1);
}

TEST_F(RegistryTokenAuthTest, WithoutOrWithWrongCredentialsTheTokenServerRefuses) {
  RegistryClient client(Options());
  auto anonymous = client.GetManifest(Ref(Own("counter")), "v1", std::nullopt);
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), Code::kUnauthenticated) << anonymous.status().ToString();
  EXPECT_EQ(anonymous.status().reason(), pull_reason::kUnauthorized);
  EXPECT_NE(anonymous.status().message().find("token server"), std::string::npos)
      << anonymous.status().ToString();

  BasicCredentials wrong = *registry_->credentials();
  wrong.password += "x";
  auto refused = client.GetManifest(Ref(Own("counter")), "v1", wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), pull_reason::kUnauthorized) << refused.status().ToString();
  // The right credentials on the same client still work: a refusal is not cached.
  EXPECT_TRUE(client.GetManifest(Ref(Own("counter")), "v1", registry_->credentials()).ok());
}

// The token server issues a token for any scope asked, granting only what the user may have; the
// registry then refuses that token for a repository outside it. That is Unauthorized, not
// ImageNotFound, and distinct from an unknown repository the token does cover.
TEST_F(RegistryTokenAuthTest, ARepositoryOutsideTheGrantIsUnauthorized) {
  RegistryClient client(Options());
  auto outside = client.GetManifest(Ref("someone-else/counter"), "v1", registry_->credentials());
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().reason(), pull_reason::kUnauthorized) << outside.status().ToString();

  auto missing = client.GetManifest(Ref(Own("missing")), "v1", registry_->credentials());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), pull_reason::kImageNotFound)
      << missing.status().ToString();
}

TEST_F(RegistryTokenAuthTest, ATokenServerThatIsDownIsUnavailableUntilItIsBack) {
  ASSERT_EQ(registry_->StopTokenServer(), "");
  RegistryClient client(Options());
  auto down = client.GetManifest(Ref(Own("counter")), "v1", registry_->credentials());
  std::string restarted = registry_->Restart();
  ASSERT_EQ(restarted, "");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), Code::kUnavailable) << down.status().ToString();
  EXPECT_EQ(down.status().reason(), pull_reason::kRegistryUnavailable);

  auto back = client.GetManifest(Ref(Own("counter")), "v1", registry_->credentials());
  EXPECT_TRUE(back.ok()) << back.status().ToString();
}

// A token the client holds can stop being accepted before it expires (the issuer's key rotated,
// the registry restarted with a new bundle). The registry's 401 on the cached token is met with
// a new token, once, and the pull goes on.
TEST_F(RegistryTokenAuthTest, ACachedTokenTheRegistryNoLongerTrustsIsReplaced) {
  RegistryClient client(Options());
  ASSERT_TRUE(client.GetManifest(Ref(Own("counter")), "v1", registry_->credentials()).ok());
  ASSERT_EQ(registry_->RotateTokenKey(), "");
  int before = TokensIssued();
  auto m = client.GetManifest(Ref(Own("counter")), "v1", registry_->credentials());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->digest, counter_.target.digest);
  EXPECT_EQ(TokensIssued(), before + 1) << "the cached token was not replaced";
}

}  // namespace
}  // namespace stasis::images
