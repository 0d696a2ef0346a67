// Where snapshots live in object storage, and how to reach it: a pure parser for the
// --snapshot-store value "s3://bucket/prefix", and the endpoint, region and credentials taken
// from the standard AWS environment variables or from a mounted Secret's files.
//
// Invariants: a parsed bucket follows S3's bucket-name rules (so it is safe as the first
// path segment of a path-style URL); a parsed prefix is "" or ends in exactly one '/', with no
// empty, "." or ".." segments. Secrets never appear in a Status message or a log line.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace stasis {

inline constexpr char kS3Scheme[] = "s3://";

// The names of the settings, both as environment variables and as the file names of a Secret
// mounted as a directory (one value a file, trailing newlines ignored): a Secret with these
// keys works with `envFrom` and as a volume alike.
inline constexpr char kAwsEndpointUrl[] = "AWS_ENDPOINT_URL";
inline constexpr char kAwsRegion[] = "AWS_REGION";
inline constexpr char kAwsAccessKeyId[] = "AWS_ACCESS_KEY_ID";
inline constexpr char kAwsSecretAccessKey[] = "AWS_SECRET_ACCESS_KEY";
inline constexpr char kAwsSessionToken[] = "AWS_SESSION_TOKEN";
inline constexpr char kDefaultAwsRegion[] = "us-east-1";

struct S3Location {
  std::string bucket;
  std::string prefix;  // "" or "a/b/"
};

// kInvalidArgument (reason store_config_invalid) with what is wrong, e.g. for "s3://",
// "s3://Bucket", "s3://bkt/../x", "gs://b".
Result<S3Location> ParseS3Location(std::string_view url);
// Whether `name` is a valid S3 bucket name: 3-63 of [a-z0-9.-], starting and ending with a
// letter or digit, no "..", not an IPv4 address.
bool IsS3BucketName(std::string_view name);

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional
};

struct S3Endpoint {
  std::string url;     // "http://127.0.0.1:8333" or "https://s3.example.com"; no trailing '/'
  std::string region;  // for SigV4; AWS_REGION or us-east-1
  S3Credentials credentials;
};

// One setting by name; nullopt when unset. The environment, a Secret directory, or a test's map.
using SettingLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Endpoint, region and credentials from `lookup`. kInvalidArgument (reason store_config_invalid)
// naming the setting that is missing or malformed — never its value.
Result<S3Endpoint> S3EndpointFromSettings(const SettingLookup& lookup);
// The process environment.
SettingLookup EnvironmentSettings();
// Files named as above in `dir` (a mounted Secret); a missing file is an unset setting.
SettingLookup SecretDirSettings(std::string dir);

// Whether a --snapshot-store value names an object store (s3://…) rather than a directory.
bool IsS3Url(std::string_view store);
// The endpoint as --snapshot-store-credentials says: that Secret directory's files, or the
// environment when it is "". The node agent and the controller read it alike.
Result<S3Endpoint> S3EndpointFor(const std::string& credentials_dir);

}  // namespace stasis
