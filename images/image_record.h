// unpacked/<hex>/image.json: what the cache knows of an image it holds, written last by a pull
// (its presence marks the entry complete) and read by every lookup; and what both halves of
// the cache (image_store.cc, image_pull.cc) use to name and read its files.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "images/oci_manifest.h"

namespace stasis::images {

inline constexpr char kImageRecordFile[] = "image.json";

struct ImageRecord {
  std::string digest;         // the manifest's
  std::string config_digest;
  int64_t bytes = 0;          // regular files' bytes of the rootfs
  ImageConfig config;
};

std::string ImageRecordToJson(const ImageRecord& record);
// kInvalidArgument when the text is not a record.
[[nodiscard]] Result<ImageRecord> ImageRecordFromJson(const std::string& text);

// "sha256:<hex>" → "<hex>": how the cache names an image's or a blob's files.
std::string DigestHex(const std::string& digest);
// A small file of the cache (a record, a tag, an image config) whole; kNotFound when unreadable.
[[nodiscard]] Result<std::string> ReadCacheFile(const std::string& path);

}  // namespace stasis::images
