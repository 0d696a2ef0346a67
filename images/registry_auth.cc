#include "images/registry_auth.h"

#include <functional>
#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "images/auth_challenge.h"
#include "images/registry_client.h"

namespace stasis::images {
namespace {

using Clock = std::chrono::steady_clock;

// The token protocol's default when the server names no expires_in.
constexpr std::chrono::seconds kDefaultTokenLifetime{60};
// A token is dropped this long before it expires, so a request never carries one that dies on
// its way.
constexpr std::chrono::seconds kExpiryMargin{5};

Status Unauthorized(const std::string& what) {
  return Status(Code::kUnauthenticated, what, pull_reason::kUnauthorized);
}

}  // namespace

std::string BasicAuthorization(const BasicCredentials& c) {
  return "Authorization: Basic " + EncodeBase64(c.username + ":" + c.password);
}

std::string RegistryAuthCache::Key(const std::string& host, const std::string& scope,
                                   const std::optional<BasicCredentials>& credentials) {
  std::string key = host + " " + scope;
  if (credentials) {
    // The password only as a hash, so the key is safe to log in a debugger.
    key += " " + credentials->username + " " +
           std::to_string(std::hash<std::string>{}(credentials->password));
  }
  return key;
}

std::string RegistryAuthCache::Cached(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return "";
  if (Clock::now() >= it->second.expires) {
    entries_.erase(it);
    return "";
  }
  return it->second.header;
}

Result<std::string> RegistryAuthCache::Answer(const std::string& www_authenticate,
                                              const std::string& scope, const std::string& key,
                                              const std::optional<BasicCredentials>& credentials) {
  if (www_authenticate.empty())
    return Unauthorized("HTTP 401 without a WWW-Authenticate challenge");
  auto challenge = ParseAuthChallenge(www_authenticate);
  if (!challenge.ok()) return Unauthorized(challenge.status().message());
  std::string header;
  Clock::time_point expires = Clock::time_point::max();
  if (challenge->scheme == "basic") {
    if (!credentials)
      return Unauthorized(
          "the registry asks for credentials and the actor has no pull secret for it");
    header = BasicAuthorization(*credentials);
  } else if (challenge->scheme == "bearer") {
    if (challenge->Param("realm").empty())
      return Unauthorized("a Bearer challenge without a realm");
    std::chrono::seconds lifetime = kDefaultTokenLifetime;
    auto token = FetchToken(TokenRequestUrl(*challenge, scope), credentials, &lifetime);
    if (!token.ok()) return token.status();
    header = "Authorization: Bearer " + *token;
    expires = Clock::now() + lifetime - kExpiryMargin;
  } else {
    return Unauthorized("unsupported authentication scheme \"" + challenge->scheme + "\"");
  }
  std::lock_guard<std::mutex> lock(mu_);
  entries_[key] = {header, expires};
  return header;
}

Result<std::string> RegistryAuthCache::FetchToken(
    const std::string& url, const std::optional<BasicCredentials>& credentials,
    std::chrono::seconds* lifetime) {
  HttpCall call;
  call.url = url;
  if (credentials) call.headers.push_back(BasicAuthorization(*credentials));
  call.max_body = 1 << 20;
  HttpReply r = http_.Perform(call);
  if (r.transport_error) {
    return Status(Code::kUnavailable, "token server " + url + ": " + r.error,
                  pull_reason::kRegistryUnavailable);
  }
  if (r.status == 401 || r.status == 403)
    return Unauthorized("token server " + url + " refused: HTTP " + std::to_string(r.status));
  if (r.status != 200) {
    return Status(Code::kUnavailable, "token server " + url + ": HTTP " + std::to_string(r.status),
                  pull_reason::kRegistryUnavailable);
  }
  nlohmann::json doc = nlohmann::json::parse(r.body, nullptr, false);
  std::string token;
  // "token" is the protocol's; "access_token" the OAuth2 spelling some servers use instead.
  for (const char* field : {"token", "access_token"}) {
    if (doc.is_object() && doc.contains(field) && doc[field].is_string())
      token = doc[field].get<std::string>();
    if (!token.empty()) break;
  }
  if (token.empty()) return Unauthorized("token server " + url + " answered without a token");
  if (doc.contains("expires_in") && doc["expires_in"].is_number_integer()) {
    *lifetime = std::max(std::chrono::seconds(doc["expires_in"].get<int64_t>()), kExpiryMargin * 2);
  }
  return token;
}

}  // namespace stasis::images
