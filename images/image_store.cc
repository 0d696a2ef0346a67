#include "images/image_store.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "images/image_eviction.h"
#include "images/image_record.h"

namespace stasis::images {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;


}  // namespace

// Digests held by starts in progress: Collect never removes one (the caller's in-use set comes
// from actors' status, which a start writes only after its sandbox runs).
struct ImageStore::Holds {
  std::mutex mu;
  std::map<std::string, int> count;
};

ImageStore::ImageStore(ImageStoreOptions options, RegistryClient& registry, ImageObserver* observer)
    : options_(std::move(options)), registry_(registry), observer_(observer), holds_(std::make_shared<Holds>()) {}

std::string ImageStore::CacheDir() const { return options_.root + "/images"; }

Status ImageStore::Open() {
  std::error_code ec;
  for (const char* sub : {"blobs/partial", "unpacked", "tags", "tmp"}) {
    fs::create_directories(CacheDir() + "/" + sub, ec);
    if (ec) return Status(Code::kInternal, "cannot create " + CacheDir() + "/" + sub + ": " + ec.message());
  }
  // Unpacks and removals an earlier agent did not finish (never a complete image), and its
  // partial downloads: resumed within one agent's life, they would otherwise outlive the
  // actors that wanted them.
  for (const char* sub : {"tmp", "blobs/partial"}) {
    for (const auto& e : fs::directory_iterator(CacheDir() + "/" + sub, ec)) fs::remove_all(e.path(), ec);
  }
  if (observer_) observer_->CacheBytes(CachedBytes());
  return OkStatus();
}

std::shared_ptr<std::mutex> ImageStore::LockFor(const std::string& key) {
  std::lock_guard lock(mu_);
  auto& m = per_key_[key];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

std::shared_ptr<void> ImageStore::Hold(const std::string& digest) {
  {
    std::lock_guard lock(holds_->mu);
    ++holds_->count[digest];
  }
  std::weak_ptr<Holds> holds = holds_;
  return std::shared_ptr<void>(nullptr, [holds, digest](void*) {
    if (auto h = holds.lock()) {
      std::lock_guard lock(h->mu);
      if (--h->count[digest] <= 0) h->count.erase(digest);
    }
  });
}

std::string ImageStore::TagFile(const ImageReference& image) const {
  return CacheDir() + "/tags/" + Sha256Hex(image.ToString()) + ".json";
}

std::string ImageStore::KnownDigest(const ImageReference& image) const {
  auto text = ReadCacheFile(TagFile(image));
  if (!text.ok()) return "";
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("reference", "") != image.ToString()) return "";
  return j.value("digest", "");
}

Result<LocalImage> ImageStore::Find(const std::string& digest) {
  if (!IsSha256Digest(digest)) {
    return Status(Code::kInvalidArgument, "not a sha256 digest: " + digest, "bad_manifest");
  }
  const fs::path dir = UnpackedDir(digest);
  auto text = ReadCacheFile(dir / kImageRecordFile);
  if (!text.ok()) return Status(Code::kNotFound, "image " + digest + " is not on this node", pull_reason::kImageNotPresent);
  auto record = ImageRecordFromJson(*text);
  if (!record.ok() || record->digest != digest) {
    return Status(Code::kNotFound, "image " + digest + " has an unreadable record", pull_reason::kImageNotPresent);
  }
  std::error_code ec;
  fs::last_write_time(dir / kImageRecordFile, fs::file_time_type::clock::now(), ec);
  LocalImage image;
  image.digest = digest;
  image.rootfs = (dir / "rootfs").string();
  image.config = std::move(record->config);
  image.bytes = record->bytes;
  image.cache_hit = true;
  image.hold = Hold(digest);
  return image;
}

std::string ImageStore::UnpackedDir(const std::string& digest) const {
  return CacheDir() + "/unpacked/" + DigestHex(digest);
}

std::string ImageStore::LocalDigest(const PullRequest& request) const {
  const std::string named = !request.pinned_digest.empty() ? request.pinned_digest : request.image.digest;
  if (!named.empty() || request.policy == PullPolicy::kAlways) return named;
  return KnownDigest(request.image);
}

bool ImageStore::WouldPull(const PullRequest& request) const {
  if (request.policy == PullPolicy::kNever) return false;
  const std::string known = LocalDigest(request);
  if (known.empty() || !IsSha256Digest(known)) return true;
  std::error_code ec;
  return !fs::exists(UnpackedDir(known) + "/" + kImageRecordFile, ec);
}

Result<LocalImage> ImageStore::Ensure(const PullRequest& request) {
  const std::string wanted = !request.pinned_digest.empty() ? request.pinned_digest : request.image.digest;
  auto lock = LockFor(wanted.empty() ? request.image.ToString() : wanted);
  std::lock_guard guard(*lock);
  if (const std::string known = LocalDigest(request); !known.empty()) {
    if (auto found = Find(known); found.ok()) {
      if (observer_) observer_->CacheLookup(true);
      return found;
    }
  }
  if (request.policy == PullPolicy::kNever) {
    if (observer_) observer_->CacheLookup(false);
    return Status(Code::kFailedPrecondition,
                  "image " + request.image.ToString() + " is not on this node and imagePullPolicy is Never",
                  pull_reason::kImageNotPresent);
  }
  return Pull(request);
}

std::set<std::string> ImageStore::Held() const {
  std::lock_guard lock(holds_->mu);
  std::set<std::string> held;
  for (const auto& [digest, n] : holds_->count) held.insert(digest);
  return held;
}

// Every complete image with its size and last use; entries without a readable record are left
// alone (never removed on a guess).
std::vector<CachedImage> ImageStore::ListCached() const {
  std::vector<CachedImage> images;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(CacheDir() + "/unpacked", ec)) {
    const fs::path record_path = e.path() / kImageRecordFile;
    auto text = ReadCacheFile(record_path);
    if (!text.ok()) continue;
    auto record = ImageRecordFromJson(*text);
    if (!record.ok() || DigestHex(record->digest) != e.path().filename().string()) continue;
    const auto mtime = fs::last_write_time(record_path, ec);
    if (ec) continue;
    const auto system_time = fs::file_time_type::clock::to_sys(mtime);
    images.push_back({record->digest, record->bytes, std::chrono::floor<std::chrono::seconds>(system_time), false});
  }
  return images;
}

int64_t ImageStore::CachedBytes() const {
  int64_t total = 0;
  for (const CachedImage& image : ListCached()) total += image.bytes;
  return total;
}

std::vector<std::string> ImageStore::Collect(const std::set<std::string>& in_use) {
  if (options_.budget_bytes <= 0) return {};
  std::vector<CachedImage> images = ListCached();
  const std::set<std::string> held = Held();
  const auto recent = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) -
                      options_.recent_use_grace;
  for (CachedImage& image : images) {
    image.in_use = in_use.count(image.digest) || held.count(image.digest) || image.last_used > recent;
  }
  std::vector<std::string> removed;
  for (const std::string& digest : PlanImageEviction(images, options_.budget_bytes)) {
    // Taken out of unpacked/ in one rename first: a removal cut short leaves only tmp/.
    auto lock = LockFor(digest);
    std::lock_guard guard(*lock);
    if (Held().count(digest)) continue;  // a start took it since the plan
    const fs::path from = UnpackedDir(digest);
    const fs::path to = CacheDir() + "/tmp/evicted-" + DigestHex(digest);
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec) {
      spdlog::warn("image not evicted digest={} error=\"{}\"", digest, ec.message());
      continue;
    }
    fs::remove_all(to, ec);
    int64_t bytes = 0;
    for (const CachedImage& image : images) if (image.digest == digest) bytes = image.bytes;
    if (observer_) observer_->CacheEviction(bytes);
    spdlog::info("image evicted digest={} bytes={}", digest, bytes);
    removed.push_back(digest);
  }
  if (observer_ && !removed.empty()) observer_->CacheBytes(CachedBytes());
  return removed;
}

}  // namespace stasis::images
