#include "tests/bench/s3_curl.h"

#include <chrono>

#include "base/subprocess.h"

namespace stasis::bench {

Status CurlSigV4(const S3Endpoint& e, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"curl", "-sS", "-f", "--max-time", "600", "--aws-sigv4",
                                   "aws:amz:" + e.region + ":s3", "--user",
                                   e.credentials.access_key_id + ":" + e.credentials.secret_access_key};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunCommand(argv, std::chrono::seconds(660));
  if (!r.ok()) return r.status();
  if (!r->success()) return Status(Code::kInternal, "curl: " + r->Summary());
  return OkStatus();
}

}  // namespace stasis::bench
