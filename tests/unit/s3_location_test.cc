// The s3:// location parser (bucket rules, prefix normalized, clear errors) and the endpoint
// and credentials read from settings (environment or a mounted Secret's files), never naming
// a secret's value in an error.
#include "snapshots/s3_location.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(S3Location, ParsesBucketAndNormalizesPrefix) {
  struct Case {
    const char* url;
    const char* bucket;
    const char* prefix;
  };
  const std::vector<Case> cases = {
      {"s3://snaps", "snaps", ""},
      {"s3://snaps/", "snaps", ""},
      {"s3://snaps/a", "snaps", "a/"},
      {"s3://snaps/a/b/", "snaps", "a/b/"},
      {"s3://snaps//a///b", "snaps", "a/b/"},
      {"s3://my.bucket-1/x.y", "my.bucket-1", "x.y/"},
  };
  for (const Case& c : cases) {
    auto loc = ParseS3Location(c.url);
    ASSERT_TRUE(loc.ok()) << c.url << ": " << loc.status().ToString();
    EXPECT_EQ(loc->bucket, c.bucket) << c.url;
    EXPECT_EQ(loc->prefix, c.prefix) << c.url;
  }
}

TEST(S3Location, RefusesWhatIsNotALocation) {
  struct Case {
    const char* url;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"/var/lib/snaps", "must start with s3://"},
      {"gs://b/x", "must start with s3://"},
      {"s3://", "names no bucket"},
      {"s3:///x", "names no bucket"},
      {"s3://Bucket", "not a valid S3 bucket"},
      {"s3://ab", "not a valid"},
      {"s3://-ab", "not a valid"},
      {"s3://a..b", "not a valid"},
      {"s3://a_b", "not a valid"},
      {"s3://192.168.1.1", "not a valid"},
      {"s3://bkt/x/../y", "'..' segment"},
      {"s3://bkt/./y", "'.' segment"},
      {"s3://bkt/a\nb", "control character"},
  };
  for (const Case& c : cases) {
    auto loc = ParseS3Location(c.url);
    ASSERT_FALSE(loc.ok()) << c.url;
    EXPECT_EQ(loc.status().code(), Code::kInvalidArgument) << c.url;
    EXPECT_EQ(loc.status().reason(), snapshot_reason::kStoreConfigInvalid) << c.url;
    EXPECT_THAT(loc.status().message(), HasSubstr(c.says)) << c.url;
  }
  EXPECT_FALSE(ParseS3Location("s3://bkt/" + std::string(600, 'p')).ok());
  EXPECT_TRUE(IsS3BucketName(std::string(63, 'a')));
  EXPECT_FALSE(IsS3BucketName(std::string(64, 'a')));
}

SettingLookup MapSettings(std::map<std::string, std::string> m) {
  return [m = std::move(m)](std::string_view name) -> std::optional<std::string> {
    auto it = m.find(std::string(name));
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

TEST(S3Endpoint, ReadsTheStandardSettings) {
  auto e = S3EndpointFromSettings(MapSettings({{kAwsEndpointUrl, "http://127.0.0.1:8333/"},
                                               {kAwsAccessKeyId, "id"},
                                               {kAwsSecretAccessKey, "sekret"},
                                               {kAwsSessionToken, "tok"}}));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->url, "http://127.0.0.1:8333");
  EXPECT_EQ(e->region, kDefaultAwsRegion);
  EXPECT_EQ(e->credentials.access_key_id, "id");
  EXPECT_EQ(e->credentials.secret_access_key, "sekret");
  EXPECT_EQ(e->credentials.session_token, "tok");
}

TEST(S3Endpoint, NamesTheMissingOrBadSettingButNeverASecret) {
  std::map<std::string, std::string> full = {{kAwsEndpointUrl, "https://s3.example.com"},
                                             {kAwsRegion, "eu-west-1"},
                                             {kAwsAccessKeyId, "AKIDSECRETISH"},
                                             {kAwsSecretAccessKey, "topsecretvalue"}};
  for (const char* missing : {kAwsEndpointUrl, kAwsAccessKeyId, kAwsSecretAccessKey}) {
    auto m = full;
    m.erase(missing);
    auto e = S3EndpointFromSettings(MapSettings(m));
    ASSERT_FALSE(e.ok()) << missing;
    EXPECT_EQ(e.status().reason(), snapshot_reason::kStoreConfigInvalid);
    EXPECT_THAT(e.status().message(), HasSubstr(missing));
    EXPECT_THAT(e.status().message(), Not(HasSubstr("topsecretvalue")));
  }
  full[kAwsEndpointUrl] = "s3.example.com";
  auto e = S3EndpointFromSettings(MapSettings(full));
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("not an http(s) URL"));
}

TEST(S3Endpoint, ReadsAMountedSecretDirectory) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / "s3-secret";
  fs::create_directories(dir);
  auto put = [&](const char* name, const char* value) { std::ofstream(dir / name) << value; };
  put(kAwsEndpointUrl, "http://127.0.0.1:9000\n");
  put(kAwsRegion, "local\n");
  put(kAwsAccessKeyId, "id\n");
  put(kAwsSecretAccessKey, "secret\r\n");
  auto e = S3EndpointFromSettings(SecretDirSettings(dir.string()));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->url, "http://127.0.0.1:9000");
  EXPECT_EQ(e->region, "local");
  EXPECT_EQ(e->credentials.secret_access_key, "secret");
  EXPECT_EQ(e->credentials.session_token, "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stasis
