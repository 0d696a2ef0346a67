// Retention and garbage collection against a real S3-compatible store (SeaweedFS,
// hack/object-store.sh): three actors' snapshots committed through SnapshotStore the way node
// agents commit them, an interrupted put (chunks without a manifest), a young interrupted put,
// an actor that is gone and one re-created under its name; then retention and one GC pass, and
// the store's exact object list before and after. Sealed (encrypted) snapshots are kept by a
// controller without their key and collected by one with it.
#include "snapshots/object_store_gc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <thread>

#include "reconcilers/cluster/snapshot_retention.h"
#include "snapshots/encryption_key.h"
#include "snapshots/object_store_backend.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/object_store.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using api::ActorState;
using testing::ObjectStore;
using testing::TempDir;

constexpr char kNs[] = "default";

class ObjectStoreGcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { store_ = ObjectStore::Start(&start_error_).release(); }
  static void TearDownTestSuite() {
    delete store_;
    store_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(store_, nullptr) << start_error_;
    // Each test its own prefix: one test's objects are never in another's listings.
    prefix_ = std::string("gc-") + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
    client_ = Client();
    auto backend = std::make_unique<ObjectStoreBackend>(Client(), Location(), (node_root_.path() / "cache").string(), 2);
    node_ = std::make_unique<SnapshotStore>((node_root_.path() / "snapshots").string(), std::move(backend));
    // The controller's view: no local root, no download cache (as `stasis controller` builds it).
    controller_ = std::make_unique<SnapshotStore>("", std::make_unique<ObjectStoreBackend>(Client(), Location(), "", 2));
  }

  S3Location Location() const { return S3Location{store_->bucket(), prefix_}; }
  static std::unique_ptr<S3Client> Client() {
    S3ClientOptions o;
    o.retry.max_attempts = 2;
    o.retry.initial = 50ms;
    return std::make_unique<S3Client>(store_->endpoint(), store_->bucket(), o);
  }

  // A committed snapshot of actor `name` (owner `uid`), taken at `taken_at`: two small files,
  // one chunk each.
  void Commit(const std::string& name, const std::string& id, const std::string& uid, const std::string& taken_at) {
    auto dir = node_->BeginLocal(kNs, name, id);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    std::ofstream(fs::path(*dir) / "pages.img") << "pages of " << name << "/" << id;
    std::ofstream(fs::path(*dir) / "checkpoint.img") << "state of " << id;
    SnapshotManifest m;
    m.id = id;
    m.ns = kNs;
    m.name = name;
    m.owner_uid = uid;
    m.scope = "Full";
    m.trigger = "Suspend";
    m.taken_at = taken_at;
    ASSERT_TRUE(node_->CompleteLocal(m).ok());
    auto committed = node_->Commit(kNs, name, id, true);
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  }

  // A put that stopped before its manifest: chunk objects only.
  void Interrupted(const std::string& name, const std::string& id) {
    const std::string p = prefix_ + kNs + "/" + name + "/" + id + "/";
    ASSERT_TRUE(client_->PutObject(ObjectStoreBackend::ChunkKey(p, 0, 0), "half").ok());
    ASSERT_TRUE(client_->PutObject(ObjectStoreBackend::ChunkKey(p, 1, 0), "a put").ok());
  }

  // Every key under the prefix, relative to it, and the newest LastModified among them.
  std::set<std::string> Listed(Time* newest = nullptr) {
    auto all = client_->ListAllObjects(prefix_);
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    std::set<std::string> keys;
    for (const auto& o : all.ok() ? *all : std::vector<S3Object>{}) {
      keys.insert(o.key.substr(prefix_.size()));
      if (newest && o.last_modified > *newest) *newest = o.last_modified;
    }
    return keys;
  }

  // The objects of a committed snapshot (checkpoint.img is file 0, pages.img file 1), or of
  // an interrupted put.
  static std::set<std::string> Snapshot(const std::string& name, const std::string& id, bool manifest = true) {
    const std::string p = std::string(kNs) + "/" + name + "/" + id + "/";
    std::set<std::string> keys = {p + "chunks/0/0", p + "chunks/1/0"};
    if (manifest) keys.insert(p + kManifestFile);
    return keys;
  }
  static std::set<std::string> Union(std::initializer_list<std::set<std::string>> parts) {
    std::set<std::string> out;
    for (const auto& p : parts) out.insert(p.begin(), p.end());
    return out;
  }

  static inline ObjectStore* store_ = nullptr;
  static inline std::string start_error_;
  std::string prefix_;
  TempDir node_root_{"stasis-gc-node-"};
  std::unique_ptr<S3Client> client_;
  std::unique_ptr<SnapshotStore> node_, controller_;
};

api::Actor ActorAt(const std::string& name, const std::string& uid, const std::string& latest) {
  api::Actor a;
  a.metadata.namespace_ = kNs;
  a.metadata.name = name;
  a.metadata.uid = uid;
  a.status.status = ActorState::kSuspended;
  a.status.latest_snapshot = api::Snapshot{};
  a.status.latest_snapshot->id = latest;
  return a;
}

TEST_F(ObjectStoreGcTest, RetentionAndGcLeaveExactlyWhatTheyPromise) {
  const std::string now_text = FormatTime(std::chrono::system_clock::now());
  // counter: four snapshots, the oldest its latestSnapshot, the two newest taken just now.
  Commit("counter", "c1", "uid-counter", "2026-01-01T00:00:01Z");
  Commit("counter", "c2", "uid-counter", "2026-01-01T00:00:02Z");
  Commit("counter", "c3", "uid-counter", now_text);
  Commit("counter", "c4", "uid-counter", now_text);
  // worker: re-created under its name; w1 is the earlier actor's, w2 the current one's.
  Commit("worker", "w1", "uid-worker-old", "2026-01-01T00:00:01Z");
  Commit("worker", "w2", "uid-worker", "2026-01-01T00:00:02Z");
  // gone: deleted while its node was lost; nothing removed its snapshot.
  Commit("gone", "g1", "uid-gone", "2026-01-01T00:00:01Z");
  Interrupted("counter", "half");
  ASSERT_TRUE(client_->PutObject(prefix_ + "README", "not a snapshot").ok());
  // The young orphan: an interrupted put (or one still running) written past the others by
  // more than a LastModified tick.
  Time old_newest{};
  (void)Listed(&old_newest);
  std::this_thread::sleep_for(2100ms);
  Interrupted("worker", "young");
  Time young{};
  (void)Listed(&young);
  ASSERT_GE(young - old_newest, 2s);

  const auto before = Listed();
  EXPECT_EQ(before, Union({Snapshot("counter", "c1"), Snapshot("counter", "c2"), Snapshot("counter", "c3"),
                           Snapshot("counter", "c4"), Snapshot("worker", "w1"), Snapshot("worker", "w2"),
                           Snapshot("gone", "g1"), Snapshot("counter", "half", false),
                           Snapshot("worker", "young", false), {"README"}}));

  // Retention, keep 1 and nothing younger than an hour: c1 is latestSnapshot, c3 is young, c4
  // is the newest; only c2 goes.
  SnapshotRetention retention(*controller_, RetentionPolicy{1, 1h},
                              [](const std::string&, const std::string& name) -> Result<api::Actor> {
                                return ActorAt(name, "uid-counter", "c1");
                              });
  auto pruned = retention.Prune(kNs, "counter", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_THAT(pruned->deleted, ::testing::ElementsAre("c2"));
  ASSERT_TRUE(pruned->recheck_at.has_value());

  // GC with a one-hour grace, an hour after the young put less a second: everything else is
  // past the grace, the young put is not.
  ObjectStoreGc gc(*client_, Location(), 1h);
  int actor_lists = 0;
  auto report = gc.RunOnce(
      [&]() -> Result<LiveActors> {
        ++actor_lists;
        return LiveActors{{{kNs, "counter"}, "uid-counter"}, {{kNs, "worker"}, "uid-worker"}};
      },
      young + 1h - 1s);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(actor_lists, 1);
  EXPECT_EQ(report->failed, 0);
  EXPECT_EQ(report->deleted, (std::map<std::string, int>{{kGcIncomplete, 1}, {kGcActorGone, 1}, {kGcOwnerReplaced, 1}}));

  EXPECT_EQ(Listed(), Union({Snapshot("counter", "c1"), Snapshot("counter", "c3"), Snapshot("counter", "c4"),
                             Snapshot("worker", "w2"), Snapshot("worker", "young", false), {"README"}}));
  // What is left still restores (on the node: the controller has no download cache and
  // refuses to fetch).
  for (const char* id : {"c1", "c3", "c4"}) {
    EXPECT_TRUE(node_->VerifyCommitted(kNs, "counter", id).ok()) << id;
  }
  EXPECT_FALSE(controller_->VerifyCommitted(kNs, "counter", "c1").ok());

  // Past the young put's grace it goes too; a second pass finds nothing else.
  report = gc.RunOnce([] { return Result<LiveActors>(LiveActors{{{kNs, "counter"}, "uid-counter"},
                                                               {{kNs, "worker"}, "uid-worker"}}); },
                      young + 1h);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->deleted, (std::map<std::string, int>{{kGcIncomplete, 1}}));
  EXPECT_EQ(Listed(), Union({Snapshot("counter", "c1"), Snapshot("counter", "c3"), Snapshot("counter", "c4"),
                             Snapshot("worker", "w2"), {"README"}}));
}

TEST_F(ObjectStoreGcTest, AListingThatFailsDeletesNothing) {
  Interrupted("counter", "failing");
  const auto before = Listed();
  // The actors cannot be listed: nothing is read as "no actor".
  ObjectStoreGc gc(*client_, Location(), 1h);
  auto report = gc.RunOnce([]() -> Result<LiveActors> { return Status(Code::kUnavailable, "connection refused"); },
                           std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) + 24h);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(Listed(), before);
  // The store is down: the listing fails, nothing is deleted, and the actors are not even read.
  ASSERT_EQ(store_->Stop(), "");
  int actor_lists = 0;
  report = gc.RunOnce([&]() -> Result<LiveActors> { ++actor_lists; return LiveActors{}; },
                      std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) + 24h);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(actor_lists, 0);
  ASSERT_EQ(store_->Restart(), "");
  EXPECT_EQ(Listed(), before);
}

TEST_F(ObjectStoreGcTest, ACommitRetriedUnderTheSameIdDuringAPassIsKept) {
  // An interrupted put, old by the time of the pass; while the pass reads the actors, the
  // agent retries that commit under the same id and writes its first chunk again.
  Interrupted("counter", "retried");
  Time old{};
  (void)Listed(&old);
  std::this_thread::sleep_for(2100ms);
  ObjectStoreGc gc(*client_, Location(), 1h);
  auto report = gc.RunOnce(
      [&]() -> Result<LiveActors> {
        const std::string p = prefix_ + kNs + "/counter/retried/";
        EXPECT_TRUE(client_->PutObject(ObjectStoreBackend::ChunkKey(p, 0, 0), "half").ok());
        return LiveActors{{{kNs, "counter"}, "uid-counter"}};
      },
      old + 1h + 1s);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->deleted.empty());
  EXPECT_EQ(report->failed, 0);
  EXPECT_EQ(report->kept, 1) << "planned from the listing, kept when listed again";
  EXPECT_EQ(Listed(), Snapshot("counter", "retried", false));
}

TEST_F(ObjectStoreGcTest, AnAbandonedMultipartUploadIsAbortedAfterTheGrace) {
  const std::string key = prefix_ + "default/counter/m1/chunks/0/0";
  auto upload = client_->CreateMultipartUpload(key);
  ASSERT_TRUE(upload.ok()) << upload.status().ToString();
  ASSERT_TRUE(client_->UploadPart(key, *upload, 1, "part one").ok());
  ObjectStoreGc gc(*client_, Location(), 1h);
  const Time now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  auto young = gc.RunOnce([] { return Result<LiveActors>(LiveActors{}); }, now);
  ASSERT_TRUE(young.ok()) << young.status().ToString();
  EXPECT_TRUE(young->deleted.empty());
  auto old = gc.RunOnce([] { return Result<LiveActors>(LiveActors{}); }, now + 2h);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->deleted, (std::map<std::string, int>{{kGcMultipartUpload, 1}}));
  auto left = client_->ListMultipartUploads(prefix_);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->uploads.empty());
}

// Agents that encrypt seal each manifest; the owner uid and the times are inside. A controller
// without the key cannot tell whose a snapshot is or how old, so it deletes none; given the
// agents' key (--snapshot-store-encryption-key) it retains and collects them as plain ones.
TEST_F(ObjectStoreGcTest, SealedSnapshotsAreKeptUnlessTheControllerHoldsTheirKey) {
  const auto key = std::make_shared<const EncryptionKey>(*EncryptionKey::FromBytes(std::string(kEncryptionKeyBytes, 'k')));
  node_ = std::make_unique<SnapshotStore>(
      (node_root_.path() / "snapshots").string(),
      std::make_unique<ObjectStoreBackend>(Client(), Location(), (node_root_.path() / "cache").string(), 2,
                                           ChunkCodec({}, key)));
  Commit("counter", "c1", "uid-counter", "2026-01-01T00:00:01Z");
  Commit("counter", "c2", "uid-counter", "2026-01-01T00:00:02Z");
  Commit("worker", "w1", "uid-worker-old", "2026-01-01T00:00:01Z");
  Time newest{};
  const auto before = Listed(&newest);
  ASSERT_EQ(before, Union({Snapshot("counter", "c1"), Snapshot("counter", "c2"), Snapshot("worker", "w1")}));
  const auto lookup = [](const std::string&, const std::string& name) -> Result<api::Actor> {
    return ActorAt(name, "uid-counter", "c2");
  };
  const auto live = [] {
    return Result<LiveActors>(LiveActors{{{kNs, "counter"}, "uid-counter"}, {{kNs, "worker"}, "uid-worker"}});
  };
  const Time now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());

  // Without the key: nothing readable, nothing deleted.
  SnapshotRetention blind(*controller_, RetentionPolicy{1, 0s}, lookup);
  auto pruned = blind.Prune(kNs, "counter", now);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_TRUE(pruned->deleted.empty());
  ObjectStoreGc blind_gc(*client_, Location(), 1h);
  auto report = blind_gc.RunOnce(live, newest + 2h);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->deleted.empty());
  EXPECT_EQ(Listed(), before);

  // With it: c1 is past retention, w1 belongs to an earlier actor of the name.
  SnapshotStore keyed("", std::make_unique<ObjectStoreBackend>(Client(), Location(), "", 2, ChunkCodec({}, key)));
  SnapshotRetention retention(keyed, RetentionPolicy{1, 0s}, lookup);
  pruned = retention.Prune(kNs, "counter", now);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_THAT(pruned->deleted, ::testing::ElementsAre("c1"));
  ObjectStoreGc gc(*client_, Location(), 1h, key.get());
  report = gc.RunOnce(live, newest + 2h);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->deleted, (std::map<std::string, int>{{kGcOwnerReplaced, 1}}));
  EXPECT_EQ(Listed(), Snapshot("counter", "c2"));
  EXPECT_TRUE(node_->VerifyCommitted(kNs, "counter", "c2").ok()) << "what is kept still restores";
}

}  // namespace
}  // namespace stasis
