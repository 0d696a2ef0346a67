// A registry's WWW-Authenticate challenge (RFC 7235): "Basic realm=…" or "Bearer realm=…,
// service=…,scope=…" (the distribution token protocol). Parsed, not matched by hand-written
// regexes scattered through the client.
#pragma once

#include <map>
#include <string>

#include "base/status.h"

namespace stasis::images {

struct AuthChallenge {
  std::string scheme;                        // "basic" or "bearer", lower case
  std::map<std::string, std::string> params;  // keys lower case; quoted values unquoted
  std::string Param(const std::string& key) const;
};

// kInvalidArgument reason "bad_auth_challenge" when the header has no scheme or a malformed
// parameter list.
[[nodiscard]] Result<AuthChallenge> ParseAuthChallenge(const std::string& header);

// The token request URL for a Bearer challenge: realm?service=…&scope=… (URL-encoded), with
// `scope` used when the challenge names none ("repository:<repo>:pull").
std::string TokenRequestUrl(const AuthChallenge& challenge, const std::string& scope);

}  // namespace stasis::images
