// S3 response bodies as servers send them (with and without xmlns), read into values; bodies
// that are not what they claim are errors, not empty results.
#include "snapshots/s3_xml.h"

#include <gtest/gtest.h>

#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

TEST(S3Xml, ReadsAnErrorBody) {
  auto e = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
      "<Message>The specified key does not exist.</Message><Key>a/b</Key>"
      "<RequestId>1</RequestId></Error>");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "NoSuchKey");
  EXPECT_EQ(e->message, "The specified key does not exist.");
  EXPECT_FALSE(ParseS3Error("").has_value());
  EXPECT_FALSE(ParseS3Error("<html><body>502 Bad Gateway</body></html>").has_value());
  EXPECT_FALSE(ParseS3Error("<Error><Code>trunc").has_value());
}

TEST(S3Xml, ReadsAListObjectsV2Page) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
      "<Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>tok/+=</NextContinuationToken>"
      "<Contents><Key>p/a &amp; b</Key><LastModified>2026-12-05T04:44:51.000Z</LastModified>"
      "<Size>12</Size><ETag>&quot;e1&quot;</ETag></Contents>"
      "<Contents><Key>p/c</Key><Size>5368709120</Size><ETag>\"e2-3\"</ETag></Contents>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "p/a & b");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].etag, "\"e1\"");
  EXPECT_EQ(FormatTime(page->objects[0].last_modified), "2026-12-05T04:44:51Z");
  EXPECT_EQ(page->objects[1].size, 5368709120u);
  EXPECT_EQ(page->objects[1].last_modified, Time{});  // none given: "just written" to GC
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "tok/+=");

  auto last =
      ParseListObjectsV2("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->objects.empty());
  EXPECT_FALSE(last->truncated);
}

TEST(S3Xml, RefusesBodiesThatAreNotWhatTheyClaim) {
  for (const char* body :
       {"", "not xml", "<Error><Code>AccessDenied</Code></Error>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"}) {
    auto page = ParseListObjectsV2(body);
    ASSERT_FALSE(page.ok()) << body;
    EXPECT_EQ(page.status().reason(), snapshot_reason::kStoreRequestRejected);
  }
  EXPECT_FALSE(
      ParseUploadId("<InitiateMultipartUploadResult></InitiateMultipartUploadResult>").ok());
}

TEST(S3Xml, ReadsMultipartBodies) {
  auto id = ParseUploadId(
      "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Bucket>b</Bucket><Key>k</Key><UploadId>abc-123</UploadId></InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "abc-123");

  auto uploads = ParseListMultipartUploads(
      "<ListMultipartUploadsResult><Bucket>b</Bucket><IsTruncated>true</IsTruncated>"
      "<NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>"
      "<Upload><Key>k1</Key><UploadId>u1</UploadId><Initiated>2026-12-05T04:00:00Z</Initiated></Upload>"
      "<Upload><Key>k2</Key><UploadId>u2</UploadId></Upload></ListMultipartUploadsResult>");
  ASSERT_TRUE(uploads.ok());
  ASSERT_EQ(uploads->uploads.size(), 2u);
  EXPECT_EQ(uploads->uploads[1].key, "k2");
  EXPECT_EQ(uploads->uploads[1].upload_id, "u2");
  EXPECT_EQ(FormatTime(uploads->uploads[0].initiated), "2026-12-05T04:00:00Z");
  EXPECT_EQ(uploads->uploads[1].initiated, Time{});
  EXPECT_TRUE(uploads->truncated);
  EXPECT_EQ(uploads->next_key_marker, "k2");
  EXPECT_EQ(uploads->next_upload_id_marker, "u2");
}

TEST(S3Xml, WritesTheCompleteMultipartUploadBody) {
  EXPECT_EQ(CompleteMultipartUploadXml({{1, "\"a\""}, {2, "\"b<\""}}),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag>"
            "</Part><Part><PartNumber>2</PartNumber><ETag>&quot;b&lt;&quot;</ETag></Part>"
            "</CompleteMultipartUpload>");
}

}  // namespace
}  // namespace stasis
