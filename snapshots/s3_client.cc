#include "snapshots/s3_client.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using Clock = std::chrono::steady_clock;

constexpr long kPartialContent = 206;

std::function<double()> DefaultRandom() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  auto mu = std::make_shared<std::mutex>();
  return [engine, mu] {
    std::lock_guard<std::mutex> lock(*mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(*engine);
  };
}

std::string RangeHeader(const ByteRange& r) {
  return "Range: bytes=" + std::to_string(r.offset) + "-" + std::to_string(r.offset + r.length - 1);
}

Status InvalidRange(const std::string& target) {
  return Status(Code::kInvalidArgument, "get " + target + ": empty byte range",
                snapshot_reason::kStoreRequestRejected);
}

// A range asked for must come back as 206: a server that ignores Range answers 200 with the
// whole object, which written at the range's offset would corrupt the file.
Status CheckRangeHonoured(const std::optional<ByteRange>& range, const S3HttpResponse& r,
                          const std::string& target) {
  if (!range || r.outcome.http_status == kPartialContent) return OkStatus();
  return Status(Code::kFailedPrecondition,
                "get " + target + ": the store ignored the byte range (HTTP " +
                    std::to_string(r.outcome.http_status) + ")",
                snapshot_reason::kStoreRequestRejected);
}

}  // namespace

S3Client::S3Client(S3Endpoint endpoint, std::string bucket, S3ClientOptions options)
    : endpoint_url_(endpoint.url),
      bucket_(std::move(bucket)),
      options_(std::move(options)),
      http_(std::move(endpoint), options_.deadlines) {
  if (!options_.random01) options_.random01 = DefaultRandom();
}

std::string S3Client::Url(const std::string& key, const S3Query& query) const {
  return S3Url(endpoint_url_, bucket_, key, query);
}

std::string S3Client::Target(const std::string& key) const {
  return std::string(kS3Scheme) + bucket_ + "/" + key;
}

Result<S3HttpResponse> S3Client::Send(std::string_view op, const std::string& key,
                                      const S3HttpRequest& request) {
  const S3RetryPolicy& policy = options_.retry;
  const auto start = Clock::now();
  for (int attempt = 1;; ++attempt) {
    S3HttpResponse response = http_.Perform(request);
    if (response.local_failed) {
      return Status(Code::kInternal, std::string(op) + " " + Target(key) + ": " +
                                         response.outcome.transport_message,
                    snapshot_reason::kIoError);
    }
    S3Outcome& outcome = response.outcome;
    if (!outcome.transport_error && outcome.http_status >= 200 && outcome.http_status < 300) {
      CountBytes(op, request, response);
      return response;
    }
    if (auto error = ParseS3Error(response.body)) {
      outcome.s3_code = error->code;
      outcome.s3_message = error->message;
    }
    Status failure = S3FailureStatus(outcome, op, Target(key));
    auto wait = S3BackoffDelay(policy, attempt, options_.random01());
    bool out_of_time = Clock::now() + wait - start >= policy.max_elapsed;
    if (!IsRetryable(outcome) || attempt >= policy.max_attempts || out_of_time) {
      // A missing object is often the answer a caller asked for (does the manifest exist?).
      auto level = failure.code() == Code::kNotFound ? spdlog::level::debug : spdlog::level::warn;
      spdlog::log(level,
                  "component=s3 op={} target={} attempts={} result=error reason={} error=\"{}\"",
                  op, Target(key), attempt, failure.reason(), failure.message());
      return failure;
    }
    spdlog::info("component=s3 op={} target={} attempt={} result=retry reason={} wait_ms={}", op,
                 Target(key), attempt, failure.reason(), wait.count());
    if (options_.observer) options_.observer->Retry(op);
    std::this_thread::sleep_for(wait);
  }
}

void S3Client::CountBytes(std::string_view op, const S3HttpRequest& request, const S3HttpResponse& response) const {
  if (!options_.observer) return;
  if (op == "put" || op == "upload-part") {
    options_.observer->ObjectBytes(TransferDirection::kUpload,
                                   request.body_fd >= 0 ? request.body_length : request.body.size());
  } else if (op == "get") {
    options_.observer->ObjectBytes(TransferDirection::kDownload,
                                   request.sink_fd >= 0 ? response.sink_bytes : response.body.size());
  }
}

Status S3Client::PutObject(const std::string& key, std::string_view data) {
  S3HttpRequest request = MakeS3Request("PUT", Url(key), data);
  return Send("put", key, request).status();
}

Status S3Client::PutObjectFromFile(const std::string& key, int fd, uint64_t offset,
                                   uint64_t length) {
  S3HttpRequest request = MakeS3Request("PUT", Url(key));
  request.body_fd = fd;
  request.body_offset = offset;
  request.body_length = length;
  return Send("put", key, request).status();
}

Result<std::string> S3Client::GetObject(const std::string& key, std::optional<ByteRange> range) {
  S3HttpRequest request = MakeS3Request("GET", Url(key));
  if (range) {
    if (range->length == 0) return InvalidRange(Target(key));
    request.headers.push_back(RangeHeader(*range));
  }
  auto response = Send("get", key, request);
  if (!response.ok()) return response.status();
  if (Status s = CheckRangeHonoured(range, *response, Target(key)); !s.ok()) return s;
  return std::move(response->body);
}

Result<uint64_t> S3Client::GetObjectToFile(const std::string& key, int fd, uint64_t fd_offset,
                                           std::optional<ByteRange> range) {
  S3HttpRequest request = MakeS3Request("GET", Url(key));
  request.sink_fd = fd;
  request.sink_offset = fd_offset;
  if (range) {
    if (range->length == 0) return InvalidRange(Target(key));
    request.headers.push_back(RangeHeader(*range));
    // Checked before a byte is written: a 200 for a range would otherwise land in the file.
    request.sink_status = kPartialContent;
  }
  auto response = Send("get", key, request);
  if (!response.ok()) return response.status();
  if (Status s = CheckRangeHonoured(range, *response, Target(key)); !s.ok()) return s;
  return response->sink_bytes;
}

Result<S3ObjectInfo> S3Client::HeadObject(const std::string& key) {
  S3HttpRequest request = MakeS3Request("HEAD", Url(key));
  auto response = Send("head", key, request);
  if (!response.ok()) return response.status();
  return S3ObjectInfo{response->content_length, response->etag};
}

Status S3Client::DeleteObject(const std::string& key) {
  S3HttpRequest request = MakeS3Request("DELETE", Url(key));
  return Send("delete", key, request).status();
}

Result<ListObjectsPage> S3Client::ListObjectsV2(const std::string& prefix,
                                                const std::string& continuation_token,
                                                int max_keys) {
  S3Query query = {{"list-type", "2"}, {"max-keys", std::to_string(max_keys)}};
  if (!prefix.empty()) query["prefix"] = prefix;
  if (!continuation_token.empty()) query["continuation-token"] = continuation_token;
  S3HttpRequest request = MakeS3Request("GET", Url("", query));
  auto response = Send("list", prefix, request);
  if (!response.ok()) return response.status();
  return ParseListObjectsV2(response->body);
}

Result<std::vector<S3Object>> S3Client::ListAllObjects(const std::string& prefix) {
  std::vector<S3Object> all;
  std::string token;
  do {
    auto page = ListObjectsV2(prefix, token);
    if (!page.ok()) return page.status();
    all.insert(all.end(), std::make_move_iterator(page->objects.begin()),
               std::make_move_iterator(page->objects.end()));
    token = page->truncated ? page->next_continuation_token : "";
  } while (!token.empty());
  return all;
}

}  // namespace stasis
