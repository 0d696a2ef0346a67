#include "images/registry_credentials.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "base/base64.h"

namespace stasis::images {
namespace {

constexpr char kBadPullSecret[] = "bad_pull_secret";

Status Bad(const std::string& key, const std::string& why) {
  return Status(Code::kInvalidArgument, "pull secret entry \"" + key + "\": " + why,
                kBadPullSecret);
}

// The kubelet's parseSchemelessUrl and its docker.io aliases: a key is a host[:port], perhaps
// written with a scheme and a path, compared without them.
std::string NormaliseRegistry(std::string key) {
  for (std::string_view scheme : {"https://", "http://"}) {
    if (key.starts_with(scheme)) key.erase(0, scheme.size());
  }
  if (size_t slash = key.find('/'); slash != std::string::npos) key.resize(slash);
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (key == "index.docker.io" || key == "registry-1.docker.io") return "docker.io";
  return key;
}

Result<BasicCredentials> EntryCredentials(const std::string& key, const nlohmann::json& entry) {
  if (!entry.is_object()) return Bad(key, "not an object");
  BasicCredentials c;
  if (auto auth = entry.find("auth");
      auth != entry.end() && !(auth->is_string() && auth->get<std::string>().empty())) {
    if (!auth->is_string()) return Bad(key, "\"auth\" is not a string");
    auto decoded = DecodeBase64(auth->get<std::string>());
    if (!decoded) return Bad(key, "\"auth\" is not base64");
    size_t colon = decoded->find(':');
    if (colon == std::string::npos || colon == 0)
      return Bad(key, "\"auth\" does not decode to user:password");
    c.username = decoded->substr(0, colon);
    c.password = decoded->substr(colon + 1);
    return c;
  }
  auto user = entry.find("username");
  auto pass = entry.find("password");
  if (user == entry.end() || !user->is_string() || user->get<std::string>().empty()) {
    return Bad(key, "neither \"auth\" nor \"username\"");
  }
  if (pass != entry.end() && !pass->is_string()) return Bad(key, "\"password\" is not a string");
  c.username = user->get<std::string>();
  if (pass != entry.end()) c.password = pass->get<std::string>();
  return c;
}

}  // namespace

Result<std::vector<RegistryAuth>> ParseDockerConfigJson(const std::string& json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad(".dockerconfigjson", "not a JSON object");
  auto auths = doc.find("auths");
  if (auths == doc.end() || !auths->is_object()) return Bad("auths", "missing or not an object");
  std::vector<RegistryAuth> out;
  for (auto it = auths->begin(); it != auths->end(); ++it) {
    auto creds = EntryCredentials(it.key(), it.value());
    if (!creds.ok()) return creds.status();
    std::string registry = NormaliseRegistry(it.key());
    if (registry.empty()) return Bad(it.key(), "no registry host");
    out.push_back({registry, *creds});
  }
  return out;
}

std::optional<BasicCredentials> CredentialsFor(const std::vector<RegistryAuth>& auths,
                                               const std::string& registry) {
  std::string want = NormaliseRegistry(registry);
  for (const RegistryAuth& a : auths) {
    if (NormaliseRegistry(a.registry) == want) return a.credentials;
  }
  return std::nullopt;
}

}  // namespace stasis::images
