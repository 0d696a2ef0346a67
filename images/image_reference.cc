#include "images/image_reference.h"

#include <regex>

#include "images/image_reasons.h"

namespace stasis::images {
namespace {

constexpr const char* kInvalid = pull_reason::kInvalidReference;
constexpr size_t kMaxNameLength = 255;  // distribution's NameTotalLengthMax

Status Invalid(std::string_view text, const std::string& why) {
  return Status(Code::kInvalidArgument, "image reference \"" + std::string(text) + "\": " + why,
                kInvalid);
}

// The distribution project's reference/regexp.go, for the parts stasis accepts.
const std::regex& PathComponent() {
  static const std::regex re("[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*");
  return re;
}
const std::regex& Domain() {
  // Host components separated by dots, an optional port; or a bracketed IPv6 address.
  static const std::regex re(
      "(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
      "(?:\\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*"
      "|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?");
  return re;
}
const std::regex& Tag() {
  static const std::regex re("[\\w][\\w.-]{0,127}");
  return re;
}
const std::regex& Sha256Hex() {
  static const std::regex re("[a-f0-9]{64}");
  return re;
}

// Docker's splitDockerDomain: the first component is a registry host only when it looks like
// one; "busybox" and "team/app" are on Docker Hub.
std::pair<std::string, std::string> SplitDomain(const std::string& name) {
  size_t slash = name.find('/');
  if (slash == std::string::npos) return {kDockerHub, name};
  std::string first = name.substr(0, slash);
  bool is_host = first.find_first_of(".:") != std::string::npos || first == "localhost";
  if (!is_host) {
    // An uppercase first component cannot be a repository, so distribution takes it for a host.
    for (char c : first) is_host = is_host || (c >= 'A' && c <= 'Z');
  }
  if (!is_host) return {kDockerHub, name};
  return {first, name.substr(slash + 1)};
}

Status CheckPath(std::string_view text, const std::string& path) {
  if (path.empty()) return Invalid(text, "empty repository");
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    std::string part =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!std::regex_match(part, PathComponent())) {
      bool upper = false;
      for (char c : part) upper = upper || (c >= 'A' && c <= 'Z');
      return Invalid(text, upper ? "repository name must be lowercase"
                                 : "invalid repository component \"" + part + "\"");
    }
    if (slash == std::string::npos) return OkStatus();
    start = slash + 1;
  }
}

}  // namespace

bool IsSha256Digest(std::string_view digest) {
  constexpr std::string_view kPrefix = "sha256:";
  if (digest.size() != kPrefix.size() + 64 || digest.substr(0, kPrefix.size()) != kPrefix)
    return false;
  for (char c : digest.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<ImageReference> ParseImageReference(std::string_view text) {
  if (text.empty()) return Invalid(text, "empty");
  std::string rest(text);
  ImageReference ref;
  if (size_t at = rest.find('@'); at != std::string::npos) {
    ref.digest = rest.substr(at + 1);
    rest.resize(at);
    if (!IsSha256Digest(ref.digest)) {
      return Invalid(text,
                     "digest \"" + ref.digest + "\" is not sha256: with 64 lowercase hex digits");
    }
  }
  // A tag follows the last ':' that comes after the last '/' (a ':' before it is a port).
  size_t colon = rest.rfind(':');
  size_t slash = rest.rfind('/');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = rest.substr(colon + 1);
    rest.resize(colon);
    if (!std::regex_match(ref.tag, Tag())) return Invalid(text, "invalid tag \"" + ref.tag + "\"");
  }
  if (rest.size() > kMaxNameLength) return Invalid(text, "name longer than 255 characters");
  if (std::regex_match(rest, Sha256Hex())) {
    return Invalid(text, "a 64-digit hex string is an image ID, not a repository");
  }
  auto [domain, path] = SplitDomain(rest);
  if (!std::regex_match(domain, Domain()))
    return Invalid(text, "invalid registry host \"" + domain + "\"");
  if (Status s = CheckPath(text, path); !s.ok()) return s;
  if (domain == "index.docker.io") domain = kDockerHub;
  if (domain == kDockerHub && path.find('/') == std::string::npos) path = "library/" + path;
  // The normalised name ("docker.io/library/x") is what distribution bounds, too.
  if (domain.size() + 1 + path.size() > kMaxNameLength)
    return Invalid(text, "name longer than 255 characters");
  ref.registry = domain;
  ref.repository = path;
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

std::string ImageReference::ApiHost() const {
  return registry == kDockerHub ? std::string(kDockerHubApiHost) : registry;
}

std::string ImageReference::ToString() const {
  std::string s = registry + "/" + repository;
  if (!tag.empty()) s += ":" + tag;
  if (!digest.empty()) s += "@" + digest;
  return s;
}

ImageReference ImageReference::WithDigest(const std::string& pinned) const {
  ImageReference r = *this;
  r.tag.clear();
  r.digest = pinned;
  return r;
}

}  // namespace stasis::images
