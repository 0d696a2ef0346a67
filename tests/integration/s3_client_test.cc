// The S3 client against a real SeaweedFS on loopback (hack/object-store.sh): objects put and
// got whole, by range and through file descriptors; listings past 1000 keys; multipart
// uploads completed and aborted with none left open; and real faults — a wrong secret, a
// missing bucket, a stopped store and a frozen one — each an error with its reason within the
// client's deadlines, never a hang.
#include "snapshots/s3_client.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "snapshots/snapshot_reasons.h"
#include "tests/support/object_store.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::ObjectStore;

class S3ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { store_ = ObjectStore::Start(&start_error_).release(); }
  static void TearDownTestSuite() {
    delete store_;
    store_ = nullptr;
  }
  void SetUp() override {
    // A store that cannot start (no weed, no Go to build it) fails every test; never a skip.
    ASSERT_NE(store_, nullptr) << start_error_;
  }

  static S3ClientOptions FastOptions() {
    S3ClientOptions o;
    o.retry.max_attempts = 3;
    o.retry.initial = 50ms;
    o.retry.max_delay = 200ms;
    o.deadlines.connect = 1000ms;
    o.deadlines.total = 3000ms;
    return o;
  }
  static S3Client Client(S3ClientOptions options = FastOptions()) {
    return S3Client(store_->endpoint(), store_->bucket(), std::move(options));
  }
  // A file of `text`, opened read-write, unlinked when closed.
  static int TempFile(const std::string& text) {
    char path[] = "/tmp/stasis-s3-test-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    if (!text.empty()) {
      EXPECT_EQ(pwrite(fd, text.data(), text.size(), 0), ssize_t(text.size()));
    }
    return fd;
  }
  static std::string ReadAll(int fd, size_t size) {
    std::string s(size, '\0');
    EXPECT_EQ(pread(fd, s.data(), size, 0), ssize_t(size));
    return s;
  }

  static inline ObjectStore* store_ = nullptr;
  static inline std::string start_error_;
};

void ExpectFailure(const Status& s, Code code, const char* reason, const char* says) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_EQ(s.reason(), reason) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(says));
}

TEST_F(S3ClientTest, PutsGetsRangesHeadsAndDeletes) {
  S3Client s3 = Client();
  ASSERT_TRUE(s3.PutObject("obj/hello world.txt", "hello, object world").ok());
  auto whole = s3.GetObject("obj/hello world.txt");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, "hello, object world");
  auto range = s3.GetObject("obj/hello world.txt", ByteRange{7, 6});
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(*range, "object");
  auto head = s3.HeadObject("obj/hello world.txt");
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, 19u);
  EXPECT_FALSE(head->etag.empty());

  // Through file descriptors: a range of one file up, a range of the object into another at
  // an offset, the bytes around it untouched.
  int src = TempFile("xxxxPAYLOAD-FROM-FILEyyyy");
  ASSERT_TRUE(s3.PutObjectFromFile("obj/from-file", src, 4, 17).ok());
  // A file shorter than the length given is this side's fault: not retried, not the store's.
  ExpectFailure(s3.PutObjectFromFile("obj/short", src, 20, 10), Code::kInternal,
                snapshot_reason::kIoError, "the file ends before the length given");
  close(src);
  int dst = TempFile(std::string(30, '.'));
  auto written = s3.GetObjectToFile("obj/from-file", dst, 5, ByteRange{8, 4});
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, 4u);
  EXPECT_EQ(ReadAll(dst, 30), "....." "FROM" + std::string(21, '.'));
  written = s3.GetObjectToFile("obj/from-file", dst, 0);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(ReadAll(dst, 17), "PAYLOAD-FROM-FILE");
  close(dst);

  ASSERT_TRUE(s3.DeleteObject("obj/hello world.txt").ok());
  ExpectFailure(s3.GetObject("obj/hello world.txt").status(), Code::kNotFound,
                snapshot_reason::kStoreObjectMissing, "NoSuchKey");
  ExpectFailure(s3.HeadObject("obj/hello world.txt").status(), Code::kNotFound,
                snapshot_reason::kStoreObjectMissing, "HTTP 404");
  EXPECT_TRUE(s3.DeleteObject("obj/never-was").ok());
}

TEST_F(S3ClientTest, ListsPastAThousandKeysWithContinuationTokens) {
  constexpr int kKeys = 1005, kThreads = 4;
  S3Client s3 = Client();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kKeys; i += kThreads) {
        char key[32];
        std::snprintf(key, sizeof key, "many/k%05d", i);
        if (!s3.PutObject(key, "x").ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(s3.PutObject("other/k", "y").ok());

  auto first = s3.ListObjectsV2("many/");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->objects.size(), 1000u);
  EXPECT_TRUE(first->truncated);
  auto all = s3.ListAllObjects("many/");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), size_t(kKeys));
  EXPECT_EQ(all->front().key, "many/k00000");
  EXPECT_EQ(all->back().key, "many/k01004");
  EXPECT_EQ(all->back().size, 1u);
}

TEST_F(S3ClientTest, MultipartUploadsCompleteOrAbortAndNoneStayOpen) {
  S3Client s3 = Client();
  const std::string part1(5 << 20, 'a');
  const std::string part2 = std::string(1 << 20, 'b') + "tail";
  auto id = s3.CreateMultipartUpload("mp/done");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto e1 = s3.UploadPart("mp/done", *id, 1, part1);
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  int fd = TempFile("skip" + part2);
  auto e2 = s3.UploadPartFromFile("mp/done", *id, 2, fd, 4, part2.size());
  close(fd);
  ASSERT_TRUE(e2.ok()) << e2.status().ToString();
  Status done = s3.CompleteMultipartUpload("mp/done", *id, {{1, *e1}, {2, *e2}});
  ASSERT_TRUE(done.ok()) << done.ToString();
  auto head = s3.HeadObject("mp/done");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, part1.size() + part2.size());
  auto across = s3.GetObject("mp/done", ByteRange{part1.size() - 2, 4});
  ASSERT_TRUE(across.ok());
  EXPECT_EQ(*across, "aabb");

  auto dropped = s3.CreateMultipartUpload("mp/dropped");
  ASSERT_TRUE(dropped.ok());
  ASSERT_TRUE(s3.UploadPart("mp/dropped", *dropped, 1, "partial").ok());
  auto open = s3.ListMultipartUploads("mp/");
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  ASSERT_EQ(open->uploads.size(), 1u);
  EXPECT_EQ(open->uploads[0].key, "mp/dropped");
  EXPECT_EQ(open->uploads[0].upload_id, *dropped);
  ASSERT_TRUE(s3.AbortMultipartUpload("mp/dropped", *dropped).ok());
  open = s3.ListMultipartUploads("mp/");
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->uploads.empty());
  ExpectFailure(s3.HeadObject("mp/dropped").status(), Code::kNotFound,
                snapshot_reason::kStoreObjectMissing, "404");
}

TEST_F(S3ClientTest, WrongCredentialsAreAnAuthFailureNotRetried) {
  S3Endpoint wrong_secret = store_->endpoint();
  wrong_secret.credentials.secret_access_key = "not-the-secret";
  S3Client s3(wrong_secret, store_->bucket(), FastOptions());
  auto start = std::chrono::steady_clock::now();
  Status s = s3.PutObject("auth/x", "x");
  ExpectFailure(s, Code::kPermissionDenied, snapshot_reason::kStoreAuthFailed,
                "SignatureDoesNotMatch");
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("not-the-secret")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "an auth failure is not retried";

  S3Endpoint wrong_key = store_->endpoint();
  wrong_key.credentials.access_key_id = "nobody";
  S3Client s3b(wrong_key, store_->bucket(), FastOptions());
  ExpectFailure(s3b.GetObject("auth/x").status(), Code::kPermissionDenied,
                snapshot_reason::kStoreAuthFailed, "InvalidAccessKeyId");
}

TEST_F(S3ClientTest, AMissingBucketIsReportedAsSuch) {
  S3Client s3(store_->endpoint(), "no-such-bucket", FastOptions());
  ExpectFailure(s3.PutObject("k", "x"), Code::kFailedPrecondition,
                snapshot_reason::kStoreBucketMissing, "NoSuchBucket");
  ExpectFailure(s3.ListObjectsV2("").status(), Code::kFailedPrecondition,
                snapshot_reason::kStoreBucketMissing, "NoSuchBucket");
}

// The store's process frozen (SIGSTOP): connections are accepted by the kernel and never
// answered. The total deadline ends each attempt; the retries end the call.
TEST_F(S3ClientTest, AFrozenStoreTimesOutWithinTheDeadlines) {
  std::ifstream pidfile(store_->dir() + "/weed.pid");
  pid_t pid = 0;
  ASSERT_TRUE(pidfile >> pid);
  S3ClientOptions options = FastOptions();
  options.retry.max_attempts = 2;
  options.deadlines.total = 1500ms;
  S3Client s3 = Client(options);
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  auto start = std::chrono::steady_clock::now();
  Status s = s3.PutObject("frozen/x", "x");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  ExpectFailure(s, Code::kUnavailable, snapshot_reason::kStoreUnreachable, "no answer");
  EXPECT_GE(took, 3000ms);  // two attempts of 1.5 s each
  EXPECT_LT(took, 6s);
}

// The store stopped: every attempt is refused, the call ends after its retries with a
// retryable error; the store started again serves what it held, to the same client.
TEST_F(S3ClientTest, AStoppedStoreIsUnreachableThenServesAgain) {
  S3Client s3 = Client();
  ASSERT_TRUE(s3.PutObject("restart/kept", "still here").ok());
  ASSERT_EQ(store_->Stop(), "");
  auto start = std::chrono::steady_clock::now();
  Status s = s3.PutObject("restart/x", "x");
  auto took = std::chrono::steady_clock::now() - start;
  ExpectFailure(s, Code::kUnavailable, snapshot_reason::kStoreUnreachable, "no answer");
  EXPECT_LT(took, 5s);
  ASSERT_EQ(store_->Restart(), "");
  auto kept = s3.GetObject("restart/kept");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, "still here");
}

}  // namespace
}  // namespace stasis
