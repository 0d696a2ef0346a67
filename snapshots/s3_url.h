// The URLs of S3 requests, path-style (http://host:port/bucket/key?query), built the way
// SigV4 canonicalizes them: every byte outside RFC 3986's unreserved set percent-encoded in
// upper-case hex ('/' kept in keys), and query parameters sorted by name, each written as
// name=value (an empty value too: "uploads="). libcurl signs the URL as it is given, so a URL
// built here is already canonical and the signature the server computes matches.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace stasis {

using S3Query = std::map<std::string, std::string>;  // sorted by name, as SigV4 wants

std::string S3UriEncode(std::string_view s, bool keep_slash);

// endpoint "http://h:p", bucket "b", key "a/b c" → "http://h:p/b/a/b%20c"; key "" → the bucket.
std::string S3Url(std::string_view endpoint, std::string_view bucket, std::string_view key,
                  const S3Query& query = {});

}  // namespace stasis
