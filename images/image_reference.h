// An image reference as users write it in spec.image ("busybox", "registry:5000/team/app:v1",
// "ghcr.io/o/r@sha256:…"), parsed by the distribution project's grammar (its `reference`
// package is the field's definition: docker.io and "library/" are implied, a first component
// with "." or ":" or equal to "localhost" is a registry host, a tag is [\w][\w.-]{0,127}, a
// digest is algorithm ":" hex).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace stasis::images {

inline constexpr char kDockerHub[] = "docker.io";
// Where docker.io's API is served (the distribution project's DefaultRegistryHost).
inline constexpr char kDockerHubApiHost[] = "registry-1.docker.io";

struct ImageReference {
  std::string registry;    // host[:port] as written, docker.io when none was
  std::string repository;  // "library/busybox", "team/app"
  std::string tag;         // "" when the reference has only a digest; "latest" when neither
  std::string digest;      // "sha256:<64 hex>" or ""

  // The host the registry API is reached at (docker.io → registry-1.docker.io).
  std::string ApiHost() const;
  // The reference written back in full ("docker.io/library/busybox:latest", "…@sha256:…").
  std::string ToString() const;
  // The same repository pinned to `digest` (no tag).
  ImageReference WithDigest(const std::string& digest) const;
  bool operator==(const ImageReference&) const = default;
};

// kInvalidArgument with reason "invalid_image_reference" and a message naming what is wrong
// (uppercase repository, bad tag, a digest that is not sha256 with 64 hex digits, too long).
[[nodiscard]] Result<ImageReference> ParseImageReference(std::string_view text);

// "sha256:<64 lowercase hex>" exactly: the only digest form the agent stores or trusts.
bool IsSha256Digest(std::string_view digest);

}  // namespace stasis::images
