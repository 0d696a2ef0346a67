// S3Client's multipart uploads: begun, parts sent (from memory or a file range), completed or
// aborted, and the uploads left open listed (so none is left behind to cost storage).
#include <utility>

#include "snapshots/s3_client.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

constexpr char kUploads[] = "uploads";
constexpr char kUploadId[] = "uploadId";
constexpr char kPartNumber[] = "partNumber";

Status NoEtag(const std::string& op) {
  return Status(Code::kInternal, op + ": the store answered without an ETag",
                snapshot_reason::kStoreRequestRejected);
}

}  // namespace

Result<std::string> S3Client::CreateMultipartUpload(const std::string& key) {
  S3HttpRequest request = MakeS3Request("POST", Url(key, {{kUploads, ""}}));
  auto response = Send("create-multipart", key, request);
  if (!response.ok()) return response.status();
  return ParseUploadId(response->body);
}

Result<std::string> S3Client::UploadPart(const std::string& key, const std::string& upload_id,
                                         int part_number, std::string_view data) {
  S3Query query = {{kPartNumber, std::to_string(part_number)}, {kUploadId, upload_id}};
  S3HttpRequest request = MakeS3Request("PUT", Url(key, query), data);
  auto response = Send("upload-part", key, request);
  if (!response.ok()) return response.status();
  if (response->etag.empty()) return NoEtag("upload-part " + Target(key));
  return std::move(response->etag);
}

Result<std::string> S3Client::UploadPartFromFile(const std::string& key,
                                                 const std::string& upload_id, int part_number,
                                                 int fd, uint64_t offset, uint64_t length) {
  S3Query query = {{kPartNumber, std::to_string(part_number)}, {kUploadId, upload_id}};
  S3HttpRequest request = MakeS3Request("PUT", Url(key, query));
  request.body_fd = fd;
  request.body_offset = offset;
  request.body_length = length;
  auto response = Send("upload-part", key, request);
  if (!response.ok()) return response.status();
  if (response->etag.empty()) return NoEtag("upload-part " + Target(key));
  return std::move(response->etag);
}

Status S3Client::CompleteMultipartUpload(const std::string& key, const std::string& upload_id,
                                         const std::vector<CompletedPart>& parts) {
  const std::string body = CompleteMultipartUploadXml(parts);
  S3HttpRequest request = MakeS3Request("POST", Url(key, {{kUploadId, upload_id}}), body);
  request.headers.push_back("Content-Type: application/xml");
  auto response = Send("complete-multipart", key, request);
  if (!response.ok()) return response.status();
  // S3 may answer 200 and still fail: the error is then in the body (a long assembly that
  // went wrong after the status line was sent).
  if (auto error = ParseS3Error(response->body)) {
    S3Outcome outcome = response->outcome;
    outcome.s3_code = error->code;
    outcome.s3_message = error->message;
    return S3FailureStatus(outcome, "complete-multipart", Target(key));
  }
  return OkStatus();
}

Status S3Client::AbortMultipartUpload(const std::string& key, const std::string& upload_id) {
  S3HttpRequest request = MakeS3Request("DELETE", Url(key, {{kUploadId, upload_id}}));
  return Send("abort-multipart", key, request).status();
}

Result<ListUploadsPage> S3Client::ListMultipartUploads(const std::string& prefix,
                                                       const std::string& key_marker,
                                                       const std::string& upload_id_marker) {
  S3Query query = {{kUploads, ""}};
  if (!prefix.empty()) query["prefix"] = prefix;
  if (!key_marker.empty()) query["key-marker"] = key_marker;
  if (!upload_id_marker.empty()) query["upload-id-marker"] = upload_id_marker;
  S3HttpRequest request = MakeS3Request("GET", Url("", query));
  auto response = Send("list-multipart", prefix, request);
  if (!response.ok()) return response.status();
  return ParseListMultipartUploads(response->body);
}

}  // namespace stasis
