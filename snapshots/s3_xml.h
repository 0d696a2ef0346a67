// The XML of S3 responses and of the one request body S3 needs (CompleteMultipartUpload),
// read and written without any I/O: pure functions, unit-tested on recorded bodies.
//
// Parsing uses libexpat (its entity-expansion limits guard against billion-laughs bodies);
// element names are matched without their namespace, as S3-compatible servers differ in
// whether they send xmlns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"

namespace stasis {

// <Error><Code>NoSuchKey</Code><Message>…</Message></Error>
struct S3ErrorBody {
  std::string code;
  std::string message;
};
// nullopt when `body` is not an S3 <Error> document (empty, HTML from a proxy, another root).
std::optional<S3ErrorBody> ParseS3Error(std::string_view body);

struct S3Object {
  std::string key;
  uint64_t size = 0;
  std::string etag;
  // The store's clock when the object was written (whole seconds); Time{} when the listing
  // gave none or one that does not parse, which garbage collection reads as "just written".
  Time last_modified{};
};
struct ListObjectsPage {
  std::vector<S3Object> objects;
  bool truncated = false;
  std::string next_continuation_token;  // set when truncated
};
// A ListObjectsV2 (ListBucketResult) body. kInternal (store_request_rejected) when unreadable.
Result<ListObjectsPage> ParseListObjectsV2(std::string_view body);

// An InitiateMultipartUploadResult's UploadId.
Result<std::string> ParseUploadId(std::string_view body);

struct MultipartUpload {
  std::string key;
  std::string upload_id;
  Time initiated{};  // as S3Object::last_modified
};
struct ListUploadsPage {
  std::vector<MultipartUpload> uploads;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};
// A ListMultipartUploadsResult body.
Result<ListUploadsPage> ParseListMultipartUploads(std::string_view body);

struct CompletedPart {
  int number = 0;    // 1…10000
  std::string etag;  // as UploadPart returned it, quotes included
};
// The CompleteMultipartUpload request body, parts in the order given (ascending numbers).
std::string CompleteMultipartUploadXml(const std::vector<CompletedPart>& parts);

// Characters escaped for XML text (&, <, >, ", ').
std::string XmlEscape(std::string_view text);

}  // namespace stasis
