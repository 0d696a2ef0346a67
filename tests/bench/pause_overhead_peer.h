// The suspend benchmark's baseline against an object store: the image a direct checkpoint made,
// uploaded and downloaded again by curl's own SigV4 client (the peer the object-store benchmark
// measures stasis against), one object per file, as a user without stasis would move it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"
#include "snapshots/s3_location.h"

namespace stasis::pause_bench {

class PeerObjectStore {
 public:
  // The store of the standard AWS_* variables and STASIS_S3_BUCKET (hack/object-store.sh up),
  // objects under `prefix`.
  static Result<PeerObjectStore> FromEnvironment(std::string prefix);

  // Puts `files` (paths under `image`; their relative paths are the keys under `key`); the
  // milliseconds.
  Result<double> Upload(const std::filesystem::path& image, const std::vector<std::string>& files,
                        const std::string& key) const;
  // Gets those files back into `image` (created); the milliseconds.
  Result<double> Download(const std::string& key, const std::filesystem::path& image,
                          const std::vector<std::string>& files) const;

 private:
  PeerObjectStore(S3Endpoint endpoint, std::string base) : endpoint_(std::move(endpoint)), base_(std::move(base)) {}
  std::string Url(const std::string& key, const std::filesystem::path& image, const std::string& file) const;

  S3Endpoint endpoint_;
  std::string base_;  // <endpoint>/<bucket>/<prefix>
};

}  // namespace stasis::pause_bench
