// A Suspend's local snapshot is made durable where the store keeps it: fsynced on this disk
// when the store takes the local files themselves (hard links), hashed but not fsynced
// (kUntilCommit) when the store writes its own copy — and then, if the commit fails, it rests
// on the node with a pause's background fsyncs queued.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "snapshots/snapshot_store.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr auto kFlush = std::chrono::seconds(30);

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

SnapshotManifest SuspendManifest(const std::string& id) {
  SnapshotManifest m;
  m.id = id;
  m.ns = "default";
  m.name = "counter";
  m.scope = "Full";
  m.trigger = "Suspend";
  m.runtime_version = "go-160fafc42237";
  return m;
}

class SuspendDurabilityTest : public ::testing::Test {
 protected:
  SuspendDurabilityTest() : local_("stasis-snapshots-"), store_dir_("stasis-store-") {}

  // A store that copies every byte (as an object store uploads them), in boot `boot`.
  SnapshotStore Copying(const std::string& boot, const fs::path& store = {}) {
    return SnapshotStore(local_.path().string(), (store.empty() ? store_dir_.path() : store).string(),
                         /*link_same_fs=*/false, boot);
  }

  SnapshotManifest Complete(SnapshotStore& store, const std::string& id, Durability durability) {
    auto dir = store.BeginLocal("default", "counter", id);
    EXPECT_TRUE(dir.ok()) << dir.status().ToString();
    WriteFile(fs::path(*dir) / "pages.img", std::string(100000, 'p'));
    WriteFile(fs::path(*dir) / "data" / "state.txt", "hello\n");
    auto m = store.CompleteLocal(SuspendManifest(id), durability);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : SnapshotManifest{};
  }

  void CorruptPages(const SnapshotStore& store, const std::string& id) {
    std::fstream f(fs::path(store.LocalPath("default", "counter", id)) / "pages.img",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.put('X');
  }

  TempDir local_;
  TempDir store_dir_;
};

TEST_F(SuspendDurabilityTest, FollowsWhetherTheStoreTakesTheLocalFiles) {
  EXPECT_EQ(SnapshotStore(local_.path().string(), "").SuspendDurability(), Durability::kSynced) << "no store";
  EXPECT_EQ(SnapshotStore(local_.path().string(), store_dir_.path().string()).SuspendDurability(), Durability::kSynced)
      << "one file system: hard links";
  EXPECT_EQ(Copying("boot-a").SuspendDurability(), Durability::kUntilCommit);
  // A store directory not there yet may be on this file system once it is: links, so synced.
  EXPECT_EQ(SnapshotStore(local_.path().string(), (store_dir_.path() / "later").string()).SuspendDurability(),
            Durability::kSynced);
}

// Hashed before it is complete (the commit needs every digest), nothing queued, the boot
// recorded: trusted unread in this boot, read in full after a reboot.
TEST_F(SuspendDurabilityTest, UntilCommitIsHashedUnsyncedAndRecordsTheBoot) {
  SnapshotStore store = Copying("boot-a");
  const SnapshotManifest m = Complete(store, "s1", Durability::kUntilCommit);
  EXPECT_FALSE(m.checksums_pending);
  EXPECT_EQ(m.deferred_sync_boot_id, "boot-a");
  ASSERT_EQ(m.files.size(), 2u);
  for (const auto& f : m.files) EXPECT_FALSE(f.chunks.empty()) << f.path;
  ASSERT_TRUE(store.FlushDeferred(kFlush));
  EXPECT_EQ(store.deferred_jobs_done(), 0u) << "no fsync queued for a snapshot its commit makes durable";
  EXPECT_TRUE(store.VerifyLocal("default", "counter", "s1").ok());

  CorruptPages(store, "s1");  // what a reboot before the write-back could leave
  EXPECT_TRUE(store.CheckLocalForRestore("default", "counter", "s1").ok());
  SnapshotStore rebooted = Copying("boot-b");
  EXPECT_EQ(rebooted.CheckLocalForRestore("default", "counter", "s1").status().reason(), "snapshot_corrupt");
}

TEST_F(SuspendDurabilityTest, ACommitCopiesItIntoTheStoreWithoutLocalFsyncs) {
  SnapshotStore store = Copying("boot-a");
  Complete(store, "s1", Durability::kUntilCommit);
  auto committed = store.Commit("default", "counter", "s1", /*just_completed=*/true);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_TRUE(store.VerifyCommitted("default", "counter", "s1").ok());
  ASSERT_TRUE(store.FlushDeferred(kFlush));
  EXPECT_EQ(store.deferred_jobs_done(), 0u);
}

// The store refused it: the snapshot stays on the node (PAUSED), so its fsyncs are queued as a
// pause's are — once, by the commit right after its completion, not by every retry.
TEST_F(SuspendDurabilityTest, AFailedCommitQueuesTheLocalFsyncs) {
  SnapshotStore store = Copying("boot-a", store_dir_.path() / "missing");
  ASSERT_EQ(store.SuspendDurability(), Durability::kUntilCommit);
  Complete(store, "s1", Durability::kUntilCommit);
  EXPECT_EQ(store.Commit("default", "counter", "s1", /*just_completed=*/true).status().reason(), "store_not_writable");
  ASSERT_TRUE(store.FlushDeferred(kFlush));
  EXPECT_EQ(store.deferred_jobs_done(), 1u);
  EXPECT_EQ(store.Commit("default", "counter", "s1").status().reason(), "store_not_writable");
  ASSERT_TRUE(store.FlushDeferred(kFlush));
  EXPECT_EQ(store.deferred_jobs_done(), 1u) << "a retry of a snapshot that rested queues nothing";

  // A synced snapshot's failed commit has nothing to queue.
  Complete(store, "s2", Durability::kSynced);
  EXPECT_FALSE(store.Commit("default", "counter", "s2", /*just_completed=*/true).ok());
  ASSERT_TRUE(store.FlushDeferred(kFlush));
  EXPECT_EQ(store.deferred_jobs_done(), 1u);
  EXPECT_TRUE(store.VerifyLocal("default", "counter", "s1").ok());
}

}  // namespace
}  // namespace stasis
