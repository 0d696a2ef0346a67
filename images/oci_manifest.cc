#include "images/oci_manifest.h"

#include <sys/utsname.h>

#include <nlohmann/json.hpp>

#include "images/image_reasons.h"
#include "images/image_reference.h"

namespace stasis::images {
namespace {

using nlohmann::json;

Status Bad(const std::string& what, const std::string& field, const std::string& problem) {
  return Status(Code::kInvalidArgument, what + ": " + field + " " + problem, pull_reason::kBadManifest);
}

// The body as a JSON object with schemaVersion 2. A mediaType, when present, must be one of
// `accepted`: a manifest served as an index (or the reverse) is the wrong document.
Result<json> ParseTop(const std::string& body, const std::string& what, bool (*accepted)(const std::string&)) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(Code::kInvalidArgument, what + ": not JSON", pull_reason::kBadManifest);
  if (!j.is_object()) return Bad(what, "body", "is not an object");
  const auto version = j.find("schemaVersion");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 2) {
    return Bad(what, "schemaVersion", "is not 2");
  }
  if (accepted != nullptr) {
    const auto type = j.find("mediaType");
    if (type != j.end() && (!type->is_string() || !accepted(type->get<std::string>()))) {
      return Bad(what, "mediaType", "is " + type->dump());
    }
  }
  return j;
}

// An optional string member: "" when absent or null; an error when of another type.
Result<std::string> OptionalString(const json& j, const std::string& key, const std::string& what) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Bad(what, key, "is not a string");
  return it->get<std::string>();
}

// An optional array of strings: empty when absent or null (Docker writes "Cmd": null).
Result<std::vector<std::string>> OptionalStrings(const json& j, const std::string& key, const std::string& what) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::vector<std::string>();
  if (!it->is_array()) return Bad(what, key, "is not an array");
  std::vector<std::string> out;
  for (const auto& item : *it) {
    if (!item.is_string()) return Bad(what, key, "holds a non-string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

Result<Platform> ParsePlatform(const json& j, const std::string& what) {
  if (!j.is_object()) return Bad(what, "platform", "is not an object");
  Platform p;
  auto os = OptionalString(j, "os", what + " platform");
  auto arch = OptionalString(j, "architecture", what + " platform");
  auto variant = OptionalString(j, "variant", what + " platform");
  if (!os.ok()) return os.status();
  if (!arch.ok()) return arch.status();
  if (!variant.ok()) return variant.status();
  p.os = *os;
  p.architecture = *arch;
  p.variant = *variant;
  return p;
}

Result<Descriptor> ParseDescriptor(const json& j, const std::string& what) {
  if (!j.is_object()) return Bad(what, "descriptor", "is not an object");
  Descriptor d;
  const auto type = j.find("mediaType");
  if (type == j.end() || !type->is_string() || type->get<std::string>().empty()) {
    return Bad(what, "mediaType", "is missing");
  }
  d.media_type = type->get<std::string>();
  const auto digest = j.find("digest");
  if (digest == j.end() || !digest->is_string() || !IsSha256Digest(digest->get<std::string>())) {
    return Bad(what, "digest", digest == j.end() ? "is missing" : "is not sha256:<64 hex>: " + digest->dump());
  }
  d.digest = digest->get<std::string>();
  const auto size = j.find("size");
  if (size == j.end() || !size->is_number_integer() || size->get<int64_t>() < 0) {
    return Bad(what, "size", "is not a non-negative integer");
  }
  d.size = size->get<int64_t>();
  if (const auto p = j.find("platform"); p != j.end() && !p->is_null()) {
    auto platform = ParsePlatform(*p, what);
    if (!platform.ok()) return platform.status();
    d.platform = std::move(platform).value();
  }
  return d;
}

std::string PlatformName(const Platform& p) {
  return p.os + "/" + p.architecture + (p.variant.empty() ? "" : "/" + p.variant);
}

bool PlatformMatches(const Platform& entry, const Platform& wanted) {
  if (entry.os != wanted.os || entry.architecture != wanted.architecture) return false;
  return wanted.variant.empty() || entry.variant.empty() || entry.variant == wanted.variant;
}

}  // namespace

std::string ManifestAcceptHeader() {
  return std::string(media_type::kOciIndex) + ", " + media_type::kOciManifest + ", " +
         media_type::kDockerManifestList + ", " + media_type::kDockerManifest;
}

Platform HostPlatform() {
  struct utsname u {};
  const std::string machine = uname(&u) == 0 ? u.machine : "";
  Platform p;
  // Go's GOARCH names, as image indexes spell them (containerd's platforms.Normalize).
  if (machine == "x86_64" || machine == "amd64") {
    p.architecture = "amd64";
  } else if (machine == "aarch64" || machine == "arm64") {
    p.architecture = "arm64";
    p.variant = "v8";
  } else if (machine == "armv7l" || machine == "armv7") {
    p.architecture = "arm";
    p.variant = "v7";
  } else if (machine == "armv6l" || machine == "armv6") {
    p.architecture = "arm";
    p.variant = "v6";
  } else if (machine == "i386" || machine == "i486" || machine == "i586" || machine == "i686") {
    p.architecture = "386";
  } else {
    p.architecture = machine;  // ppc64le, s390x, riscv64 are spelled alike
  }
  return p;
}

bool IsIndexMediaType(const std::string& media_type) {
  return media_type == media_type::kOciIndex || media_type == media_type::kDockerManifestList;
}

bool IsManifestMediaType(const std::string& media_type) {
  return media_type == media_type::kOciManifest || media_type == media_type::kDockerManifest;
}

bool IsSupportedLayerMediaType(const std::string& media_type) {
  return media_type == media_type::kOciLayerTar || media_type == media_type::kOciLayerGzip ||
         media_type == media_type::kOciLayerZstd || media_type == media_type::kDockerLayerGzip;
}

Result<ImageIndex> ParseImageIndex(const std::string& body) {
  auto top = ParseTop(body, "image index", IsIndexMediaType);
  if (!top.ok()) return top.status();
  const auto manifests = top->find("manifests");
  if (manifests == top->end() || !manifests->is_array()) return Bad("image index", "manifests", "is not an array");
  ImageIndex index;
  for (size_t i = 0; i < manifests->size(); ++i) {
    auto d = ParseDescriptor((*manifests)[i], "image index manifests[" + std::to_string(i) + "]");
    if (!d.ok()) return d.status();
    index.manifests.push_back(std::move(d).value());
  }
  return index;
}

Result<ImageManifest> ParseImageManifest(const std::string& body) {
  auto top = ParseTop(body, "image manifest", IsManifestMediaType);
  if (!top.ok()) return top.status();
  const auto config = top->find("config");
  if (config == top->end()) return Bad("image manifest", "config", "is missing");
  auto config_descriptor = ParseDescriptor(*config, "image manifest config");
  if (!config_descriptor.ok()) return config_descriptor.status();
  const auto layers = top->find("layers");
  if (layers == top->end() || !layers->is_array()) return Bad("image manifest", "layers", "is not an array");
  ImageManifest manifest;
  manifest.config = std::move(config_descriptor).value();
  for (size_t i = 0; i < layers->size(); ++i) {
    auto d = ParseDescriptor((*layers)[i], "image manifest layers[" + std::to_string(i) + "]");
    if (!d.ok()) return d.status();
    manifest.layers.push_back(std::move(d).value());
  }
  return manifest;
}

Result<ImageConfig> ParseImageConfig(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(Code::kInvalidArgument, "image config: not JSON", pull_reason::kBadManifest);
  if (!j.is_object()) return Bad("image config", "body", "is not an object");
  ImageConfig out;
  auto platform = ParsePlatform(j, "image config");
  if (!platform.ok()) return platform.status();
  out.platform = std::move(platform).value();
  // "config" is optional in OCI (an image with nothing to run has none) and null in some
  // Docker configs; BuildRuntimeSpec refuses an image that leaves nothing to run.
  if (const auto c = j.find("config"); c != j.end() && !c->is_null()) {
    if (!c->is_object()) return Bad("image config", "config", "is not an object");
    const std::string what = "image config config";
    auto entrypoint = OptionalStrings(*c, "Entrypoint", what);
    auto cmd = OptionalStrings(*c, "Cmd", what);
    auto env = OptionalStrings(*c, "Env", what);
    auto dir = OptionalString(*c, "WorkingDir", what);
    auto user = OptionalString(*c, "User", what);
    for (const Status* s : {&entrypoint.status(), &cmd.status(), &env.status(), &dir.status(), &user.status()}) {
      if (!s->ok()) return *s;
    }
    out.entrypoint = std::move(entrypoint).value();
    out.cmd = std::move(cmd).value();
    out.env = std::move(env).value();
    out.working_dir = std::move(dir).value();
    out.user = std::move(user).value();
  }
  const auto rootfs = j.find("rootfs");
  if (rootfs == j.end() || !rootfs->is_object()) return Bad("image config", "rootfs", "is not an object");
  auto diff_ids = OptionalStrings(*rootfs, "diff_ids", "image config rootfs");
  if (!diff_ids.ok()) return diff_ids.status();
  for (const auto& id : *diff_ids) {
    if (!IsSha256Digest(id)) return Bad("image config", "rootfs.diff_ids", "holds \"" + id + "\", not sha256:<64 hex>");
  }
  out.diff_ids = std::move(diff_ids).value();
  return out;
}

Result<Descriptor> SelectPlatform(const ImageIndex& index, const Platform& platform) {
  const Descriptor* loose = nullptr;  // matched only because the entry gave no variant
  std::string have;
  for (const auto& d : index.manifests) {
    if (!d.platform) continue;
    have += (have.empty() ? "" : ", ") + PlatformName(*d.platform);
    if (!IsManifestMediaType(d.media_type) || !PlatformMatches(*d.platform, platform)) continue;
    if (d.platform->variant == platform.variant) return d;
    if (loose == nullptr) loose = &d;
  }
  if (loose != nullptr) return *loose;
  return Status(Code::kNotFound,
                "the image index has no " + PlatformName(platform) + " manifest (it has: " +
                    (have.empty() ? "no platforms" : have) + ")",
                pull_reason::kPlatformNotFound);
}

}  // namespace stasis::images
