#include "tests/bench/pause_overhead_peer.h"

#include <algorithm>
#include <cstdlib>

#include "base/subprocess.h"
#include "tests/bench/pause_overhead_common.h"

namespace stasis::pause_bench {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

Result<PeerObjectStore> PeerObjectStore::FromEnvironment(std::string prefix) {
  auto endpoint = S3EndpointFromSettings(EnvironmentSettings());
  if (!endpoint.ok()) return endpoint.status();
  const char* bucket = std::getenv("STASIS_S3_BUCKET");
  if (bucket == nullptr || *bucket == '\0') {
    return Status(Code::kInvalidArgument, "STASIS_S3_BUCKET is not set (hack/object-store.sh up prints it)");
  }
  return PeerObjectStore(*endpoint, endpoint->url + "/" + bucket + "/" + prefix);
}

Status PeerObjectStore::Curl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"curl", "-sS", "-f", "--max-time", "600", "--aws-sigv4",
                                   "aws:amz:" + endpoint_.region + ":s3", "--user",
                                   endpoint_.credentials.access_key_id + ":" + endpoint_.credentials.secret_access_key};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunCommand(argv, 660s);
  if (!r.ok()) return r.status();
  if (!r->success()) return Status(Code::kInternal, "curl: " + r->Summary());
  return OkStatus();
}

Result<double> PeerObjectStore::Upload(const fs::path& image, const std::string& key,
                                       std::vector<std::string>& files_out) const {
  files_out.clear();
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(image, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) files_out.push_back(fs::relative(it->path(), image).string());
  }
  if (ec) return Status(Code::kInternal, "listing " + image.string() + ": " + ec.message());
  std::sort(files_out.begin(), files_out.end());
  const auto start = SteadyClock::now();
  for (const auto& f : files_out) {
    if (Status s = Curl({"-T", (image / f).string(), base_ + key + "/" + f}); !s.ok()) return s;
  }
  return Ms(SteadyClock::now() - start);
}

Result<double> PeerObjectStore::Download(const std::string& key, const std::vector<std::string>& files,
                                         const fs::path& image) const {
  const auto start = SteadyClock::now();
  for (const auto& f : files) {
    if (Status s = Curl({"--create-dirs", "-o", (image / f).string(), base_ + key + "/" + f}); !s.ok()) return s;
  }
  return Ms(SteadyClock::now() - start);
}

}  // namespace stasis::pause_bench
