#include "snapshots/s3_url.h"

namespace stasis {
namespace {

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.' || c == '~';
}

}  // namespace

std::string S3UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 0xf]};
    }
  }
  return out;
}

std::string S3Url(std::string_view endpoint, std::string_view bucket, std::string_view key,
                  const S3Query& query) {
  std::string url = std::string(endpoint) + "/" + S3UriEncode(bucket, false);
  if (!key.empty()) url += "/" + S3UriEncode(key, true);
  char sep = '?';
  for (const auto& [name, value] : query) {
    url += sep + S3UriEncode(name, false) + "=" + S3UriEncode(value, false);
    sep = '&';
  }
  return url;
}

}  // namespace stasis
