// ImageStore's registry side: a reference resolved to one manifest for this node's platform,
// its config read, its layers fetched (verified as they stream, resumed from partial files)
// and applied in order into a private directory, each checked against its diff ID, then the
// directory renamed into place — the only way an image appears in the cache.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "images/image_record.h"
#include "images/image_store.h"

namespace stasis::images {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

Status BadManifest(const std::string& message) {
  return Status(Code::kInvalidArgument, message, pull_reason::kBadManifest);
}

// The bytes of regular files under `dir` (what an image costs on disk).
int64_t TreeBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += static_cast<int64_t>(it->file_size(ec));
  }
  return total;
}

}  // namespace

struct ImageStore::Resolved {
  std::string digest;  // of the platform's manifest: the cache key and what status records
  ImageManifest manifest;
  ImageConfig config;
  std::optional<BasicCredentials> credentials;
};

Result<ImageStore::Resolved> ImageStore::Resolve(const PullRequest& request) {
  Resolved r;
  r.credentials = CredentialsFor(request.auths, request.image.registry);
  const std::string ref = !request.pinned_digest.empty() ? request.pinned_digest
                          : !request.image.digest.empty() ? request.image.digest
                                                          : request.image.tag;
  auto fetched = registry_.GetManifest(request.image, ref, r.credentials);
  if (!fetched.ok()) return fetched.status();
  if (IsIndexMediaType(fetched->media_type)) {
    auto index = ParseImageIndex(fetched->body);
    if (!index.ok()) return index.status();
    auto entry = SelectPlatform(*index, options_.platform);
    if (!entry.ok()) return entry.status();
    fetched = registry_.GetManifest(request.image, entry->digest, r.credentials);
    if (!fetched.ok()) return fetched.status();
    if (!IsManifestMediaType(fetched->media_type)) {
      return BadManifest("the index entry " + entry->digest + " is not an image manifest");
    }
  }
  auto manifest = ParseImageManifest(fetched->body);
  if (!manifest.ok()) return manifest.status();
  r.digest = fetched->digest;
  r.manifest = std::move(*manifest);
  const std::string config_path = PartialBlob(r.manifest.config.digest);
  Status got = registry_.FetchBlob(request.image, r.manifest.config.digest, r.manifest.config.size,
                                   config_path, r.credentials);
  if (!got.ok()) return got;
  auto body = ReadCacheFile(config_path);
  std::error_code ec;
  fs::remove(config_path, ec);
  if (!body.ok()) return body.status();
  auto config = ParseImageConfig(*body);
  if (!config.ok()) return config.status();
  r.config = std::move(*config);
  if (r.config.diff_ids.size() != r.manifest.layers.size()) {
    return BadManifest("the image config lists " + std::to_string(r.config.diff_ids.size()) +
                       " diff IDs for " + std::to_string(r.manifest.layers.size()) + " layers");
  }
  return r;
}

Result<int64_t> ImageStore::FetchAndApplyLayers(const PullRequest& request, const Resolved& resolved,
                                                const std::string& rootfs) {
  const auto deadline = SteadyClock::now() + request.deadline;
  int64_t fetched_bytes = 0;
  double unpack_seconds = 0;
  int64_t unpacked_bytes = 0;
  for (size_t i = 0; i < resolved.manifest.layers.size(); ++i) {
    const Descriptor& layer = resolved.manifest.layers[i];
    if (!IsSupportedLayerMediaType(layer.media_type)) {
      return BadManifest("layer " + layer.digest + " has media type " + layer.media_type +
                         ", which this node does not unpack");
    }
    if (SteadyClock::now() > deadline) {
      return Status(Code::kDeadlineExceeded, "the pull of " + request.image.ToString() + " ran past its deadline",
                    pull_reason::kRegistryUnavailable);
    }
    const std::string blob = PartialBlob(layer.digest);
    {
      // Two images sharing a layer, pulled at once, must not write one partial file together.
      auto lock = LockFor("blob:" + layer.digest);
      std::lock_guard guard(*lock);
      if (Status s = registry_.FetchBlob(request.image, layer.digest, layer.size, blob, resolved.credentials);
          !s.ok()) {
        return s;
      }
    }
    fetched_bytes += layer.size;
    const auto unpack_start = SteadyClock::now();
    auto applied = ApplyLayer(blob, rootfs, options_.unpack);
    unpack_seconds += SecondsSince(unpack_start);
    std::error_code ec;
    fs::remove(blob, ec);  // verified once; the unpacked tree is the cache from here on
    if (!applied.ok()) return applied.status();
    if (applied->diff_id != resolved.config.diff_ids[i]) {
      return Status(Code::kInvalidArgument,
                    "layer " + layer.digest + " unpacks to " + applied->diff_id + ", the image config says " +
                        resolved.config.diff_ids[i],
                    kBadLayer);
    }
    unpacked_bytes += applied->bytes;
  }
  if (observer_) observer_->Unpack(unpacked_bytes, unpack_seconds);
  return fetched_bytes;
}

std::string ImageStore::PartialBlob(const std::string& digest) const {
  return CacheDir() + "/blobs/partial/" + DigestHex(digest);
}

Status ImageStore::Publish(const Resolved& resolved, const std::string& tmp_dir, int64_t bytes) {
  ImageRecord record{resolved.digest, resolved.manifest.config.digest, bytes, resolved.config};
  {
    std::ofstream out(tmp_dir + "/" + kImageRecordFile, std::ios::trunc);
    out << ImageRecordToJson(record);
    out.flush();
    if (!out) return Status(Code::kInternal, "cannot write " + tmp_dir + "/" + kImageRecordFile, pull_reason::kUnpackFailed);
  }
  const std::string final_dir = UnpackedDir(resolved.digest);
  std::error_code ec;
  fs::rename(tmp_dir, final_dir, ec);
  if (ec && fs::exists(final_dir + "/" + kImageRecordFile)) {
    fs::remove_all(tmp_dir, ec);  // published meanwhile (another agent process): the same content
    return OkStatus();
  }
  if (ec) return Status(Code::kInternal, "cannot publish " + final_dir + ": " + ec.message(), pull_reason::kUnpackFailed);
  return OkStatus();
}

Result<LocalImage> ImageStore::Pull(const PullRequest& request) {
  const auto start = SteadyClock::now();
  auto fail = [&](const Status& s) -> Result<LocalImage> {
    if (observer_) observer_->Pull(s.reason().empty() ? "error" : s.reason(), 0, SecondsSince(start));
    spdlog::warn("image pull failed image={} reason={} error=\"{}\"", request.image.ToString(), s.reason(),
                 s.message());
    return s;
  };
  auto resolved = Resolve(request);
  if (!resolved.ok()) return fail(resolved.status());
  auto publish_tag = [&] {
    if (!request.image.tag.empty() && request.pinned_digest.empty() && request.image.digest.empty()) {
      std::ofstream(TagFile(request.image) + ".tmp")
          << json{{"reference", request.image.ToString()}, {"digest", resolved->digest}}.dump();
      std::error_code ec;
      fs::rename(TagFile(request.image) + ".tmp", TagFile(request.image), ec);
    }
  };
  if (auto found = Find(resolved->digest); found.ok()) {
    publish_tag();
    if (observer_) observer_->CacheLookup(true);
    return found;
  }
  if (observer_) observer_->CacheLookup(false);
  const std::string tmp_dir = CacheDir() + "/tmp/" + DigestHex(resolved->digest) + "-" +
                              std::to_string(SteadyClock::now().time_since_epoch().count());
  std::error_code ec;
  fs::create_directories(tmp_dir + "/rootfs", ec);
  if (ec) return fail(Status(Code::kInternal, "cannot create " + tmp_dir + ": " + ec.message(), pull_reason::kUnpackFailed));
  auto fetched = FetchAndApplyLayers(request, *resolved, tmp_dir + "/rootfs");
  Status published = fetched.ok() ? Publish(*resolved, tmp_dir, TreeBytes(tmp_dir + "/rootfs")) : fetched.status();
  if (!published.ok()) {
    fs::remove_all(tmp_dir, ec);
    return fail(published);
  }
  auto image = Find(resolved->digest);
  if (!image.ok()) return fail(image.status());
  publish_tag();
  if (observer_) {
    observer_->Pull("success", *fetched, SecondsSince(start));
    observer_->CacheBytes(CachedBytes());
  }
  image->cache_hit = false;
  spdlog::info("image pulled image={} digest={} bytes={} duration_s={:.3f}", request.image.ToString(),
               resolved->digest, *fetched, SecondsSince(start));
  return image;
}

}  // namespace stasis::images
