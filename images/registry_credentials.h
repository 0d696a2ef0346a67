// Credentials for registries, from Kubernetes pull secrets: a Secret of type
// kubernetes.io/dockerconfigjson holds {"auths": {"<registry>": {"auth": base64("user:pass")}
// or {"username", "password"}}}. Keys are matched as the kubelet matches them: a key may carry
// a scheme and a path ("https://registry:5000/v1/"), which are ignored; host and port must be
// equal; "docker.io", "index.docker.io" and "registry-1.docker.io" are one registry.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis::images {

struct BasicCredentials {
  std::string username;
  std::string password;
  bool operator==(const BasicCredentials&) const = default;
};

struct RegistryAuth {
  std::string registry;  // the key's host[:port], normalised
  BasicCredentials credentials;
};

// Parses the Secret's .dockerconfigjson value (already base64-decoded by the caller's JSON
// read of `data`: the caller passes the decoded bytes). kInvalidArgument reason
// "bad_pull_secret" naming the key that is malformed; an "auth" that does not decode to
// "user:password" is malformed.
[[nodiscard]] Result<std::vector<RegistryAuth>> ParseDockerConfigJson(const std::string& json);

// The first entry for `registry` (host[:port] as in ImageReference::registry), in the order of
// the pull secrets given, or nullopt.
std::optional<BasicCredentials> CredentialsFor(const std::vector<RegistryAuth>& auths,
                                               const std::string& registry);

}  // namespace stasis::images
