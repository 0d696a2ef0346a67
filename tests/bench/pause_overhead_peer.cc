#include "tests/bench/pause_overhead_peer.h"

#include <cstdlib>

#include "tests/bench/pause_overhead_common.h"
#include "tests/bench/s3_curl.h"

namespace stasis::pause_bench {

namespace fs = std::filesystem;

Result<PeerObjectStore> PeerObjectStore::FromEnvironment(std::string prefix) {
  auto endpoint = S3EndpointFromSettings(EnvironmentSettings());
  if (!endpoint.ok()) return endpoint.status();
  const char* bucket = std::getenv("STASIS_S3_BUCKET");
  if (bucket == nullptr || *bucket == '\0') {
    return Status(Code::kInvalidArgument, "STASIS_S3_BUCKET is not set (hack/object-store.sh up prints it)");
  }
  return PeerObjectStore(*endpoint, endpoint->url + "/" + bucket + "/" + prefix);
}

std::string PeerObjectStore::Url(const std::string& key, const fs::path& image, const std::string& file) const {
  return base_ + key + "/" + fs::path(file).lexically_relative(image).string();
}

Result<double> PeerObjectStore::Upload(const fs::path& image, const std::vector<std::string>& files,
                                       const std::string& key) const {
  const auto start = SteadyClock::now();
  for (const auto& f : files) {
    if (Status s = bench::CurlSigV4(endpoint_, {"-H", bench::kUnsignedPayloadHeader, "-T", f, Url(key, image, f)});
        !s.ok()) {
      return s;
    }
  }
  return Ms(SteadyClock::now() - start);
}

Result<double> PeerObjectStore::Download(const std::string& key, const fs::path& image,
                                         const std::vector<std::string>& files) const {
  const auto start = SteadyClock::now();
  for (const auto& f : files) {
    if (Status s = bench::CurlSigV4(endpoint_, {"--create-dirs", "-o", f, Url(key, image, f)}); !s.ok()) return s;
  }
  return Ms(SteadyClock::now() - start);
}

}  // namespace stasis::pause_bench
