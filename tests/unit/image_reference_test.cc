// The distribution project's reference grammar: Docker Hub and library/ implied, a registry
// host told from a repository component, tags and digests checked, everything else refused
// with the reason the API reports.
#include "images/image_reference.h"

#include <gtest/gtest.h>

namespace stasis::images {
namespace {

const std::string kHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

ImageReference Parsed(const std::string& text) {
  auto r = ParseImageReference(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : ImageReference{};
}

void ExpectInvalid(const std::string& text, const std::string& says) {
  auto r = ParseImageReference(text);
  ASSERT_FALSE(r.ok()) << text << " parsed as " << r->ToString();
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << text;
  EXPECT_EQ(r.status().reason(), "invalid_image_reference") << text;
  EXPECT_NE(r.status().message().find(says), std::string::npos)
      << text << ": " << r.status().message();
}

TEST(ImageReference, ShortNamesAreOnDockerHubUnderLibrary) {
  ImageReference r = Parsed("busybox");
  EXPECT_EQ(r, (ImageReference{"docker.io", "library/busybox", "latest", ""}));
  EXPECT_EQ(r.ApiHost(), "registry-1.docker.io");
  EXPECT_EQ(r.ToString(), "docker.io/library/busybox:latest");
  EXPECT_EQ(Parsed("team/app:v1"), (ImageReference{"docker.io", "team/app", "v1", ""}));
  EXPECT_EQ(Parsed("docker.io/busybox").repository, "library/busybox");
  EXPECT_EQ(Parsed("index.docker.io/library/busybox").registry, "docker.io");
}

TEST(ImageReference, AFirstComponentWithADotColonOrLocalhostIsAHost) {
  EXPECT_EQ(Parsed("registry:5000/team/app:v1"),
            (ImageReference{"registry:5000", "team/app", "v1", ""}));
  EXPECT_EQ(Parsed("ghcr.io/o/r"), (ImageReference{"ghcr.io", "o/r", "latest", ""}));
  EXPECT_EQ(Parsed("localhost/app"), (ImageReference{"localhost", "app", "latest", ""}));
  EXPECT_EQ(Parsed("127.0.0.1:5000/app").ApiHost(), "127.0.0.1:5000");
  // No dot, no port, not localhost: a Docker Hub namespace, not a host.
  EXPECT_EQ(Parsed("registry/app"), (ImageReference{"docker.io", "registry/app", "latest", ""}));
}

TEST(ImageReference, DigestsPinAndKeepATagBesideThem) {
  ImageReference r = Parsed("ghcr.io/o/r@sha256:" + kHex);
  EXPECT_EQ(r.tag, "");
  EXPECT_EQ(r.digest, "sha256:" + kHex);
  EXPECT_EQ(r.ToString(), "ghcr.io/o/r@sha256:" + kHex);
  ImageReference both = Parsed("ghcr.io/o/r:v2@sha256:" + kHex);
  EXPECT_EQ(both.tag, "v2");
  EXPECT_EQ(both.ToString(), "ghcr.io/o/r:v2@sha256:" + kHex);
  ImageReference pinned = Parsed("busybox:1.36").WithDigest("sha256:" + kHex);
  EXPECT_EQ(pinned.ToString(), "docker.io/library/busybox@sha256:" + kHex);
}

TEST(ImageReference, RefusesWhatTheGrammarRefuses) {
  ExpectInvalid("", "empty");
  ExpectInvalid("Busybox", "lowercase");
  ExpectInvalid("team/App", "lowercase");
  ExpectInvalid("busybox:-bad", "invalid tag");
  ExpectInvalid("busybox:" + std::string(129, 'a'), "invalid tag");
  ExpectInvalid("busybox@sha256:abc", "digest");
  ExpectInvalid("busybox@sha512:" + kHex + kHex, "digest");
  ExpectInvalid("busybox@sha256:" + std::string(64, 'A'), "digest");
  ExpectInvalid("a/" + std::string(260, 'b'), "255");
  ExpectInvalid("team//app", "invalid repository component");
  ExpectInvalid("team/app-", "invalid repository component");
  ExpectInvalid("team/_app", "invalid repository component");
  ExpectInvalid(kHex, "image ID");
  ExpectInvalid("host:port/app", "invalid registry host");
}

TEST(ImageReference, RepositorySeparatorsFollowTheGrammar) {
  EXPECT_EQ(Parsed("a/b.c_d__e---f").repository, "a/b.c_d__e---f");
  EXPECT_EQ(Parsed("busybox:v1.2_3-x").tag, "v1.2_3-x");
  EXPECT_EQ(Parsed("busybox:" + std::string(128, 'a')).tag.size(), 128u);
  // 255 in all, counted on the normalised name ("docker.io/" included).
  EXPECT_TRUE(ParseImageReference("example.com/" + std::string(243, 'a')).ok());
  EXPECT_FALSE(ParseImageReference("example.com/" + std::string(244, 'a')).ok());
}

TEST(IsSha256Digest, OnlyLowercaseSha256With64HexDigits) {
  EXPECT_TRUE(IsSha256Digest("sha256:" + kHex));
  EXPECT_FALSE(IsSha256Digest("sha256:" + kHex.substr(1)));
  EXPECT_FALSE(IsSha256Digest("sha256:" + kHex + "0"));
  EXPECT_FALSE(IsSha256Digest("SHA256:" + kHex));
  EXPECT_FALSE(IsSha256Digest("sha256:" + std::string(64, 'A')));
  EXPECT_FALSE(IsSha256Digest("sha256:" + std::string(63, 'a') + "G"));
  EXPECT_FALSE(IsSha256Digest("sha512:" + kHex));
  EXPECT_FALSE(IsSha256Digest(kHex));
}

}  // namespace
}  // namespace stasis::images
