// How RegistryClient meets a registry's 401: the challenge parsed, Basic credentials sent or a
// token fetched from the challenge's realm (the distribution token protocol), and the
// Authorization header that worked kept per registry, scope and credentials — a token until
// it expires. An internal piece of RegistryClient; nothing else includes it.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "base/status.h"
#include "images/registry_credentials.h"
#include "images/registry_http.h"

namespace stasis::images {

class RegistryAuthCache {
 public:
  explicit RegistryAuthCache(RegistryHttp& http) : http_(http) {}

  // The cache key: two pull secrets for one repository never share a token.
  static std::string Key(const std::string& host, const std::string& scope,
                         const std::optional<BasicCredentials>& credentials);
  // "Authorization: …" kept for `key`, or "" (none yet, or the token expired).
  std::string Cached(const std::string& key);
  // The header answering `www_authenticate`, kept for `key`. kUnauthenticated "unauthorized"
  // when Basic is asked and no credentials are given, or the token server refuses them;
  // kUnavailable "registry_unavailable" when the token server cannot be reached.
  [[nodiscard]] Result<std::string> Answer(const std::string& www_authenticate,
                                           const std::string& scope, const std::string& key,
                                           const std::optional<BasicCredentials>& credentials);

 private:
  struct Entry {
    std::string header;
    std::chrono::steady_clock::time_point expires;
  };
  Result<std::string> FetchToken(const std::string& url,
                                 const std::optional<BasicCredentials>& credentials,
                                 std::chrono::seconds* lifetime);

  RegistryHttp& http_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

// "Authorization: Basic base64(user:password)".
std::string BasicAuthorization(const BasicCredentials& credentials);

}  // namespace stasis::images
