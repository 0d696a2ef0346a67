// The OCI image formats the agent reads (image-spec v1.1, and Docker's v2 schema 2 media types
// that registries still serve): an index (manifest list) resolved to one platform's manifest,
// a manifest's config and layer descriptors, and the image config's runtime defaults. Parsed
// with nlohmann::json; every descriptor's digest is checked for form here, its content by the
// caller as it streams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis::images {

namespace media_type {
inline constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
inline constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
inline constexpr char kOciConfig[] = "application/vnd.oci.image.config.v1+json";
inline constexpr char kOciLayerTar[] = "application/vnd.oci.image.layer.v1.tar";
inline constexpr char kOciLayerGzip[] = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr char kOciLayerZstd[] = "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr char kDockerManifestList[] = "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr char kDockerManifest[] = "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr char kDockerConfig[] = "application/vnd.docker.container.image.v1+json";
inline constexpr char kDockerLayerGzip[] = "application/vnd.docker.image.rootfs.diff.tar.gzip";
}  // namespace media_type

// The Accept header of a manifest request: every manifest and index type above.
std::string ManifestAcceptHeader();

struct Platform {
  std::string os = "linux";
  std::string architecture;  // GOARCH spelling: "amd64", "arm64"
  std::string variant;       // "v8" for arm64 where given; "" matches any
  bool operator==(const Platform&) const = default;
};
// This node's platform (uname's machine mapped to GOARCH).
Platform HostPlatform();

struct Descriptor {
  std::string media_type;
  std::string digest;  // "sha256:…" (checked by IsSha256Digest)
  int64_t size = 0;
  std::optional<Platform> platform;  // index entries only
  bool operator==(const Descriptor&) const = default;
};

struct ImageIndex {
  std::vector<Descriptor> manifests;
};

struct ImageManifest {
  Descriptor config;
  std::vector<Descriptor> layers;  // bottom first
};

// What the runtime needs from the image config ("config" object), and the layers' diff IDs.
struct ImageConfig {
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // "K=V"
  std::string working_dir;
  std::string user;  // "uid[:gid]" or a name (names are refused at bundle time: no passwd lookup)
  std::vector<std::string> diff_ids;  // rootfs.diff_ids: sha256 of each uncompressed layer
  Platform platform;                  // os, architecture, variant
};

// Whether `media_type` names an index (OCI index or Docker manifest list).
bool IsIndexMediaType(const std::string& media_type);
bool IsManifestMediaType(const std::string& media_type);
// Whether the layer media type is one the agent unpacks (tar, gzip, zstd; OCI and Docker).
bool IsSupportedLayerMediaType(const std::string& media_type);

// kInvalidArgument reason "bad_manifest" naming the field, for JSON that is not the type.
[[nodiscard]] Result<ImageIndex> ParseImageIndex(const std::string& body);
[[nodiscard]] Result<ImageManifest> ParseImageManifest(const std::string& body);
[[nodiscard]] Result<ImageConfig> ParseImageConfig(const std::string& body);

// The index entry for `platform` (os and architecture equal; a requested variant must match
// when the entry has one). kNotFound reason "platform_not_found" listing what the index has.
[[nodiscard]] Result<Descriptor> SelectPlatform(const ImageIndex& index, const Platform& platform);

}  // namespace stasis::images
