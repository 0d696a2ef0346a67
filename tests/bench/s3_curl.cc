#include "tests/bench/s3_curl.h"

#include <chrono>

#include "base/subprocess.h"

namespace stasis::bench {

Status CurlSigV4(const S3Endpoint& e, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"curl", "-sS", "-f", "--max-time", "600", "--aws-sigv4",
                                   "aws:amz:" + e.region + ":s3", "--user",
                                   e.credentials.access_key_id + ":" + e.credentials.secret_access_key};
  argv.insert(argv.end(), args.begin(), args.end());
  // The peer is the system's curl on the system's libcurl. A library path set for stasis's own
  // binaries (the GPU archive's, built on an older Debian) would load that older libcurl into it,
  // and it would not start (undefined symbol curl_global_trace on the GPU machine).
  CommandOptions options;
  options.extra_env = {"LD_LIBRARY_PATH="};
  auto r = RunCommand(argv, std::chrono::seconds(660), options);
  if (!r.ok()) return r.status();
  if (!r->success()) return Status(Code::kInternal, "curl: " + r->Summary());
  return OkStatus();
}

}  // namespace stasis::bench
