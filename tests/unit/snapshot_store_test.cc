// SnapshotStore: a snapshot becomes complete only by a rename after its manifest (synced, or
// with its boot recorded for a restore to check); commits
// are verified copies; corruption, partial leftovers, bad names and unwritable stores are errors
// with a code and reason the reconciler can act on.
#include "snapshots/snapshot_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "base/time.h"
#include "tests/support/fake_clock.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

SnapshotManifest Manifest(const std::string& id, const std::string& taken_at = "") {
  SnapshotManifest m;
  m.id = id;
  m.ns = "default";
  m.name = "counter";
  m.scope = "Full";
  m.trigger = "Suspend";
  m.runtime_version = "go-160fafc42237";
  m.cuda_checkpointed = true;
  m.taken_at = taken_at;
  m.duration_seconds = 1.5;
  return m;
}

class SnapshotStoreTest : public ::testing::Test {
 protected:
  SnapshotStoreTest()
      : local_("stasis-snapshots-"),
        store_dir_("stasis-store-"),
        store_(local_.path().string(), store_dir_.path().string()) {}

  // A complete local snapshot with two image files and one in a subdirectory.
  SnapshotManifest MakeComplete(const std::string& id, const std::string& taken_at = "",
                                Durability durability = Durability::kSynced) {
    auto dir = store_.BeginLocal("default", "counter", id);
    EXPECT_TRUE(dir.ok()) << dir.status().ToString();
    WriteFile(fs::path(*dir) / "checkpoint.img", "abc");
    WriteFile(fs::path(*dir) / "pages.img", std::string(100000, 'p'));
    WriteFile(fs::path(*dir) / "data" / "state.txt", "hello\n");
    auto m = store_.CompleteLocal(Manifest(id, taken_at), durability);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : SnapshotManifest{};
  }

  // Rewrites a snapshot's manifest as a deferred completion leaves it before its background job
  // has run: no checksums yet (what a node that died, or an agent that stopped, right after
  // the pause leaves on disk).
  void MakePending(const SnapshotStore& store, const std::string& id) {
    const fs::path path = fs::path(store.LocalPath("default", "counter", id)) / "manifest.json";
    auto j = nlohmann::json::parse(ReadFile(path));
    j["checksumsPending"] = true;
    j.erase("chunkListSha256");
    for (auto& f : j["files"]) f.erase("chunks");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << j.dump(2);
  }

  void CorruptPages(const std::string& id) {
    std::fstream f(fs::path(store_.LocalPath("default", "counter", id)) / "pages.img",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(7);
    f.put('X');
  }

  TempDir local_, store_dir_;
  SnapshotStore store_;
};

TEST_F(SnapshotStoreTest, PartialBecomesCompleteOnlyByRenameAfterTheManifest) {
  auto dir = store_.BeginLocal("default", "counter", "s1");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, store_.LocalPath("default", "counter", "s1") + ".partial");
  EXPECT_TRUE(fs::is_directory(*dir));
  EXPECT_TRUE(fs::is_empty(*dir));  // runsc needs an empty image directory
  WriteFile(fs::path(*dir) / "checkpoint.img", "abc");

  // Before completion: not a snapshot, by any reader.
  EXPECT_FALSE(fs::exists(store_.LocalPath("default", "counter", "s1")));
  EXPECT_TRUE(store_.ListLocal("default", "counter").empty());
  EXPECT_EQ(store_.VerifyLocal("default", "counter", "s1").status().code(), Code::kNotFound);

  auto m = store_.CompleteLocal(Manifest("s1"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const fs::path complete = store_.LocalPath("default", "counter", "s1");
  EXPECT_FALSE(fs::exists(*dir));
  ASSERT_TRUE(fs::exists(complete / "manifest.json"));
  ASSERT_EQ(m->files.size(), 1u);
  EXPECT_EQ(m->files[0].path, "checkpoint.img");
  EXPECT_EQ(m->files[0].size, 3);
  // One chunk (3 bytes < chunkBytes): its sha256 is the file's, the well-known one of "abc".
  EXPECT_EQ(m->files[0].chunks, std::vector<std::string>{"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"});
  EXPECT_EQ(m->format, kManifestFormatChunked);
  EXPECT_EQ(m->chunk_list_sha256, ChunkListSha256(m->files));
  EXPECT_EQ(m->total_bytes, 3);
  EXPECT_FALSE(m->taken_at.empty());

  // The manifest on disk says everything the reconciler records in latestSnapshot.
  auto j = nlohmann::json::parse(ReadFile(complete / "manifest.json"));
  EXPECT_EQ(j["id"], "s1");
  EXPECT_EQ(j["namespace"], "default");
  EXPECT_EQ(j["name"], "counter");
  EXPECT_EQ(j["scope"], "Full");
  EXPECT_EQ(j["trigger"], "Suspend");
  EXPECT_EQ(j["runtimeVersion"], "go-160fafc42237");
  EXPECT_EQ(j["cudaCheckpointed"], true);
  EXPECT_EQ(j["formatVersion"], 2);
  EXPECT_EQ(j["chunkBytes"], kDefaultChunkBytes);
  EXPECT_EQ(j["chunkListSha256"], m->chunk_list_sha256);
  EXPECT_EQ(j["files"][0]["chunks"], m->files[0].chunks);

  auto verified = store_.VerifyLocal("default", "counter", "s1");
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_EQ(verified->runtime_version, "go-160fafc42237");
  EXPECT_DOUBLE_EQ(verified->duration_seconds, 1.5);
  ASSERT_EQ(store_.ListLocal("default", "counter").size(), 1u);

  // Completing again, or beginning the same id again, is refused: a complete one is final.
  EXPECT_EQ(store_.CompleteLocal(Manifest("s1")).status().code(), Code::kNotFound);
  EXPECT_EQ(store_.BeginLocal("default", "counter", "s1").status().code(), Code::kAlreadyExists);
}

TEST_F(SnapshotStoreTest, FilesInSubdirectoriesAreListedByRelativePathInOrder) {
  auto m = MakeComplete("s1");
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.files[0].path, "checkpoint.img");
  EXPECT_EQ(m.files[1].path, "data/state.txt");
  EXPECT_EQ(m.files[2].path, "pages.img");
  EXPECT_EQ(m.total_bytes, 3 + 6 + 100000);
}

TEST_F(SnapshotStoreTest, TakenAtDefaultsToTheInjectedClocksWallTime) {
  testing::FakeClock clock;
  clock.Advance(std::chrono::microseconds(90061000250));  // 1 day, 1 h, 1 min, 1 s, 250 µs past its start
  SnapshotStore store(local_.path().string(), store_dir_.path().string(), true, "boot-a", clock);
  auto dir = store.BeginLocal("default", "counter", "s1");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  WriteFile(fs::path(*dir) / "checkpoint.img", "abc");
  auto m = store.CompleteLocal(Manifest("s1"));  // no taken_at
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->taken_at, "2026-01-02T01:01:01.000250Z");  // microseconds: the order within a second
  auto j = nlohmann::json::parse(ReadFile(fs::path(store.LocalPath("default", "counter", "s1")) /
                                          "manifest.json"));
  EXPECT_EQ(j["takenAt"], "2026-01-02T01:01:01.000250Z");

  // A taken_at the caller gives is kept.
  dir = store.BeginLocal("default", "counter", "s2");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  m = store.CompleteLocal(Manifest("s2", "2025-06-01T00:00:00Z"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->taken_at, "2025-06-01T00:00:00Z");
}

TEST_F(SnapshotStoreTest, BeginLocalEmptiesALeftoverPartial) {
  auto dir = store_.BeginLocal("default", "counter", "s1");
  ASSERT_TRUE(dir.ok());
  WriteFile(fs::path(*dir) / "checkpoint.img", "half");
  auto again = store_.BeginLocal("default", "counter", "s1");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(fs::is_empty(*again));
}

TEST_F(SnapshotStoreTest, CorruptByteIsDetectedOnVerifyAndCommit) {
  MakeComplete("s1");
  const fs::path pages = fs::path(store_.LocalPath("default", "counter", "s1")) / "pages.img";
  {
    std::fstream f(pages, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4242);
    f.put('X');  // same size, one byte different
  }
  auto v = store_.VerifyLocal("default", "counter", "s1");
  EXPECT_EQ(v.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(v.status().reason(), "snapshot_corrupt");
  EXPECT_THAT(v.status().message(), HasSubstr("pages.img sha256"));

  auto c = store_.Commit("default", "counter", "s1");
  EXPECT_EQ(c.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(c.status().reason(), "snapshot_corrupt");
  // Nothing reached the store, not even a partial copy.
  EXPECT_FALSE(fs::exists(store_.StorePath("default", "counter", "s1")));
  EXPECT_FALSE(fs::exists(store_.StorePath("default", "counter", "s1") + ".partial"));
  EXPECT_TRUE(store_.ListCommitted("default", "counter").empty());
}

TEST_F(SnapshotStoreTest, TruncatedAndMissingFilesAreDetected) {
  MakeComplete("s1");
  const fs::path dir = store_.LocalPath("default", "counter", "s1");
  fs::resize_file(dir / "pages.img", 10);
  auto v = store_.VerifyLocal("default", "counter", "s1");
  EXPECT_EQ(v.status().reason(), "snapshot_corrupt");
  EXPECT_THAT(v.status().message(), HasSubstr("pages.img has 10 bytes"));

  fs::remove(dir / "pages.img");
  v = store_.VerifyLocal("default", "counter", "s1");
  EXPECT_EQ(v.status().reason(), "snapshot_corrupt");
  EXPECT_THAT(v.status().message(), HasSubstr("pages.img is missing"));

  fs::remove(dir / "manifest.json");
  v = store_.VerifyLocal("default", "counter", "s1");
  EXPECT_EQ(v.status().reason(), "snapshot_corrupt");
  EXPECT_TRUE(store_.ListLocal("default", "counter").empty());
}

// An actor from an image records the image digest its snapshot was taken on: written when set,
// read back, and "" from a manifest written before (or for a bundle actor), whose text is
// unchanged.
TEST_F(SnapshotStoreTest, ManifestRecordsTheImageDigest) {
  const std::string digest = "sha256:" + std::string(64, 'c');
  SnapshotManifest with = Manifest("s1");
  with.image_digest = digest;
  auto store_dir = store_.BeginLocal("default", "counter", "s1");
  ASSERT_TRUE(store_dir.ok()) << store_dir.status().ToString();
  WriteFile(fs::path(*store_dir) / "checkpoint.img", "abc");
  auto m = store_.CompleteLocal(with);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const fs::path complete = store_.LocalPath("default", "counter", "s1");
  auto j = nlohmann::json::parse(ReadFile(complete / "manifest.json"));
  EXPECT_EQ(j["imageDigest"], digest);
  auto verified = store_.VerifyLocal("default", "counter", "s1");
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_EQ(verified->image_digest, digest);

  const SnapshotManifest without = Manifest("s2");
  const std::string text = ManifestText(without);
  EXPECT_EQ(text.find("imageDigest"), std::string::npos);
  auto parsed = ParseManifest(text, "s2");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->image_digest, "");
  auto round = ParseManifest(ManifestText(with), "s1");
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->image_digest, digest);
}

// A CUDA checkpoint records the GPU it was taken on (model, driver, CUDA version, device UUIDs);
// a manifest without one (a CPU actor, or written before) has no "gpu" key and reads as empty.
TEST_F(SnapshotStoreTest, ManifestRecordsTheGpuItWasTakenOn) {
  SnapshotManifest with = Manifest("s1");
  with.cuda_checkpointed = true;
  with.gpu = {"NVIDIA H200", "580.95.05", "13.0", {"GPU-7870a581-0000-0000-0000-000000000000"}};
  auto j = nlohmann::json::parse(ManifestText(with));
  EXPECT_EQ(j["gpu"]["model"], "NVIDIA H200");
  EXPECT_EQ(j["gpu"]["devices"][0], "GPU-7870a581-0000-0000-0000-000000000000");
  auto round = ParseManifest(ManifestText(with), "s1");
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->gpu, with.gpu);

  const std::string text = ManifestText(Manifest("s2"));
  EXPECT_EQ(text.find("\"gpu\""), std::string::npos);
  auto parsed = ParseManifest(text, "s2");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->gpu, SnapshotGpu{});
}

// A checkpoint of an actor that asked for the GPU fast path says so; a manifest without the key
// (any other actor's, or one written before it was recorded) reads as not asked.
TEST_F(SnapshotStoreTest, ManifestRecordsTheFastSnapshotRequest) {
  SnapshotManifest with = Manifest("s1");
  with.cuda_checkpointed = true;
  with.gpu_fast_snapshot = true;
  EXPECT_EQ(nlohmann::json::parse(ManifestText(with))["gpuFastSnapshot"], true);
  auto round = ParseManifest(ManifestText(with), "s1");
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_TRUE(round->gpu_fast_snapshot);

  SnapshotManifest plain = Manifest("s2");
  plain.cuda_checkpointed = true;
  EXPECT_EQ(ManifestText(plain).find("gpuFastSnapshot"), std::string::npos);
  auto parsed = ParseManifest(ManifestText(plain), "s2");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->gpu_fast_snapshot);

  // Verbatim, a manifest of a CUDA checkpoint as written before the field existed.
  const std::string old_text = R"({"formatVersion": 2, "id": "s3", "namespace": "default",
      "name": "counter", "scope": "Full", "trigger": "Pause", "runtimeVersion": "runsc",
      "cudaCheckpointed": true, "takenAt": "2026-12-01T10:00:00.000001Z",
      "durationSeconds": 1.5, "totalBytes": 0, "files": [], "chunkBytes": 4194304,
      "chunkListSha256": ""})";
  auto old = ParseManifest(old_text, "s3");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_TRUE(old->cuda_checkpointed);
  EXPECT_FALSE(old->gpu_fast_snapshot);
}

TEST_F(SnapshotStoreTest, ManifestPathsThatEscapeAreCorrupt) {
  MakeComplete("s1");
  const fs::path manifest =
      fs::path(store_.LocalPath("default", "counter", "s1")) / "manifest.json";
  auto j = nlohmann::json::parse(ReadFile(manifest));
  j["files"][0]["path"] = "../../../../etc/passwd";
  fs::remove(manifest);
  WriteFile(manifest, j.dump());
  auto v = store_.VerifyLocal("default", "counter", "s1");
  EXPECT_EQ(v.status().reason(), "snapshot_corrupt");
  EXPECT_THAT(v.status().message(), HasSubstr("unsafe path"));
}

// HasCommitted answers yes or no only when the store can tell: a store that is not there is an
// error, never "gone" (a template would otherwise retake its golden on an unmounted store).
TEST_F(SnapshotStoreTest, HasCommittedTellsAbsentFromUnknowable) {
  MakeComplete("s1");
  ASSERT_TRUE(store_.Commit("default", "counter", "s1").ok());
  auto has = store_.HasCommitted("default", "counter", "s1");
  ASSERT_TRUE(has.ok()) << has.status().ToString();
  EXPECT_TRUE(*has);
  auto other = store_.HasCommitted("default", "counter", "s2");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE(*other);
  SnapshotStore unmounted(local_.path().string(), (store_dir_.path() / "not-mounted").string());
  EXPECT_FALSE(unmounted.HasCommitted("default", "counter", "s1").ok());
  EXPECT_FALSE(store_.HasCommitted("default", "counter", "../s1").ok()) << "not a snapshot id";
}

TEST_F(SnapshotStoreTest, CommitCopiesVerifiesAndRenames) {
  auto local = MakeComplete("s1");
  // Both roots are on one file system here: a store that never links shows the copy path.
  SnapshotStore copying(local_.path().string(), store_dir_.path().string(), /*link_same_fs=*/false);
  auto c = copying.Commit("default", "counter", "s1");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const fs::path committed = copying.StorePath("default", "counter", "s1");
  EXPECT_FALSE(fs::exists(committed.string() + ".partial"));
  EXPECT_EQ(ReadFile(committed / "data" / "state.txt"), "hello\n");
  EXPECT_EQ(ReadFile(committed / "manifest.json"),
            ReadFile(fs::path(copying.LocalPath("default", "counter", "s1")) / "manifest.json"));
  ASSERT_EQ(c->files.size(), local.files.size());
  for (size_t i = 0; i < c->files.size(); ++i) EXPECT_EQ(c->files[i].chunks, local.files[i].chunks);
  EXPECT_TRUE(copying.VerifyCommitted("default", "counter", "s1").ok());
  ASSERT_EQ(copying.ListCommitted("default", "counter").size(), 1u);

  // Again (a crash after the rename, before the status update): verified and kept.
  auto again = copying.Commit("default", "counter", "s1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();

  // Corruption in the store is found by VerifyCommitted.
  {
    std::fstream f(committed / "checkpoint.img", std::ios::in | std::ios::out | std::ios::binary);
    f.put('X');
  }
  EXPECT_EQ(copying.VerifyCommitted("default", "counter", "s1").status().reason(),
            "snapshot_corrupt");
  EXPECT_EQ(copying.Commit("default", "counter", "s1").status().reason(), "snapshot_corrupt");

  // Removing from the store leaves the local one.
  EXPECT_TRUE(copying.RemoveCommitted("default", "counter", "s1").ok());
  EXPECT_FALSE(fs::exists(committed));
  EXPECT_TRUE(copying.VerifyLocal("default", "counter", "s1").ok());
}

// On one file system the store takes the files by hard link (no copy), and a corrupt local
// file is still refused: a snapshot that rested is read once more, against its manifest.
TEST_F(SnapshotStoreTest, CommitOnOneFileSystemLinksAndStillVerifies) {
  auto local = MakeComplete("s1");
  auto c = store_.Commit("default", "counter", "s1", /*just_completed=*/true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const fs::path from = fs::path(store_.LocalPath("default", "counter", "s1")) / "pages.img";
  const fs::path to = fs::path(store_.StorePath("default", "counter", "s1")) / "pages.img";
  struct stat a {}, b {};
  ASSERT_EQ(stat(from.c_str(), &a), 0);
  ASSERT_EQ(stat(to.c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino) << "not a hard link";
  EXPECT_TRUE(store_.VerifyCommitted("default", "counter", "s1").ok());
  // The local copy can go; the committed one stays whole.
  ASSERT_TRUE(store_.RemoveLocal("default", "counter", "s1").ok());
  EXPECT_TRUE(store_.VerifyCommitted("default", "counter", "s1").ok());

  MakeComplete("s2");
  CorruptPages("s2");
  auto bad = store_.Commit("default", "counter", "s2");
  EXPECT_EQ(bad.status().reason(), "snapshot_corrupt") << bad.status().ToString();
  EXPECT_FALSE(fs::exists(store_.StorePath("default", "counter", "s2")));
}

// kDeferred (a Pause): complete at once, the fsyncs after; the manifest names the boot.
TEST_F(SnapshotStoreTest, DeferredSnapshotIsCompleteAtOnceAndSyncedInTheBackground) {
  SnapshotStore store(local_.path().string(), store_dir_.path().string(), true, "boot-a");
  auto dir = store.BeginLocal("default", "counter", "s1");
  ASSERT_TRUE(dir.ok());
  WriteFile(fs::path(*dir) / "pages.img", std::string(100000, 'p'));
  WriteFile(fs::path(*dir) / "data" / "state.txt", "hello\n");
  auto m = store.CompleteLocal(Manifest("s1"), Durability::kDeferred);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->deferred_sync_boot_id, "boot-a");
  EXPECT_FALSE(fs::exists(*dir));
  auto j = nlohmann::json::parse(ReadFile(fs::path(store.LocalPath("default", "counter", "s1")) / "manifest.json"));
  EXPECT_EQ(j["deferredSyncBootId"], "boot-a");
  ASSERT_TRUE(store.FlushDeferred(std::chrono::seconds(30)));
  auto verified = store.VerifyLocal("default", "counter", "s1");
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_EQ(verified->deferred_sync_boot_id, "boot-a");

  // kSynced writes no boot id: its bytes were on disk before it was complete.
  auto synced = MakeComplete("s2");
  EXPECT_TRUE(synced.deferred_sync_boot_id.empty());
  EXPECT_FALSE(nlohmann::json::parse(ReadFile(fs::path(store_.LocalPath("default", "counter", "s2")) /
                                              "manifest.json"))
                   .contains("deferredSyncBootId"));
}

// In the boot it was written in, a deferred snapshot is trusted without a reading (only a
// reboot loses the page cache); after a reboot it is read in full, and damage is found; one
// the node died too early to checksum is refused as unverifiable.
TEST_F(SnapshotStoreTest, DeferredSnapshotIsVerifiedBeforeRestoreOnlyAfterAReboot) {
  {
    SnapshotStore before(local_.path().string(), store_dir_.path().string(), true, "boot-a");
    for (const std::string id : {"s1", "s2", "s4"}) {
      auto dir = before.BeginLocal("default", "counter", id);
      ASSERT_TRUE(dir.ok());
      WriteFile(fs::path(*dir) / "pages.img", std::string(100000, 'p'));
      ASSERT_TRUE(before.CompleteLocal(Manifest(id), Durability::kDeferred).ok());
    }
    ASSERT_TRUE(before.FlushDeferred(std::chrono::seconds(30)));  // checksummed, synced
    CorruptPages("s2");  // what a torn write-back could leave after a power loss
    MakePending(before, "s4");  // the node died before the background job ran
    // Same boot: not read (the corruption above is one no crash of the agent can make).
    EXPECT_TRUE(before.CheckLocalForRestore("default", "counter", "s2").ok());
    EXPECT_TRUE(before.CheckLocalForRestore("default", "counter", "s4").ok());
  }
  SnapshotStore after(local_.path().string(), store_dir_.path().string(), true, "boot-b");
  EXPECT_TRUE(after.CheckLocalForRestore("default", "counter", "s1").ok());
  auto bad = after.CheckLocalForRestore("default", "counter", "s2");
  EXPECT_EQ(bad.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(bad.status().reason(), "snapshot_corrupt") << bad.status().ToString();
  EXPECT_EQ(after.ResumePendingChecksums(), 0) << "another boot's bytes cannot be vouched for";
  auto unverifiable = after.CheckLocalForRestore("default", "counter", "s4");
  EXPECT_EQ(unverifiable.status().reason(), "snapshot_corrupt");
  EXPECT_THAT(unverifiable.status().message(), HasSubstr("unverifiable"));
  EXPECT_EQ(after.Commit("default", "counter", "s4").status().reason(), "snapshot_corrupt");

  // A kSynced snapshot is trusted after a reboot too: it was on disk before it was complete.
  SnapshotStore synced_view(local_.path().string(), store_dir_.path().string(), true, "boot-c");
  MakeComplete("s3");
  CorruptPages("s3");
  EXPECT_TRUE(synced_view.CheckLocalForRestore("default", "counter", "s3").ok());
  EXPECT_EQ(after.CheckLocalForRestore("default", "counter", "nope").status().reason(), "snapshot_not_found");
}

// A paused (deferred) snapshot committed later: linked, read again, fsynced into the store.
TEST_F(SnapshotStoreTest, CommitOfADeferredSnapshotLinksAndVerifies) {
  MakeComplete("s1", "", Durability::kDeferred);
  auto c = store_.Commit("default", "counter", "s1");  // its checksums may still be pending
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->checksums_pending);
  EXPECT_TRUE(store_.VerifyCommitted("default", "counter", "s1").ok());
  MakeComplete("s2", "", Durability::kDeferred);
  ASSERT_TRUE(store_.FlushDeferred(std::chrono::seconds(30)));
  CorruptPages("s2");
  EXPECT_EQ(store_.Commit("default", "counter", "s2").status().reason(), "snapshot_corrupt");
  // Removed before its background fsync ran, or after: either way the syncer carries on.
  ASSERT_TRUE(store_.RemoveLocal("default", "counter", "s2").ok());
  EXPECT_TRUE(store_.FlushDeferred(std::chrono::seconds(30)));
}

// A deferred Full snapshot is complete without being read: sizes now, checksums from the
// background job (then the manifest is rewritten with them). A Data snapshot is hashed at
// once: every restore of one verifies it.
TEST_F(SnapshotStoreTest, DeferredFullSnapshotIsChecksummedInTheBackground) {
  auto m = MakeComplete("s1", "", Durability::kDeferred);
  EXPECT_TRUE(m.checksums_pending);
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.total_bytes, 100009);
  for (const auto& f : m.files) EXPECT_TRUE(f.chunks.empty()) << f.path;
  ASSERT_TRUE(store_.FlushDeferred(std::chrono::seconds(30)));
  const fs::path dir = store_.LocalPath("default", "counter", "s1");
  auto j = nlohmann::json::parse(ReadFile(dir / "manifest.json"));
  EXPECT_FALSE(j.contains("checksumsPending")) << j.dump();
  EXPECT_EQ(j["files"][2]["path"], "pages.img");
  ASSERT_EQ(j["files"][2]["chunks"].size(), 1u);
  EXPECT_EQ(j["files"][2]["chunks"][0].get<std::string>().size(), 64u);
  EXPECT_FALSE(fs::exists(dir / "manifest.json.tmp"));
  auto verified = store_.VerifyLocal("default", "counter", "s1");
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_FALSE(verified->checksums_pending);

  auto data_dir = store_.BeginLocal("default", "counter", "d1");
  ASSERT_TRUE(data_dir.ok());
  WriteFile(fs::path(*data_dir) / "data-0.tar", "archive");
  SnapshotManifest data = Manifest("d1");
  data.scope = "Data";
  auto d = store_.CompleteLocal(data, Durability::kDeferred);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->checksums_pending);
  ASSERT_EQ(d->files[0].chunks.size(), 1u);
  EXPECT_EQ(d->files[0].chunks[0].size(), 64u);
}

// An agent that stopped before its background job ran, restarting in the same boot: the
// checksums are queued again (restart recovery) — or computed by a commit that needs them.
TEST_F(SnapshotStoreTest, PendingChecksumsAreFinishedAfterAnAgentRestart) {
  SnapshotStore first(local_.path().string(), store_dir_.path().string(), true, "boot-a");
  for (const std::string id : {"s1", "s2"}) {
    auto dir = first.BeginLocal("default", "counter", id);
    ASSERT_TRUE(dir.ok());
    WriteFile(fs::path(*dir) / "pages.img", std::string(100000, 'p'));
    ASSERT_TRUE(first.CompleteLocal(Manifest(id), Durability::kDeferred).ok());
  }
  ASSERT_TRUE(first.FlushDeferred(std::chrono::seconds(30)));
  MakePending(first, "s1");
  MakePending(first, "s2");

  SnapshotStore restarted(local_.path().string(), store_dir_.path().string(), true, "boot-a");
  EXPECT_FALSE(restarted.VerifyLocal("default", "counter", "s2").ok()) << "no checksums yet";
  auto committed = restarted.Commit("default", "counter", "s1");
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_TRUE(restarted.VerifyCommitted("default", "counter", "s1").ok());
  EXPECT_EQ(restarted.ResumePendingChecksums(), 1);  // s2 (s1's were computed by the commit)
  ASSERT_TRUE(restarted.FlushDeferred(std::chrono::seconds(30)));
  EXPECT_TRUE(restarted.VerifyLocal("default", "counter", "s2").ok());
  EXPECT_EQ(restarted.ResumePendingChecksums(), 0);
}

TEST_F(SnapshotStoreTest, CommitOfAnIncompleteSnapshotFails) {
  ASSERT_TRUE(store_.BeginLocal("default", "counter", "s1").ok());
  auto c = store_.Commit("default", "counter", "s1");
  EXPECT_EQ(c.status().code(), Code::kNotFound);
  EXPECT_EQ(c.status().reason(), "snapshot_not_found");
}

TEST_F(SnapshotStoreTest, RemovePartialsRemovesOnlyPartialsUnderBothRoots) {
  MakeComplete("done");
  ASSERT_TRUE(store_.Commit("default", "counter", "done").ok());
  ASSERT_TRUE(store_.BeginLocal("default", "counter", "p1").ok());
  // A crash between writing the manifest and the rename: still partial.
  auto p2 = store_.BeginLocal("other", "actor-b", "p2");
  ASSERT_TRUE(p2.ok());
  WriteFile(fs::path(*p2) / "manifest.json", "{}");
  fs::create_directories(store_.StorePath("default", "counter", "p3") + ".partial");

  auto removed = store_.RemovePartials();
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 3);
  EXPECT_FALSE(fs::exists(store_.LocalPath("default", "counter", "p1") + ".partial"));
  EXPECT_FALSE(fs::exists(*p2));
  EXPECT_FALSE(fs::exists(store_.StorePath("default", "counter", "p3") + ".partial"));
  EXPECT_TRUE(store_.VerifyLocal("default", "counter", "done").ok());
  EXPECT_TRUE(store_.VerifyCommitted("default", "counter", "done").ok());
  EXPECT_EQ(*store_.RemovePartials(), 0);

  SnapshotStore missing_roots("/nonexistent/stasis/local", "");
  EXPECT_EQ(*missing_roots.RemovePartials(), 0);
}

TEST_F(SnapshotStoreTest, PathComponentsAreValidated) {
  const std::vector<std::string> bad_names = {
      "", "..", ".", "a/b", "/abs", "../x", "A", "-a", "a-", "a_b", "a\nb", std::string(254, 'a')};
  for (const auto& bad : bad_names) {
    for (auto [ns, name] :
         {std::pair{bad, std::string("counter")}, std::pair{std::string("default"), bad}}) {
      auto b = store_.BeginLocal(ns, name, "s1");
      EXPECT_EQ(b.status().code(), Code::kInvalidArgument) << "ns=" << ns << " name=" << name;
      EXPECT_EQ(b.status().reason(), "invalid_name");
      EXPECT_EQ(store_.Commit(ns, name, "s1").status().code(), Code::kInvalidArgument);
      EXPECT_EQ(store_.VerifyLocal(ns, name, "s1").status().code(), Code::kInvalidArgument);
      EXPECT_EQ(store_.RemoveAllLocal(ns, name).code(), Code::kInvalidArgument);
      EXPECT_TRUE(store_.ListLocal(ns, name).empty());
    }
  }
  const std::vector<std::string> bad_ids = {
      "", "..", ".", "a/b", "../x", ".hidden", "s1.partial", "a b", std::string(129, 'a')};
  for (const auto& bad_id : bad_ids) {
    EXPECT_EQ(store_.BeginLocal("default", "counter", bad_id).status().code(),
              Code::kInvalidArgument)
        << bad_id;
    EXPECT_EQ(store_.RemoveLocal("default", "counter", bad_id).code(), Code::kInvalidArgument);
    EXPECT_EQ(store_.CompleteLocal(Manifest(bad_id)).status().code(), Code::kInvalidArgument);
  }
  // Nothing was created by any of them.
  EXPECT_TRUE(fs::is_empty(local_.path()));
  // Good ones: DNS-1123 subdomains and our id alphabet.
  EXPECT_TRUE(store_.BeginLocal("kube-system", "a.b-c1", "20261202T150102Z-3f9a1c").ok());
}

TEST_F(SnapshotStoreTest, ListIsOldestFirstByTakenAtThenId) {
  MakeComplete("c", "2026-12-02T10:00:00Z");
  MakeComplete("a", "2026-12-02T12:00:00Z");
  MakeComplete("b", "2026-12-02T09:00:00Z");
  MakeComplete("d", "2026-12-02T10:00:00Z");
  ASSERT_TRUE(store_.BeginLocal("default", "counter", "e").ok());  // partial: not listed
  std::vector<std::string> ids;
  for (const auto& m : store_.ListLocal("default", "counter")) ids.push_back(m.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b", "c", "d", "a"}));
  EXPECT_TRUE(store_.ListLocal("default", "other").empty());
}

// Taken within one second: the order they were taken in, whatever their ids' random suffixes say
// (retention keeps the newest; a cluster controller test once saw the older of two kept).
TEST_F(SnapshotStoreTest, SnapshotsOfOneSecondAreListedInTheOrderTheyWereTaken) {
  MakeComplete("20261206T092927Z-ee7fba");
  MakeComplete("20261206T092927Z-de8edd");
  MakeComplete("20261206T092927Z-a00000");
  std::vector<std::string> ids;
  for (const auto& m : store_.ListLocal("default", "counter")) {
    ids.push_back(m.id);
    EXPECT_TRUE(ParseTime(m.taken_at).ok()) << m.taken_at;
    EXPECT_NE(m.taken_at.find('.'), std::string::npos) << "no sub-second part: " << m.taken_at;
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"20261206T092927Z-ee7fba", "20261206T092927Z-de8edd",
                                           "20261206T092927Z-a00000"}));
}

TEST_F(SnapshotStoreTest, RemoveLocalAndRemoveAllLocal) {
  MakeComplete("s1");
  MakeComplete("s2");
  ASSERT_TRUE(store_.BeginLocal("default", "counter", "s3").ok());
  EXPECT_TRUE(store_.RemoveLocal("default", "counter", "s1").ok());
  EXPECT_FALSE(fs::exists(store_.LocalPath("default", "counter", "s1")));
  EXPECT_TRUE(store_.RemoveLocal("default", "counter", "s1").ok());  // already gone: fine
  ASSERT_EQ(store_.ListLocal("default", "counter").size(), 1u);
  EXPECT_TRUE(store_.RemoveAllLocal("default", "counter").ok());
  EXPECT_FALSE(fs::exists(local_.path() / "default" / "counter"));
  EXPECT_TRUE(store_.RemoveAllLocal("default", "counter").ok());
}

TEST_F(SnapshotStoreTest, LocalActorsListsActorDirectoriesWithValidNames) {
  EXPECT_TRUE(store_.LocalActors().empty());
  MakeComplete("s1");
  fs::create_directories(local_.path() / "other-ns" / "emptied");  // a suspended actor's leftover
  fs::create_directories(local_.path() / "other-ns" / "Not_A_Name");
  WriteFile(local_.path() / "stray-file", "x");
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(store_.LocalActors(), (std::vector<P>{{"default", "counter"}, {"other-ns", "emptied"}}));
}

// Sets or clears the immutable attribute (root cannot create files in an immutable directory).
bool SetImmutable(const fs::path& dir, bool on) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  int flags = 0;
  bool ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (ok) {
    flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    ok = ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  close(fd);
  return ok;
}

TEST_F(SnapshotStoreTest, StoreNotWritableIsAClearError) {
  EXPECT_TRUE(store_.CheckStoreWritable().ok());

  SnapshotStore none(local_.path().string(), "");
  auto s = none.CheckStoreWritable();
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "no_store");
  MakeComplete("s1");
  EXPECT_EQ(none.Commit("default", "counter", "s1").status().reason(), "no_store");

  SnapshotStore missing(local_.path().string(), (store_dir_.path() / "nope").string());
  s = missing.CheckStoreWritable();
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "store_not_writable");
  EXPECT_THAT(s.message(), HasSubstr("does not exist"));
  EXPECT_EQ(missing.Commit("default", "counter", "s1").status().reason(), "store_not_writable");

  WriteFile(store_dir_.path() / "a-file", "x");
  SnapshotStore file(local_.path().string(), (store_dir_.path() / "a-file").string());
  EXPECT_THAT(file.CheckStoreWritable().message(), HasSubstr("not a directory"));

  const fs::path frozen = store_dir_.path() / "frozen";
  fs::create_directories(frozen);
  if (!SetImmutable(frozen, true)) GTEST_SKIP() << "cannot set the immutable attribute here";
  struct Thaw {
    fs::path dir;
    ~Thaw() { SetImmutable(dir, false); }
  } thaw{frozen};
  SnapshotStore ro(local_.path().string(), frozen.string());
  s = ro.CheckStoreWritable();
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "store_not_writable");
  EXPECT_THAT(s.message(), HasSubstr(frozen.string() + " is not writable"));
  EXPECT_THAT(s.message(), HasSubstr("Operation not permitted"));
  auto c = ro.Commit("default", "counter", "s1");
  EXPECT_EQ(c.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(c.status().reason(), "store_not_writable");
  EXPECT_TRUE(fs::is_empty(frozen));
}

TEST(NewSnapshotIdTest, SortableByTimeUniqueAndAValidId) {
  const std::regex format("^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$");
  std::set<std::string> ids;
  TempDir dir;
  SnapshotStore store(dir.path().string(), "");
  for (int i = 0; i < 100; ++i) {
    const std::string id = NewSnapshotId();
    EXPECT_TRUE(std::regex_match(id, format)) << id;
    ids.insert(id);
  }
  EXPECT_GE(ids.size(), 99u);
  EXPECT_TRUE(store.BeginLocal("default", "counter", *ids.begin()).ok());
}

}  // namespace
}  // namespace stasis
