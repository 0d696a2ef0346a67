// The node's image cache: images pulled once, verified, unpacked once and shared read-only by
// every actor that runs them. Content-addressed under <root>/images/:
//
//   blobs/partial/<hex>        a layer being downloaded (kept across failures, for a resume;
//                              emptied at start-up)
//   unpacked/<hex>/rootfs/     the image's root filesystem (hex of the manifest digest)
//   unpacked/<hex>/image.json  what was pulled: reference, manifest and config digests, the
//                              parsed config, bytes; its mtime is the last use (eviction order)
//   tags/<sha256 of ref>.json  tag → digest, for pull policy IfNotPresent and Never
//   tmp/                       unpacks in progress; emptied at start-up
//
// Invariants:
//  - unpacked/<hex> exists only complete: layers are applied into tmp/ and renamed in one step,
//    after every blob matched its digest and every layer its diff ID; a failure removes the tmp
//    directory, so no partial entry is ever seen (and an agent killed mid-unpack leaves only
//    tmp/, emptied at the next start);
//  - layer blobs are removed once unpacked: the rootfs is the cache;
//  - one pull per image at a time (others wait for it and share its result);
//  - an image in use is never evicted (the caller says which are, image_eviction.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "images/image_eviction.h"
#include "images/image_observer.h"
#include "images/image_reference.h"
#include "images/layer_unpack.h"
#include "images/oci_manifest.h"
#include "images/registry_client.h"
#include "images/registry_credentials.h"

namespace stasis::images {

enum class PullPolicy { kAlways, kIfNotPresent, kNever };

struct PullRequest {
  ImageReference image;
  PullPolicy policy = PullPolicy::kIfNotPresent;
  std::vector<RegistryAuth> auths;  // from the actor's pull secrets, in their order
  // For a restore: the manifest digest the snapshot was taken on. The image is pulled by this
  // digest from image's repository, whatever its tag names now.
  std::string pinned_digest;
  std::chrono::milliseconds deadline{std::chrono::minutes(10)};
};

struct LocalImage {
  std::string digest;  // manifest digest
  std::string rootfs;  // absolute: <root>/images/unpacked/<hex>/rootfs
  ImageConfig config;
  int64_t bytes = 0;   // on disk
  bool cache_hit = false;  // nothing was fetched
  // Keeps the image from eviction while any copy of this value lives: a start holds it from
  // the lookup until its sandbox runs (and the actor's status names the digest).
  std::shared_ptr<void> hold;
};

struct ImageStoreOptions {
  std::string root;  // the agent's --root; the cache is <root>/images
  Platform platform = HostPlatform();
  UnpackOptions unpack;
  int64_t budget_bytes = 0;  // --image-cache-bytes; 0 = unbounded
  // An image started or restored from this recently is kept as if in use: the actor's status
  // names its digest only after the sandbox runs, and the caller's in-use set comes from the
  // informer's copy, which may lag behind that write.
  std::chrono::seconds recent_use_grace{600};
};

class ImageStore {
 public:
  ImageStore(ImageStoreOptions options, RegistryClient& registry, ImageObserver* observer = nullptr);

  // Removes tmp/ and blobs/partial/ leftovers and reports the cache's size. Call once before use.
  [[nodiscard]] Status Open();

  // The image for `request`, pulled and unpacked when the policy says so. Errors keep the
  // registry client's reasons (registry_client.h), plus kFailedPrecondition
  // "image_not_present" for policy Never without a cached copy, kInvalidArgument "bad_layer" /
  // "bad_manifest" / "platform_not_found" for an image this node cannot run.
  [[nodiscard]] Result<LocalImage> Ensure(const PullRequest& request);

  // Whether Ensure(request) would reach the registry now (a pull, or a tag resolved under
  // policy Always): for a "pulling" status before it. Reads only the cache.
  bool WouldPull(const PullRequest& request) const;

  // A cached image by manifest digest, without the network; touches its last use.
  [[nodiscard]] Result<LocalImage> Find(const std::string& digest);

  // Removes least recently used images not in `in_use` until the cache fits the budget.
  // Returns the digests removed.
  std::vector<std::string> Collect(const std::set<std::string>& in_use);

  std::string CacheDir() const;
  // The bytes of every unpacked image (their records' sizes).
  int64_t CachedBytes() const;

 private:
  struct Holds;
  // image_pull.cc: the registry's side — resolve the reference to one manifest, fetch and
  // unpack its layers into tmp/, publish by rename.
  Result<LocalImage> Pull(const PullRequest& request);
  struct Resolved;
  Result<Resolved> Resolve(const PullRequest& request);
  Result<int64_t> FetchAndApplyLayers(const PullRequest& request, const Resolved& resolved,
                                      const std::string& rootfs);
  Status Publish(const Resolved& resolved, const std::string& tmp_dir, int64_t bytes);

  std::shared_ptr<std::mutex> LockFor(const std::string& key);
  std::shared_ptr<void> Hold(const std::string& digest);
  std::set<std::string> Held() const;
  std::vector<CachedImage> ListCached() const;
  std::string TagFile(const ImageReference& image) const;
  std::string UnpackedDir(const std::string& digest) const;  // unpacked/<hex>
  std::string PartialBlob(const std::string& digest) const;  // blobs/partial/<hex>
  // The digest the request names (pinned, or by digest), or — unless the policy is Always —
  // the one its tag named at this node's last pull of it; "" when only the registry can say.
  std::string LocalDigest(const PullRequest& request) const;
  std::string KnownDigest(const ImageReference& image) const;

  ImageStoreOptions options_;
  RegistryClient& registry_;
  ImageObserver* observer_;
  std::shared_ptr<Holds> holds_;
  std::mutex mu_;
  // One pull per image (by digest, or by reference until it is resolved), one fetch per blob.
  std::map<std::string, std::shared_ptr<std::mutex>> per_key_;
};

}  // namespace stasis::images
