// Why getting an image failed: the Status::reason() values of the images/ layer, in one place,
// so that the node agent's condition reasons and metric labels (image_failures.h,
// image_metrics.cc) are decided on constants, never on repeated strings.
//   reason                    code                 meaning
//   "image_not_found"         kNotFound            404 for a manifest or blob
//   "unauthorized"            kUnauthenticated     401/403 after authenticating (or no credentials)
//   "digest_mismatch"         kFailedPrecondition  content differs from its digest or size
//   "registry_unavailable"    kUnavailable         connect/TLS/5xx/transfer errors, timeouts: retry
//   "bad_manifest"            kInvalidArgument     the manifest or config cannot be used
//   "invalid_image_reference" kInvalidArgument     the reference is not distribution's grammar
//   "platform_not_found"      kNotFound            an index without this node's platform
//   "bad_layer"               kInvalidArgument     a layer member refused, or a diff ID mismatch
//   "bad_image_config"        kInvalidArgument     no runtime spec can be made from the config
//   "image_not_present"       kFailedPrecondition  policy Never and no copy on the node
//   "unpack_failed"           kInternal            the node could not write the cache
#pragma once

namespace stasis::images::pull_reason {

inline constexpr char kImageNotFound[] = "image_not_found";
inline constexpr char kUnauthorized[] = "unauthorized";
inline constexpr char kDigestMismatch[] = "digest_mismatch";
inline constexpr char kRegistryUnavailable[] = "registry_unavailable";
inline constexpr char kBadManifest[] = "bad_manifest";
inline constexpr char kInvalidReference[] = "invalid_image_reference";
inline constexpr char kPlatformNotFound[] = "platform_not_found";
inline constexpr char kBadLayer[] = "bad_layer";
inline constexpr char kBadImageConfig[] = "bad_image_config";
inline constexpr char kImageNotPresent[] = "image_not_present";
inline constexpr char kUnpackFailed[] = "unpack_failed";

}  // namespace stasis::images::pull_reason
