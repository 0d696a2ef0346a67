#include "snapshots/s3_location.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

constexpr size_t kMinBucket = 3, kMaxBucket = 63;
// S3 allows keys of 1024 bytes; a prefix this long leaves room for the snapshot's own names.
constexpr size_t kMaxPrefix = 512;

Status ConfigError(const std::string& what) {
  return Status(Code::kInvalidArgument, what, snapshot_reason::kStoreConfigInvalid);
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool LooksLikeIpv4(std::string_view s) {
  int dots = 0;
  for (char c : s) {
    if (c == '.') ++dots;
    else if (c < '0' || c > '9') return false;
  }
  return dots == 3;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// "a//b/" → "a/b/"; "." and ".." refused: they would alias other keys in a path-style URL.
Result<std::string> NormalizePrefix(std::string_view raw) {
  std::string prefix;
  for (std::string_view segment : Split(raw, '/')) {
    if (segment.empty()) continue;
    if (segment == "." || segment == "..") {
      return ConfigError("s3:// prefix has a '" + std::string(segment) + "' segment");
    }
    for (char c : segment) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') {
        return ConfigError("s3:// prefix has a control character or backslash");
      }
    }
    prefix.append(segment).push_back('/');
  }
  if (prefix.size() > kMaxPrefix) {
    return ConfigError("s3:// prefix is longer than " + std::to_string(kMaxPrefix) + " bytes");
  }
  return prefix;
}

std::string TrimNewlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

bool IsHttpUrl(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.substr(0, scheme.size()) == scheme && url.size() > scheme.size()) return true;
  }
  return false;
}

}  // namespace

bool IsS3BucketName(std::string_view name) {
  if (name.size() < kMinBucket || name.size() > kMaxBucket) return false;
  if (!IsLowerAlnum(name.front()) || !IsLowerAlnum(name.back())) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (!IsLowerAlnum(c) && c != '-' && c != '.') return false;
    if (c == '.' && i + 1 < name.size() && name[i + 1] == '.') return false;
  }
  return !LooksLikeIpv4(name);
}

Result<S3Location> ParseS3Location(std::string_view url) {
  const std::string_view scheme = kS3Scheme;
  if (url.substr(0, scheme.size()) != scheme) {
    return ConfigError("snapshot store location must start with s3://");
  }
  std::string_view rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  if (bucket.empty()) return ConfigError("s3:// location names no bucket");
  if (!IsS3BucketName(bucket)) {
    return ConfigError("'" + std::string(bucket) +
                       "' is not a valid S3 bucket name (3-63 of a-z 0-9 . -, starting and "
                       "ending with a letter or digit)");
  }
  S3Location location{std::string(bucket), ""};
  if (slash != std::string_view::npos) {
    auto prefix = NormalizePrefix(rest.substr(slash + 1));
    if (!prefix.ok()) return prefix.status();
    location.prefix = std::move(*prefix);
  }
  return location;
}

Result<S3Endpoint> S3EndpointFromSettings(const SettingLookup& lookup) {
  auto required = [&](const char* name) -> Result<std::string> {
    auto value = lookup(name);
    if (!value || value->empty()) return ConfigError(std::string(name) + " is not set");
    return *value;
  };
  auto url = required(kAwsEndpointUrl);
  if (!url.ok()) return url.status();
  if (!IsHttpUrl(*url)) return ConfigError(std::string(kAwsEndpointUrl) + " is not an http(s) URL");
  auto key_id = required(kAwsAccessKeyId);
  if (!key_id.ok()) return key_id.status();
  auto secret = required(kAwsSecretAccessKey);
  if (!secret.ok()) return secret.status();
  S3Endpoint endpoint;
  endpoint.url = std::move(*url);
  while (endpoint.url.back() == '/') endpoint.url.pop_back();
  auto region = lookup(kAwsRegion);
  endpoint.region = region && !region->empty() ? *region : kDefaultAwsRegion;
  endpoint.credentials = {std::move(*key_id), std::move(*secret),
                          lookup(kAwsSessionToken).value_or("")};
  return endpoint;
}

SettingLookup EnvironmentSettings() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

SettingLookup SecretDirSettings(std::string dir) {
  return [dir = std::move(dir)](std::string_view name) -> std::optional<std::string> {
    std::ifstream in(dir + "/" + std::string(name), std::ios::binary);
    if (!in) return std::nullopt;
    return TrimNewlines(std::string(std::istreambuf_iterator<char>(in), {}));
  };
}

bool IsS3Url(std::string_view store) { return store.rfind(kS3Scheme, 0) == 0; }

Result<S3Endpoint> S3EndpointFor(const std::string& credentials_dir) {
  return S3EndpointFromSettings(credentials_dir.empty() ? EnvironmentSettings() : SecretDirSettings(credentials_dir));
}

}  // namespace stasis
