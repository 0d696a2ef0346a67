// What a restore trusts and what a checkpoint risks, decided without an API server: the image
// directory derived from the names (never from status), the manifest's owner (metadata.uid),
// every checksum of a committed snapshot verified (on several threads, the first failure in
// the manifest's order reported), and the free-space decision before a checkpoint.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "api/conditions.h"
#include "reconcilers/node/transitions.h"
#include "snapshots/free_space.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr char kNs[] = "default";
constexpr char kName[] = "counter";
constexpr char kUid[] = "7d1c0c1e-0000-4000-8000-000000000001";

class SnapshotTrustTest : public ::testing::Test {
 protected:
  SnapshotTrustTest()
      : local_("stasis-trust-local-"), store_dir_("stasis-trust-store-"),
        store_(local_.path().string(), store_dir_.path().string()) {}

  // A committed snapshot with `files` files of `bytes` bytes each, owned by `uid`.
  std::string Committed(const std::string& id, const std::string& uid, int files = 3, size_t bytes = 4096) {
    auto dir = store_.BeginLocal(kNs, kName, id);
    EXPECT_TRUE(dir.ok());
    for (int i = 0; i < files; ++i) std::ofstream(*dir + "/f" + std::to_string(i) + ".img") << std::string(bytes, 'a' + i);
    SnapshotManifest m;
    m.id = id;
    m.ns = kNs;
    m.name = kName;
    m.owner_uid = uid;
    m.scope = "Full";
    m.trigger = "Suspend";
    EXPECT_TRUE(store_.CompleteLocal(m).ok());
    EXPECT_TRUE(store_.Commit(kNs, kName, id, true).ok());
    return store_.StorePath(kNs, kName, id);
  }

  static void FlipByte(const fs::path& file, std::streamoff at) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    const char c = static_cast<char>(f.get());
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x5a));
  }

  TempDir local_, store_dir_;
  SnapshotStore store_;
};

TEST_F(SnapshotTrustTest, TheImageDirectoryIsDerivedFromTheNames) {
  const std::string dir = Committed("s1", kUid);
  auto source = store_.CheckForRestore(kNs, kName, "s1", /*committed=*/true, kUid);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->dir, dir);
  EXPECT_EQ(source->manifest.owner_uid, kUid);
  auto local = store_.CheckForRestore(kNs, kName, "s1", /*committed=*/false, kUid);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(local->dir, store_.LocalPath(kNs, kName, "s1"));
}

TEST_F(SnapshotTrustTest, AnIdThatIsNoSnapshotIdIsRefused) {
  Committed("s1", kUid);
  for (const std::string id : {"../other/s1", "s1/..", "..", "/etc", "s1.partial", ""}) {
    auto r = store_.CheckForRestore(kNs, kName, id, true, kUid);
    ASSERT_FALSE(r.ok()) << id;
    EXPECT_EQ(r.status().reason(), snapshot_reason::kInvalidName) << id;
  }
}

TEST_F(SnapshotTrustTest, AnotherLifesSnapshotIsRefusedAndKept) {
  const std::string dir = Committed("s1", "uid-of-an-earlier-life");
  auto r = store_.CheckForRestore(kNs, kName, "s1", true, kUid);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotOwnerMismatch);
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(fs::path(dir) / kManifestFile)) << "kept for inspection";
  EXPECT_EQ(ConditionReason(snapshot_reason::kSnapshotOwnerMismatch), api::kReasonSnapshotOwnerMismatch);
  EXPECT_EQ(ConditionReason(snapshot_reason::kSnapshotCorrupt), api::kReasonSnapshotCorrupt);
}

TEST_F(SnapshotTrustTest, AManifestWithoutAnOwnerIsAccepted) {
  const std::string dir = Committed("s1", "");
  const auto manifest = nlohmann::json::parse(std::ifstream(fs::path(dir) / kManifestFile));
  EXPECT_FALSE(manifest.contains("ownerUid")) << "written as stores before owners were recorded hold them";
  EXPECT_TRUE(store_.CheckForRestore(kNs, kName, "s1", true, kUid).ok());
}

TEST_F(SnapshotTrustTest, ACorruptedCommittedSnapshotIsRefusedAndKept) {
  const std::string dir = Committed("s1", kUid, 4, 1 << 20);
  FlipByte(fs::path(dir) / "f2.img", 1000);
  FlipByte(fs::path(dir) / "f3.img", 7);
  for (int threads : {1, 4}) {
    auto r = VerifySnapshotDir(dir, kNs, kName, "s1", threads);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotCorrupt);
    EXPECT_NE(r.status().message().find("f2.img sha256"), std::string::npos)
        << "the first bad file in the manifest's order, whichever thread read it: " << r.status().message();
  }
  auto r = store_.CheckForRestore(kNs, kName, "s1", true, kUid);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotCorrupt);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "f2.img")) << "kept for inspection";
}

TEST_F(SnapshotTrustTest, ALocalSnapshotIsVerifiedWhenAsked) {
  Committed("s1", kUid);
  FlipByte(store_.LocalPath(kNs, kName, "s1") + "/f0.img", 3);
  EXPECT_TRUE(store_.CheckForRestore(kNs, kName, "s1", false, kUid).ok())
      << "a synced local Full snapshot of this boot is trusted unread";
  auto r = store_.CheckForRestore(kNs, kName, "s1", false, kUid, /*verify_local=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotCorrupt);
}

TEST(CheckpointFitsTest, FreeSpaceMustHoldTheImageAndTheMargin) {
  constexpr int64_t kMiB = 1 << 20;
  EXPECT_TRUE(CheckpointFits(100 * kMiB, 36 * kMiB, 64 * kMiB));
  EXPECT_FALSE(CheckpointFits(100 * kMiB - 1, 36 * kMiB, 64 * kMiB));
  EXPECT_FALSE(CheckpointFits(2 * kMiB, 0, 64 * kMiB)) << "unknown memory: the margin alone";
  EXPECT_TRUE(CheckpointFits(64 * kMiB, 0, 64 * kMiB));
  EXPECT_TRUE(CheckpointFits(0, 0, 0));
  EXPECT_FALSE(CheckpointFits(-1, 0, 0)) << "a free count that makes no sense";
  EXPECT_TRUE(CheckpointFits(10, -5, -5)) << "negative estimates count as nothing";
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(CheckpointFits(kMax - 1, kMax, 1)) << "no overflow into a yes";
  EXPECT_FALSE(CheckpointFits(100, 60, kMax));
  EXPECT_TRUE(CheckpointFits(kMax, kMax - 1, 1));
}

TEST(FreeBytesTest, AnswersForADirectoryAndRefusesAMissingOne) {
  TempDir dir("stasis-free-");
  auto free = FreeBytes(dir.path().string());
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_GT(*free, 0);
  auto missing = FreeBytes((dir.path() / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), snapshot_reason::kIoError);
}

}  // namespace
}  // namespace stasis
