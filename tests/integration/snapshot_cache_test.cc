// The object store's download cache under --snapshot-cache-bytes, against a real SeaweedFS
// (hack/object-store.sh): three snapshots fetched under a bound that holds two leave the least
// recently used one gone from disk and the other two restorable without a download; the
// evicted one is downloaded again when asked for; a copy held by a restore is never evicted;
// the order of uses survives a restart (a new backend on the same cache); and a directory the
// cache cannot vouch for, a download in flight and the node's own snapshots are left alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

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

constexpr char kNs[] = "default";
constexpr int64_t kImage = 1 << 20;  // each snapshot's pages.img; with its manifest a little more

// Counts downloads and the cache's reports.
class Recorder final : public TransferObserver {
 public:
  void ObjectBytes(TransferDirection, uint64_t) override {}
  void SnapshotTransfer(TransferDirection d, uint64_t, double, bool ok) override {
    std::lock_guard lock(mu);
    if (d == TransferDirection::kDownload && ok) ++downloads;
  }
  void Retry(std::string_view) override {}
  void CacheBytes(uint64_t bytes) override {
    std::lock_guard lock(mu);
    cache_bytes = bytes;
  }
  void CacheEviction(uint64_t) override {
    std::lock_guard lock(mu);
    ++evictions;
  }
  int Downloads() {
    std::lock_guard lock(mu);
    return downloads;
  }
  std::mutex mu;
  int downloads = 0, evictions = 0;
  uint64_t cache_bytes = 0;
};

class SnapshotCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { store_ = ObjectStore::Start(&start_error_).release(); }
  static void TearDownTestSuite() {
    delete store_;
    store_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(store_, nullptr) << start_error_; }

  struct Node {
    ObjectStoreBackend* backend = nullptr;
    std::unique_ptr<SnapshotStore> snapshots;
    fs::path cache;
  };
  // A node on `root` (its cache <root>/store-cache) reading the store under `prefix`.
  Node NewNode(const TempDir& root, const std::string& prefix, int64_t bound, Recorder* rec = nullptr) {
    S3ClientOptions o;
    o.observer = rec;
    o.retry.max_attempts = 2;
    o.retry.initial = 50ms;
    Node n;
    n.cache = root.path() / "store-cache";
    auto backend = std::make_unique<ObjectStoreBackend>(std::make_unique<S3Client>(store_->endpoint(), store_->bucket(), o),
                                                        S3Location{store_->bucket(), prefix}, n.cache.string(), 2);
    backend->SetCacheBound(bound);
    n.backend = backend.get();
    n.snapshots = std::make_unique<SnapshotStore>((root.path() / "snapshots").string(), std::move(backend));
    return n;
  }

  // Snapshot s1 of actor `name`, complete on `node` (a pages.img of kImage bytes).
  static void Complete(Node& node, const std::string& name, int seed) {
    auto dir = node.snapshots->BeginLocal(kNs, name, "s1");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    std::ofstream(fs::path(*dir) / "pages.img", std::ios::binary) << std::string(kImage, static_cast<char>('a' + seed));
    SnapshotManifest m;
    m.id = "s1";
    m.ns = kNs;
    m.name = name;
    m.owner_uid = "uid-" + name;
    m.scope = "Full";
    m.trigger = "Suspend";
    auto done = node.snapshots->CompleteLocal(m);
    ASSERT_TRUE(done.ok()) << done.status().ToString();
  }
  // Actors a, b and c, each with snapshot s1 committed to the store under `prefix`.
  void CommitThree(const std::string& prefix) {
    TempDir writer_root("stasis-cache-writer-");
    Node writer = NewNode(writer_root, prefix, 0);
    for (int i = 0; i < 3; ++i) {
      const std::string name(1, static_cast<char>('a' + i));
      Complete(writer, name, i);
      auto committed = writer.snapshots->Commit(kNs, name, "s1", true);
      ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    }
  }
  static Result<SnapshotStore::RestoreSource> Restore(Node& n, const std::string& name) {
    return n.snapshots->CheckForRestore(kNs, name, "s1", /*committed=*/true, "uid-" + name);
  }
  static bool Cached(const Node& n, const std::string& name) { return fs::exists(n.cache / kNs / name / "s1"); }

  static inline ObjectStore* store_ = nullptr;
  static inline std::string start_error_;
};

TEST_F(SnapshotCacheTest, TheLeastRecentlyUsedCopyGoesAndIsDownloadedAgainWhenAskedFor) {
  CommitThree("lru/");
  TempDir root("stasis-cache-node-");
  Recorder rec;
  Node n = NewNode(root, "lru/", 2 * kImage + kImage / 2, &rec);  // room for two copies, not three
  ASSERT_TRUE(Restore(n, "a").ok());
  ASSERT_TRUE(Restore(n, "b").ok());
  ASSERT_TRUE(Restore(n, "a").ok());  // a cache hit: a is now the more recent of the two
  EXPECT_EQ(rec.Downloads(), 2);
  ASSERT_TRUE(Restore(n, "c").ok());
  EXPECT_FALSE(Cached(n, "b")) << "b was used least recently";
  EXPECT_TRUE(Cached(n, "a"));
  EXPECT_TRUE(Cached(n, "c"));
  EXPECT_EQ(rec.evictions, 1);
  EXPECT_GT(rec.cache_bytes, 2u * kImage);
  EXPECT_LE(rec.cache_bytes, 2u * kImage + kImage / 2);
  // The two kept restore from the cache, every chunk of theirs verified, without a download.
  for (const char* name : {"a", "c"}) {
    auto r = Restore(n, name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(fs::file_size(fs::path(r->dir) / "pages.img"), static_cast<uintmax_t>(kImage));
  }
  EXPECT_EQ(rec.Downloads(), 3);
  // b again: downloaded, and now a (used before c) is the one to go.
  auto b = Restore(n, "b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(rec.Downloads(), 4);
  EXPECT_TRUE(Cached(n, "b"));
  EXPECT_FALSE(Cached(n, "a"));
  EXPECT_TRUE(Cached(n, "c"));
  EXPECT_TRUE(n.snapshots->VerifyCommitted(kNs, "c", "s1").ok());
}

TEST_F(SnapshotCacheTest, ACopyARestoreHoldsIsNeverEvicted) {
  CommitThree("held/");
  TempDir root("stasis-cache-node-");
  Node n = NewNode(root, "held/", 2 * kImage + kImage / 2);
  {
    auto a = Restore(n, "a");  // held: the restore has not handed it to runsc yet
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(Restore(n, "b").ok());
    ASSERT_TRUE(Restore(n, "c").ok());
    EXPECT_TRUE(Cached(n, "a")) << "the least recently used, but held";
    EXPECT_FALSE(Cached(n, "b"));
    EXPECT_EQ(std::ifstream(fs::path(a->dir) / "pages.img").get(), 'a');
  }  // the restore is done: the hold ends
  ASSERT_TRUE(Restore(n, "b").ok());
  EXPECT_FALSE(Cached(n, "a"));
  EXPECT_TRUE(Cached(n, "c"));
}

TEST_F(SnapshotCacheTest, TheOrderOfUsesSurvivesARestart) {
  CommitThree("restart/");
  TempDir root("stasis-cache-node-");
  {
    Node n = NewNode(root, "restart/", 0);  // unbounded
    for (const char* name : {"c", "a", "b", "a"}) ASSERT_TRUE(Restore(n, name).ok()) << name;
  }
  // The agent comes back with room for one copy: start-up keeps the most recently used (a).
  Recorder rec;
  Node n = NewNode(root, "restart/", kImage + kImage / 2, &rec);
  ASSERT_TRUE(n.snapshots->RemovePartials().ok());
  EXPECT_TRUE(Cached(n, "a"));
  EXPECT_FALSE(Cached(n, "b"));
  EXPECT_FALSE(Cached(n, "c"));
  EXPECT_EQ(rec.evictions, 2);
  ASSERT_TRUE(Restore(n, "a").ok());
  EXPECT_EQ(rec.Downloads(), 0);
}

TEST_F(SnapshotCacheTest, WhatTheCacheCannotVouchForAndTheNodesOwnSnapshotsAreLeftAlone) {
  CommitThree("unknown/");
  TempDir root("stasis-cache-node-");
  Node n = NewNode(root, "unknown/", 1);  // nothing fits
  // A copy without a manifest (a crash mid-rename, another tool's), a download in flight, and
  // this node's own uncommitted snapshot.
  const fs::path stray = n.cache / kNs / "x" / "s1", partial = n.cache / kNs / "y" / "s1.partial";
  for (const auto& d : {stray, partial}) {
    fs::create_directories(d);
    std::ofstream(d / "pages.img") << "bytes";
  }
  Complete(n, "local", 7);
  ASSERT_TRUE(Restore(n, "a").ok());  // held while fetched: kept
  EXPECT_TRUE(Cached(n, "a"));
  ASSERT_TRUE(Restore(n, "b").ok());
  EXPECT_FALSE(Cached(n, "a")) << "no longer held: over the bound";
  EXPECT_TRUE(fs::exists(stray / "pages.img"));
  EXPECT_TRUE(fs::exists(partial / "pages.img"));
  EXPECT_TRUE(n.snapshots->VerifyLocal(kNs, "local", "s1").ok());
}

}  // namespace
}  // namespace stasis
