// Chunk digests: the boundaries and order of chunks, the same answer on any number of threads,
// copies that hash what they copy, and manifests of both formats read back against the disk.
#include "snapshots/chunk_digest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/parallel.h"
#include "snapshots/manifest.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr int64_t kChunk = kMinChunkBytes;  // 64 KiB: several chunks from small files

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// sha256 by OpenSSL's one-shot API, independently of the incremental hasher under test.
std::string OneShotSha256(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += {kHex[md[i] >> 4], kHex[md[i] & 0xf]};
  return hex;
}

// Bytes that differ in every chunk and at every offset, so a misplaced boundary shows.
std::string Pattern(int64_t n, int seed) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = static_cast<char>((i * 131 + seed * 7 + i / kChunk) & 0xff);
  return s;
}

std::vector<std::string> ExpectedChunks(const std::string& bytes) {
  std::vector<std::string> out;
  for (size_t off = 0; off < bytes.size(); off += kChunk) out.push_back(OneShotSha256(bytes.substr(off, kChunk)));
  return out;
}

void FlipByte(const fs::path& p, int64_t offset) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  const char c = static_cast<char>(f.get());
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST(ChunkDigestTest, ChunkCountCoversEveryByteOnce) {
  EXPECT_EQ(ChunkCount(0, kChunk), 0);
  EXPECT_EQ(ChunkCount(1, kChunk), 1);
  EXPECT_EQ(ChunkCount(kChunk, kChunk), 1);
  EXPECT_EQ(ChunkCount(kChunk + 1, kChunk), 2);
  EXPECT_EQ(ChunkCount(int64_t{8} << 30, kDefaultChunkBytes), 1024);
  EXPECT_GE(AvailableCpus(), 1);
  // Spans of files of 2.5 chunks, 0 bytes and 1 chunk: in order, the last one short, none for
  // the empty file.
  const auto spans = ChunkSpans({2 * kChunk + kChunk / 2, 0, kChunk}, kChunk);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[2].file, 0u);
  EXPECT_EQ(spans[2].offset, 2 * kChunk);
  EXPECT_EQ(spans[2].length, kChunk / 2);
  EXPECT_EQ(spans[3].file, 2u);
  EXPECT_EQ(spans[3].index, 0);
  EXPECT_EQ(spans[3].length, kChunk);
}

TEST(ChunkDigestTest, EveryChunkIsHashedAtItsBoundariesOnAnyNumberOfThreads) {
  TempDir dir("stasis-chunks-");
  const std::vector<std::pair<std::string, std::string>> files = {
      {"a.img", Pattern(3 * kChunk + 5, 1)}, {"empty.img", ""}, {"b.img", Pattern(kChunk, 2)}, {"c.img", "abc"}};
  std::vector<fs::path> paths;
  for (const auto& [name, bytes] : files) {
    WriteFile(dir.path() / name, bytes);
    paths.push_back(dir.path() / name);
  }
  for (int threads : {1, 2, 7}) {
    auto digests = HashFilesChunked(paths, kChunk, threads);
    ASSERT_TRUE(digests.ok()) << digests.status().ToString();
    ASSERT_EQ(digests->size(), files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      EXPECT_EQ((*digests)[i].size, static_cast<int64_t>(files[i].second.size())) << files[i].first;
      EXPECT_EQ((*digests)[i].chunks, ExpectedChunks(files[i].second)) << files[i].first << " on " << threads;
    }
  }
  EXPECT_EQ(HashFilesChunked({dir.path() / "c.img"}, kChunk)->at(0).chunks[0],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ChunkDigestTest, OnlyRegularFilesAreHashed) {
  TempDir dir("stasis-chunks-");
  WriteFile(dir.path() / "real.img", "x");
  fs::create_symlink(dir.path() / "real.img", dir.path() / "link.img");
  auto r = HashFilesChunked({dir.path() / "link.img"}, kChunk);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not a regular file"));
  EXPECT_EQ(HashFilesChunked({dir.path() / "missing.img"}, kChunk).status().reason(), snapshot_reason::kIoError);
}

TEST(ChunkDigestTest, ACopyHoldsTheSameBytesAndTheDigestsOfWhatWasRead) {
  TempDir dir("stasis-chunks-");
  const std::string big = Pattern(5 * kChunk + 17, 3);
  WriteFile(dir.path() / "from" / "big.img", big);
  WriteFile(dir.path() / "from" / "small.img", "hello");
  fs::create_directories(dir.path() / "to");
  const std::vector<fs::path> from = {dir.path() / "from" / "big.img", dir.path() / "from" / "small.img"};
  const std::vector<fs::path> to = {dir.path() / "to" / "big.img", dir.path() / "to" / "small.img"};
  auto copied = CopyFilesChunked(from, to, kChunk, 3);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(ReadFile(to[0]), big);
  EXPECT_EQ(ReadFile(to[1]), "hello");
  EXPECT_EQ((*copied)[0].chunks, ExpectedChunks(big));
  // Never over an existing file.
  auto again = CopyFilesChunked(from, to, kChunk, 3);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().reason(), snapshot_reason::kStoreNotWritable);
  EXPECT_EQ(ReadFile(to[0]), big);
}

// A store with one committed snapshot "s1" whose pages.img spans several default-size chunks.
class ChunkedManifestTest : public ::testing::Test {
 protected:
  ChunkedManifestTest() : local_("stasis-chunked-local-"), store_dir_("stasis-chunked-store-"),
                          store_(local_.path().string(), store_dir_.path().string(), /*link_same_fs=*/false) {}

  SnapshotManifest Complete(const std::string& id) {
    auto dir = store_.BeginLocal("default", "counter", id);
    EXPECT_TRUE(dir.ok());
    WriteFile(fs::path(*dir) / "checkpoint.img", "state");
    WriteFile(fs::path(*dir) / "pages.img", Pattern(2 * kDefaultChunkBytes + 100, 4));
    SnapshotManifest m;
    m.id = id;
    m.ns = "default";
    m.name = "counter";
    m.scope = "Full";
    m.trigger = "Suspend";
    auto done = store_.CompleteLocal(m);
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    return done.ok() ? *done : SnapshotManifest{};
  }

  fs::path LocalDir(const std::string& id) { return store_.LocalPath("default", "counter", id); }

  nlohmann::json ReadManifestJson(const fs::path& dir) { return nlohmann::json::parse(ReadFile(dir / kManifestFile)); }
  void WriteManifestJson(const fs::path& dir, const nlohmann::json& j) {
    std::ofstream(dir / kManifestFile, std::ios::binary | std::ios::trunc) << j.dump(2);
  }

  Status Verify(const std::string& id) { return store_.VerifyLocal("default", "counter", id).status(); }

  TempDir local_, store_dir_;
  SnapshotStore store_;
};

TEST_F(ChunkedManifestTest, AFlippedByteNamesItsChunkAndItsBytes) {
  const SnapshotManifest m = Complete("s1");
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[1].path, "pages.img");
  EXPECT_EQ(m.files[1].chunks.size(), 3u);
  ASSERT_TRUE(Verify("s1").ok());
  FlipByte(LocalDir("s1") / "pages.img", 2 * kDefaultChunkBytes + 7);
  const Status s = Verify("s1");
  EXPECT_EQ(s.reason(), snapshot_reason::kSnapshotCorrupt);
  EXPECT_THAT(s.message(), HasSubstr("pages.img sha256 of chunk 2 (bytes 16777216–16777315)"));
}

TEST_F(ChunkedManifestTest, AManifestThatDisagreesWithItselfIsRefusedBeforeReading) {
  Complete("s1");
  const fs::path dir = LocalDir("s1");
  const nlohmann::json good = ReadManifestJson(dir);
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& why) {
    nlohmann::json j = good;
    edit(j);
    WriteManifestJson(dir, j);
    const Status s = Verify("s1");
    EXPECT_EQ(s.reason(), snapshot_reason::kSnapshotCorrupt) << why;
    EXPECT_THAT(s.message(), HasSubstr(why));
  };
  refused([](auto& j) { j["files"][1]["chunks"].erase(0); }, "pages.img lists 2 chunks, its size needs 3");
  refused([](auto& j) { j["chunkBytes"] = 1; }, "chunkBytes 1 is out of bounds");
  refused([](auto& j) { j["files"][1]["chunks"][0] = "../../etc"; }, "a chunk digest that is no sha256");
  refused([](auto& j) { std::swap(j["files"][1]["chunks"][0], j["files"][1]["chunks"][1]); },
          "chunkListSha256 does not match");
  refused([](auto& j) { j["formatVersion"] = 3; }, "formatVersion 3 is not one this stasis reads");
  WriteManifestJson(dir, good);
  EXPECT_TRUE(Verify("s1").ok());
}

// A snapshot taken before manifests had chunks (format 1: one sha256 per whole file) is still
// verified as it was written, and a commit gives it chunks: the store holds only format 2.
TEST_F(ChunkedManifestTest, AFormatOneSnapshotIsVerifiedAndCommittedAsFormatTwo) {
  Complete("s1");
  const fs::path dir = LocalDir("s1");
  nlohmann::json j = ReadManifestJson(dir);
  j["formatVersion"] = 1;
  j.erase("chunkBytes");
  j.erase("chunkListSha256");
  for (auto& f : j["files"]) {
    f["sha256"] = OneShotSha256(ReadFile(dir / f["path"].get<std::string>()));
    f.erase("chunks");
  }
  WriteManifestJson(dir, j);
  ASSERT_TRUE(Verify("s1").ok());
  auto committed = store_.Commit("default", "counter", "s1");
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->format, kManifestFormatChunked);
  const nlohmann::json in_store = ReadManifestJson(store_.StorePath("default", "counter", "s1"));
  EXPECT_EQ(in_store["formatVersion"], 2);
  EXPECT_EQ(in_store["files"][1]["chunks"].size(), 3u);
  EXPECT_TRUE(store_.VerifyCommitted("default", "counter", "s1").ok());

  // A format-1 snapshot whose bytes no longer match is refused, by the whole-file digest.
  Complete("s2");
  const fs::path dir2 = LocalDir("s2");
  nlohmann::json j2 = ReadManifestJson(dir2);
  j2["formatVersion"] = 1;
  for (auto& f : j2["files"]) f["sha256"] = OneShotSha256(ReadFile(dir2 / f["path"].get<std::string>()));
  WriteManifestJson(dir2, j2);
  FlipByte(dir2 / "pages.img", 3);
  EXPECT_THAT(Verify("s2").message(), HasSubstr("pages.img sha256"));
  EXPECT_EQ(store_.Commit("default", "counter", "s2").status().reason(), snapshot_reason::kSnapshotCorrupt);
  EXPECT_FALSE(fs::exists(store_.StorePath("default", "counter", "s2")));
}

// Across file systems (link_same_fs off) a commit copies every chunk, hashed as it is read: a
// byte changed on the node after completion is caught in the copy, nothing committed.
TEST_F(ChunkedManifestTest, ACopyThatDoesNotMatchTheManifestCommitsNothing) {
  Complete("s1");
  FlipByte(LocalDir("s1") / "pages.img", kDefaultChunkBytes + 1);
  auto r = store_.Commit("default", "counter", "s1");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("pages.img sha256 of chunk 1"));
  EXPECT_FALSE(fs::exists(store_.StorePath("default", "counter", "s1")));
  EXPECT_TRUE(fs::is_empty(fs::path(store_dir_.path()) / "default" / "counter"));
}

}  // namespace
}  // namespace stasis
