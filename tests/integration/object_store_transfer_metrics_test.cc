// What an object store's transfers tell their observer (the node agent's metrics), against a
// real SeaweedFS: every byte of a snapshot's chunks and manifest uploaded and downloaded, one
// whole-transfer observation per commit and per download, and the retries of a request to a
// store that is down.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "snapshots/object_store_backend.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/object_store.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ObjectStore;
using testing::TempDir;

class Recorder final : public TransferObserver {
 public:
  void ObjectBytes(TransferDirection d, uint64_t bytes) override {
    std::lock_guard lock(mu_);
    bytes_[static_cast<int>(d)] += bytes;
  }
  void SnapshotTransfer(TransferDirection d, uint64_t bytes, double seconds, bool ok) override {
    std::lock_guard lock(mu_);
    transfers_.push_back({d, bytes, seconds, ok});
  }
  void Retry(std::string_view op) override {
    std::lock_guard lock(mu_);
    retries_[std::string(op)]++;
  }
  void Compressed(uint64_t plain, uint64_t stored) override {
    std::lock_guard lock(mu_);
    compressed_.push_back({plain, stored});
  }
  struct Transfer {
    TransferDirection d;
    uint64_t bytes;
    double seconds;
    bool ok;
  };
  uint64_t bytes_[2] = {0, 0};
  std::vector<Transfer> transfers_;
  std::map<std::string, int> retries_;
  std::vector<std::pair<uint64_t, uint64_t>> compressed_;  // plain, stored
  std::mutex mu_;
};

// Snapshot default/counter/s1 of owner uid-1, a 9 MiB pages.img of one byte (2 chunks),
// completed and committed on `node`.
void CommitCounter(SnapshotStore& node) {
  auto dir = node.BeginLocal("default", "counter", "s1");
  ASSERT_TRUE(dir.ok());
  std::ofstream(fs::path(*dir) / "pages.img", std::ios::binary) << std::string(9 << 20, 'p');
  SnapshotManifest m;
  m.id = "s1";
  m.ns = "default";
  m.name = "counter";
  m.owner_uid = "uid-1";
  m.scope = "Full";
  m.trigger = "Suspend";
  ASSERT_TRUE(node.CompleteLocal(m).ok());
  ASSERT_TRUE(node.Commit("default", "counter", "s1", true).ok());
}

TEST(ObjectStoreTransferMetricsTest, BytesTransfersAndRetriesReachTheObserver) {
  std::string error;
  auto store = ObjectStore::Start(&error);
  ASSERT_NE(store, nullptr) << error;
  Recorder rec;
  S3ClientOptions o;
  o.observer = &rec;
  o.retry.max_attempts = 3;
  o.retry.initial = 20ms;
  TempDir a("stasis-metrics-a-"), b("stasis-metrics-b-");
  auto backend = [&](const TempDir& root) {
    return std::make_unique<ObjectStoreBackend>(std::make_unique<S3Client>(store->endpoint(), store->bucket(), o),
                                                S3Location{store->bucket(), "m/"}, (root.path() / "cache").string(), 2);
  };
  SnapshotStore n1((a.path() / "snapshots").string(), backend(a));
  SnapshotStore n2((b.path() / "snapshots").string(), backend(b));

  ASSERT_NO_FATAL_FAILURE(CommitCounter(n1));
  const uint64_t image = 9 << 20;
  ASSERT_EQ(rec.transfers_.size(), 1u);
  EXPECT_EQ(rec.transfers_[0].d, TransferDirection::kUpload);
  EXPECT_EQ(rec.transfers_[0].bytes, image);
  EXPECT_TRUE(rec.transfers_[0].ok);
  // The chunks and the manifest (a few KiB).
  EXPECT_GT(rec.bytes_[0], image);
  EXPECT_LT(rec.bytes_[0], image + 64 * 1024);
  EXPECT_TRUE(rec.compressed_.empty()) << "an uncompressed upload has no ratio";

  const uint64_t got_before = rec.bytes_[1];
  auto source = n2.CheckForRestore("default", "counter", "s1", true, "uid-1");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ(rec.transfers_.size(), 2u);
  EXPECT_EQ(rec.transfers_[1].d, TransferDirection::kDownload);
  EXPECT_EQ(rec.transfers_[1].bytes, image);
  EXPECT_TRUE(rec.transfers_[1].ok);
  EXPECT_GT(rec.bytes_[1] - got_before, image);  // the chunks and the manifest
  EXPECT_TRUE(rec.retries_.empty());

  // A store that is down: the listing is sent max_attempts times, so retried twice.
  ASSERT_EQ(store->Stop(), "");
  S3Client client(store->endpoint(), store->bucket(), o);
  EXPECT_FALSE(client.ListObjectsV2("m/").ok());
  EXPECT_EQ(rec.retries_["list"], 2);
}

// A compressed upload reports its chunks' bytes before and after zstd: 9 MiB of one byte
// stores as a few hundred bytes.
TEST(ObjectStoreTransferMetricsTest, ACompressedUploadReportsItsPlainAndStoredBytes) {
  std::string error;
  auto store = ObjectStore::Start(&error);
  ASSERT_NE(store, nullptr) << error;
  Recorder rec;
  S3ClientOptions o;
  o.observer = &rec;
  TempDir a("stasis-metrics-zstd-");
  SnapshotStore n1((a.path() / "snapshots").string(),
                   std::make_unique<ObjectStoreBackend>(std::make_unique<S3Client>(store->endpoint(), store->bucket(), o),
                                                        S3Location{store->bucket(), "z/"}, (a.path() / "cache").string(),
                                                        2, ChunkCodec({Compression::kZstd, 3}, nullptr)));
  ASSERT_NO_FATAL_FAILURE(CommitCounter(n1));
  ASSERT_EQ(rec.compressed_.size(), 1u);
  EXPECT_EQ(rec.compressed_[0].first, 9u << 20);
  EXPECT_GT(rec.compressed_[0].second, 0u);
  EXPECT_LT(rec.compressed_[0].second, 64u * 1024);
  // What was counted is what the store holds: the chunk objects, less the manifest.
  EXPECT_GT(rec.bytes_[0], rec.compressed_[0].second);
}

}  // namespace
}  // namespace stasis
