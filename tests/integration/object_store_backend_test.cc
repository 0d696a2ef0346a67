// Snapshots committed to a real S3-compatible store (SeaweedFS, hack/object-store.sh) through
// SnapshotStore and ObjectStoreBackend: a snapshot committed on one "node" (a local root) is
// fetched, verified, by another; the manifest is the last object, so a failed put leaves no
// snapshot; a corrupted or missing chunk is refused with the chunk named; list and remove.
// With compression and encryption: each transform round trips, the raw objects hold no
// plaintext, a wrong key is refused by name with nothing downloaded, a tampered or swapped
// chunk is refused.
#include "snapshots/object_store_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/object_store.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::ObjectStore;
using testing::TempDir;

constexpr char kNs[] = "default";
constexpr char kName[] = "counter";

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed + i / 4096) & 0xff);
  return s;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ObjectStoreBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { store_ = ObjectStore::Start(&start_error_).release(); }
  static void TearDownTestSuite() {
    delete store_;
    store_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(store_, nullptr) << start_error_; }

  static std::unique_ptr<S3Client> Client() {
    S3ClientOptions o;
    o.retry.max_attempts = 2;
    o.retry.initial = 50ms;
    o.deadlines.connect = 1000ms;
    o.deadlines.total = 5000ms;
    return std::make_unique<S3Client>(store_->endpoint(), store_->bucket(), o);
  }

  // One node: its local snapshots and its download cache, sharing the store under `prefix`.
  struct Node {
    TempDir root{"stasis-s3-node-"};
    ObjectStoreBackend* backend = nullptr;
    std::unique_ptr<SnapshotStore> snapshots;
  };
  std::unique_ptr<Node> NewNode(const std::string& prefix, ChunkCodec codec = {}) {
    auto n = std::make_unique<Node>();
    auto backend = std::make_unique<ObjectStoreBackend>(Client(), S3Location{store_->bucket(), prefix},
                                                        (n->root.path() / "store-cache").string(), 4, std::move(codec));
    n->backend = backend.get();
    n->snapshots = std::make_unique<SnapshotStore>((n->root.path() / "snapshots").string(), std::move(backend));
    return n;
  }

  // A complete local snapshot on `node`: a 20 MiB pages.img (3 chunks) and a small state file.
  SnapshotManifest Complete(Node& node, const std::string& id, int seed = 1) {
    auto dir = node.snapshots->BeginLocal(kNs, kName, id);
    EXPECT_TRUE(dir.ok()) << dir.status().ToString();
    std::ofstream(fs::path(*dir) / "pages.img", std::ios::binary) << Pattern(20 << 20, seed);
    std::ofstream(fs::path(*dir) / "checkpoint.img", std::ios::binary) << "state " << seed;
    SnapshotManifest m;
    m.id = id;
    m.ns = kNs;
    m.name = kName;
    m.owner_uid = "uid-1";
    m.scope = "Full";
    m.trigger = "Suspend";
    auto done = node.snapshots->CompleteLocal(m);
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    return done.ok() ? *done : SnapshotManifest{};
  }

  static inline ObjectStore* store_ = nullptr;
  static inline std::string start_error_;
};

TEST_F(ObjectStoreBackendTest, ASnapshotCommittedOnOneNodeIsRestoredOnAnother) {
  auto n1 = NewNode("cross/");
  auto n2 = NewNode("cross/");
  const SnapshotManifest m = Complete(*n1, "s1");
  auto committed = n1->snapshots->Commit(kNs, kName, "s1", true);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(n1->snapshots->StorePath(kNs, kName, "s1"),
            "s3://" + store_->bucket() + "/cross/default/counter/s1/");

  auto source = n2->snapshots->CheckForRestore(kNs, kName, "s1", /*committed=*/true, "uid-1");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->manifest.chunk_list_sha256, m.chunk_list_sha256);
  const fs::path local = n1->snapshots->LocalPath(kNs, kName, "s1");
  for (const char* f : {"pages.img", "checkpoint.img"}) {
    EXPECT_EQ(ReadFile(fs::path(source->dir) / f), ReadFile(local / f)) << f;
  }
  EXPECT_TRUE(fs::exists(fs::path(source->dir) / kManifestFile));
  // A second restore uses the verified copy in the cache.
  auto again = n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->dir, source->dir);
  // Committing again (a crash before the status write) finds it committed.
  EXPECT_TRUE(n1->snapshots->Commit(kNs, kName, "s1", true).ok());
  // Another actor's life is refused by the manifest's owner.
  EXPECT_EQ(n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-2").status().reason(),
            snapshot_reason::kSnapshotOwnerMismatch);
}

// The node that commits keeps its snapshot as a cached copy (hard links, no second copy on
// disk), so a resume there reads no chunk from the store: with every chunk object deleted,
// the restore still succeeds there, from the very bytes committed, and fails on another node.
TEST_F(ObjectStoreBackendTest, TheNodeThatCommittedResumesWithoutADownload) {
  auto n1 = NewNode("kept/");
  auto n2 = NewNode("kept/");
  Complete(*n1, "s1");
  ASSERT_TRUE(n1->snapshots->Commit(kNs, kName, "s1", true).ok());
  const fs::path local = n1->snapshots->LocalPath(kNs, kName, "s1");
  const std::string pages = ReadFile(local / "pages.img");
  EXPECT_EQ(fs::hard_link_count(local / "pages.img"), 2u) << "linked into the cache, not copied";
  ASSERT_TRUE(n1->snapshots->RemoveLocal(kNs, kName, "s1").ok());  // as the agent does once SUSPENDED
  auto client = Client();
  const std::string prefix = std::string("kept/") + kNs + "/" + kName + "/s1/";
  for (size_t f = 0; f < 2; ++f) {
    for (int64_t c = 0; c < 3; ++c) (void)client->DeleteObject(ObjectStoreBackend::ChunkKey(prefix, f, c));
  }
  auto here = n1->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1");
  ASSERT_TRUE(here.ok()) << here.status().ToString();
  EXPECT_EQ(fs::path(here->dir).parent_path().parent_path().parent_path(), n1->root.path() / "store-cache");
  EXPECT_EQ(ReadFile(fs::path(here->dir) / "pages.img"), pages);
  EXPECT_EQ(n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").status().reason(),
            snapshot_reason::kSnapshotCorrupt)
      << "another node must download, and the chunks are gone";
}

TEST_F(ObjectStoreBackendTest, ACorruptOrMissingChunkIsRefusedWithItsName) {
  auto n1 = NewNode("corrupt/");
  auto n2 = NewNode("corrupt/");
  Complete(*n1, "s1");
  ASSERT_TRUE(n1->snapshots->Commit(kNs, kName, "s1", true).ok());
  const std::string prefix = n1->backend->SnapshotPrefix(kNs, kName, "s1");
  auto client = Client();
  // pages.img is the manifest's second file (sorted): chunk 1 overwritten with other bytes.
  ASSERT_TRUE(client->PutObject(ObjectStoreBackend::ChunkKey(prefix, 1, 1), Pattern(8 << 20, 9)).ok());
  auto r = n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotCorrupt);
  EXPECT_THAT(r.status().message(), HasSubstr("pages.img sha256 of chunk 1 (bytes 8388608–16777215)"));
  EXPECT_FALSE(fs::exists(n2->root.path() / "store-cache" / kNs / kName / "s1")) << "nothing of it kept to restore";
  // Chunk 1 put right again, chunk 2 gone.
  ASSERT_TRUE(client->PutObject(ObjectStoreBackend::ChunkKey(prefix, 1, 1), Pattern(20 << 20, 1).substr(8 << 20, 8 << 20)).ok());
  ASSERT_TRUE(client->DeleteObject(ObjectStoreBackend::ChunkKey(prefix, 1, 2)).ok());
  EXPECT_THAT(n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").status().message(),
              HasSubstr("chunk 2 is missing"));
}

TEST_F(ObjectStoreBackendTest, AFailedPutLeavesNoSnapshotAndListAndRemoveSeeOnlyCompleteOnes) {
  auto n1 = NewNode("list/");
  Complete(*n1, "s1", 1);
  Complete(*n1, "s2", 2);
  ASSERT_TRUE(n1->snapshots->Commit(kNs, kName, "s1", true).ok());
  // s2's local bytes changed after completion: its put reads them, refuses, and leaves no manifest.
  {
    std::fstream f(fs::path(n1->snapshots->LocalPath(kNs, kName, "s2")) / "pages.img",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('!');
  }
  auto failed = n1->snapshots->Commit(kNs, kName, "s2", true);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().reason(), snapshot_reason::kSnapshotCorrupt);
  auto objects = Client()->ListAllObjects("list/default/counter/s2/");
  ASSERT_TRUE(objects.ok());
  EXPECT_TRUE(objects->empty()) << objects->size() << " objects left of a failed put";

  auto listed = n1->snapshots->ListCommitted(kNs, kName);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, "s1");
  ASSERT_TRUE(n1->snapshots->RemoveCommitted(kNs, kName, "s1").ok());
  EXPECT_TRUE(n1->snapshots->ListCommitted(kNs, kName).empty());
  objects = Client()->ListAllObjects("list/default/counter/");
  ASSERT_TRUE(objects.ok());
  EXPECT_TRUE(objects->empty());
  EXPECT_EQ(n1->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").status().reason(),
            snapshot_reason::kSnapshotNotFound);
}

TEST_F(ObjectStoreBackendTest, AStoreThatIsDownIsNotWritableAndComesBack) {
  auto n1 = NewNode("down/");
  EXPECT_TRUE(n1->snapshots->CheckStoreWritable().ok());
  ASSERT_EQ(store_->Stop(), "");
  const Status s = n1->snapshots->CheckStoreWritable();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), snapshot_reason::kStoreUnreachable) << s.ToString();
  Complete(*n1, "s1");
  EXPECT_FALSE(n1->snapshots->Commit(kNs, kName, "s1", true).ok()) << "nothing committed while it is down";
  // A store that is down cannot say a snapshot is gone (HasCommitted: an error, never false).
  EXPECT_FALSE(n1->snapshots->HasCommitted(kNs, kName, "s1").ok());
  ASSERT_EQ(store_->Restart(), "");
  auto before = n1->snapshots->HasCommitted(kNs, kName, "s1");
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_FALSE(*before);
  EXPECT_TRUE(n1->snapshots->Commit(kNs, kName, "s1", true).ok()) << "the same snapshot commits once it is back";
  auto after = n1->snapshots->HasCommitted(kNs, kName, "s1");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(*after);
}

std::shared_ptr<const EncryptionKey> Key(char fill) {
  return std::make_shared<const EncryptionKey>(*EncryptionKey::FromBytes(std::string(kEncryptionKeyBytes, fill)));
}

// Every object under `prefix`, by key, as the store holds it.
std::map<std::string, std::string> RawObjects(S3Client& client, const std::string& prefix) {
  std::map<std::string, std::string> out;
  auto objects = client.ListAllObjects(prefix);
  EXPECT_TRUE(objects.ok());
  for (const auto& o : objects.ok() ? *objects : std::vector<S3Object>{}) out[o.key] = *client.GetObject(o.key);
  return out;
}

TEST_F(ObjectStoreBackendTest, EachTransformRoundTripsAndAnEncryptedStoreHoldsNoPlaintext) {
  const CompressionSetting zstd{Compression::kZstd, 3};
  struct Case {
    const char* prefix;
    ChunkCodec codec;
  };
  const std::vector<Case> cases = {{"zstd/", ChunkCodec(zstd, nullptr)},
                                   {"aes/", ChunkCodec({}, Key('k'))},
                                   {"zstd-aes/", ChunkCodec(zstd, Key('k'))}};
  const std::string plaintext = Pattern(20 << 20, 1).substr(5 << 20, 64);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.prefix);
    auto n1 = NewNode(c.prefix, c.codec);
    auto n2 = NewNode(c.prefix, c.codec);
    const SnapshotManifest m = Complete(*n1, "s1");
    auto committed = n1->snapshots->Commit(kNs, kName, "s1", true);
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    auto source = n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1");
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ(source->manifest.compression, c.codec.compression());
    EXPECT_EQ(source->manifest.encryption, c.codec.encryption());
    EXPECT_EQ(ReadFile(fs::path(source->dir) / "pages.img"), Pattern(20 << 20, 1));

    auto client = Client();
    size_t stored = 0;
    for (const auto& [key, bytes] : RawObjects(*client, n1->backend->SnapshotPrefix(kNs, kName, "s1"))) {
      stored += bytes.size();
      if (c.codec.encryption() == Encryption::kNone) continue;
      EXPECT_EQ(bytes.find(plaintext), std::string::npos) << key << " holds plaintext";
      for (const std::string& secret : {m.chunk_list_sha256, m.files[1].chunks[0], m.owner_uid, std::string("pages.img")}) {
        EXPECT_EQ(bytes.find(secret), std::string::npos) << key << " reveals " << secret;
      }
    }
    if (c.codec.compression() == Compression::kZstd) EXPECT_LT(stored, size_t{4} << 20) << "20 MiB of a pattern, compressed";
  }
}

TEST_F(ObjectStoreBackendTest, AnUnencryptedSnapshotReadsWithAnyCompressionAndAKeyedAgentRefusesIt) {
  auto plain = NewNode("compat/");
  Complete(*plain, "s1");
  ASSERT_TRUE(plain->snapshots->Commit(kNs, kName, "s1", true).ok());
  auto zstd = NewNode("compat/", ChunkCodec({Compression::kZstd, 1}, nullptr));
  EXPECT_TRUE(zstd->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").ok()) << "decoded by its manifest";
  auto keyed = NewNode("compat/", ChunkCodec({}, Key('k')));
  EXPECT_EQ(keyed->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").status().reason(),
            snapshot_reason::kSnapshotKeyMismatch);
}

TEST_F(ObjectStoreBackendTest, AWrongKeyIsRefusedByNameBeforeAnythingIsDownloaded) {
  const auto key = Key('k'), other = Key('o');
  auto n1 = NewNode("wrongkey/", ChunkCodec({}, key));
  Complete(*n1, "s1");
  ASSERT_TRUE(n1->snapshots->Commit(kNs, kName, "s1", true).ok());
  auto n2 = NewNode("wrongkey/", ChunkCodec({}, other));
  auto r = n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotKeyMismatch);
  EXPECT_THAT(r.status().message(), HasSubstr("was encrypted with key id " + key->id() + "; this agent has key id " + other->id()));
  auto n3 = NewNode("wrongkey/");
  EXPECT_THAT(n3->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").status().message(),
              HasSubstr("this agent has no key"));
  for (auto* n : {n2.get(), n3.get()}) {
    std::error_code ec;
    EXPECT_TRUE(fs::is_empty(n->root.path() / "store-cache", ec) || !fs::exists(n->root.path() / "store-cache"))
        << "nothing downloaded into the cache";
  }
  EXPECT_TRUE(n2->snapshots->ListCommitted(kNs, kName).empty()) << "what it cannot read it does not list";
}

TEST_F(ObjectStoreBackendTest, ATamperedOrSwappedEncryptedChunkIsRefused) {
  auto n1 = NewNode("tamper/", ChunkCodec({Compression::kZstd, 3}, Key('k')));
  auto n2 = NewNode("tamper/", ChunkCodec({}, Key('k')));
  Complete(*n1, "s1");
  ASSERT_TRUE(n1->snapshots->Commit(kNs, kName, "s1", true).ok());
  const std::string prefix = n1->backend->SnapshotPrefix(kNs, kName, "s1");
  auto client = Client();
  const std::string k0 = ObjectStoreBackend::ChunkKey(prefix, 1, 0), k1 = ObjectStoreBackend::ChunkKey(prefix, 1, 1);
  const std::string c0 = *client->GetObject(k0), c1 = *client->GetObject(k1);
  std::string flipped = c1;
  flipped[flipped.size() / 2] ^= 0x20;
  ASSERT_TRUE(client->PutObject(k1, flipped).ok());
  auto r = n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotCorrupt);
  EXPECT_THAT(r.status().message(), HasSubstr("pages.img chunk 1 (bytes 8388608–16777215): encrypted object failed authentication"));
  EXPECT_FALSE(fs::exists(n2->root.path() / "store-cache" / kNs / kName / "s1")) << "nothing of it kept to restore";
  // Chunks 0 and 1 swapped: each is intact, and each is refused where it does not belong.
  ASSERT_TRUE(client->PutObject(k0, c1).ok());
  ASSERT_TRUE(client->PutObject(k1, c0).ok());
  EXPECT_THAT(n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").status().message(),
              HasSubstr("moved from another place"));
  ASSERT_TRUE(client->PutObject(k0, c0).ok());
  ASSERT_TRUE(client->PutObject(k1, c1).ok());
  EXPECT_TRUE(n2->snapshots->CheckForRestore(kNs, kName, "s1", true, "uid-1").ok()) << "put back, it restores";
}

}  // namespace
}  // namespace stasis
