// Layers applied onto a root filesystem (images/layer_unpack.h), built in the test with
// libarchive's writer: members of every kind land with their modes, owners and times; the
// diff ID is the sha256 of the uncompressed tar whatever the compression; whiteouts and
// opaque directories remove what lower layers made but never what the same layer adds; a
// member replaces a lower file, directory or symlink as Docker does; a broken stream is
// refused. Refusals of hostile members: layer_refusal_test.cc. Runs as root (owners).
#include "images/layer_unpack.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/layer_tar.h"

namespace stasis::images {
namespace {

namespace fs = std::filesystem;
using stasis::testing::LayerWorkspace;
using stasis::testing::TarDir;
using stasis::testing::TarFile;
using stasis::testing::TarFilter;
using stasis::testing::TarHardlink;
using stasis::testing::TarMember;
using stasis::testing::TarSymlink;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct stat Lstat(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
  return st;
}

std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

std::vector<TarMember> ImageMembers() {
  TarMember tool = TarFile("usr/bin/tool", "#!/bin/sh\necho tool\n", 04755);
  tool.uid = 1000;
  tool.gid = 2000;
  tool.mtime = 1600000000;
  TarMember secret = TarDir("root", 0700);
  secret.mtime = 1500000000;
  return {TarDir("usr"), TarDir("usr/bin"), tool, TarSymlink("usr/bin/t", "tool"),
          TarSymlink("usr/bin/passwd-link", "/etc/passwd"), TarHardlink("usr/bin/tool2", "usr/bin/tool"),
          secret, TarFile("./root/.profile", "PS1=#\n", 0600), TarFile("etc/hostname", "")};
}

class LayerUnpackTest : public ::testing::TestWithParam<TarFilter> {};

TEST_P(LayerUnpackTest, AppliesEveryKindOfMemberWithModesOwnersAndTimes) {
  LayerWorkspace ws;
  auto layer = ws.Apply(ImageMembers(), GetParam());
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  const fs::path root = ws.rootfs();
  EXPECT_EQ(Slurp(root / "usr/bin/tool"), "#!/bin/sh\necho tool\n");
  const struct stat tool = Lstat(root / "usr/bin/tool");
  EXPECT_EQ(tool.st_mode & 07777, 04755u);
  EXPECT_EQ(tool.st_uid, 1000u);
  EXPECT_EQ(tool.st_gid, 2000u);
  EXPECT_EQ(tool.st_mtime, 1600000000);
  EXPECT_EQ(fs::read_symlink(root / "usr/bin/t"), "tool");
  EXPECT_EQ(fs::read_symlink(root / "usr/bin/passwd-link"), "/etc/passwd");  // as written, never followed
  EXPECT_EQ(Lstat(root / "usr/bin/tool2").st_ino, tool.st_ino);
  const struct stat secret = Lstat(root / "root");
  EXPECT_EQ(secret.st_mode & 07777, 0700u);
  EXPECT_EQ(secret.st_mtime, 1500000000);  // set after its content was written
  EXPECT_EQ(Lstat(root / "root/.profile").st_mode & 07777, 0600u);
  EXPECT_EQ(Slurp(root / "root/.profile"), "PS1=#\n");
  EXPECT_TRUE(fs::is_regular_file(root / "etc/hostname"));
  EXPECT_EQ(layer->bytes, 20 + 6);
  EXPECT_EQ(layer->entries, 9);
  EXPECT_EQ(ws.Escapes(), "");
}

TEST_P(LayerUnpackTest, DiffIdIsTheSha256OfTheUncompressedTar) {
  LayerWorkspace ws;
  const std::string plain = ws.Blob(ImageMembers(), TarFilter::kNone);
  const std::string expected = stasis::testing::Sha256OfFile(plain);
  ASSERT_THAT(expected, HasSubstr("sha256:"));
  const std::string blob = ws.Blob(ImageMembers(), GetParam());
  if (GetParam() != TarFilter::kNone) {
    ASSERT_NE(stasis::testing::Sha256OfFile(blob), expected);
  }
  auto layer = ApplyLayer(blob, ws.rootfs().string());
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  EXPECT_EQ(layer->diff_id, expected);
}

INSTANTIATE_TEST_SUITE_P(Compressions, LayerUnpackTest,
                         ::testing::Values(TarFilter::kNone, TarFilter::kGzip, TarFilter::kZstd),
                         [](const auto& info) {
                           return std::string(info.param == TarFilter::kNone   ? "Plain"
                                              : info.param == TarFilter::kGzip ? "Gzip"
                                                                               : "Zstd");
                         });

TEST(LayerWhiteoutTest, WhiteoutsRemoveWhatLowerLayersMade) {
  LayerWorkspace ws;
  ASSERT_TRUE(ws.Apply({TarFile("a/keep", "k"), TarFile("a/gone", "g"), TarFile("a/dir/sub/f", "f"),
                        TarFile("top", "t"), TarSymlink("link", "/etc")})
                  .ok());
  auto upper = ws.Apply({TarFile("a/.wh.gone", ""), TarFile("a/.wh.dir", ""), TarFile(".wh.top", ""),
                         TarFile(".wh.link", ""), TarFile(".wh.never-was", "")},
                        TarFilter::kGzip);
  ASSERT_TRUE(upper.ok()) << upper.status().ToString();
  EXPECT_THAT(Names(ws.rootfs()), UnorderedElementsAre("a"));
  EXPECT_THAT(Names(ws.rootfs() / "a"), UnorderedElementsAre("keep"));  // no .wh. file is left either
  EXPECT_EQ(upper->entries, 5);
  EXPECT_TRUE(fs::is_directory("/etc"));
}

TEST(LayerWhiteoutTest, AWhiteoutKeepsWhatItsOwnLayerAdds) {
  LayerWorkspace ws;
  ASSERT_TRUE(ws.Apply({TarFile("f", "lower"), TarFile("d/lower", "l")}).ok());
  // The same name written before its whiteout in one layer: the layer's own file stays.
  auto upper = ws.Apply({TarFile("f", "upper"), TarFile(".wh.f", ""), TarFile("d/mine", "m"), TarFile(".wh.d", "")});
  ASSERT_TRUE(upper.ok()) << upper.status().ToString();
  EXPECT_EQ(Slurp(ws.rootfs() / "f"), "upper");
  EXPECT_THAT(Names(ws.rootfs() / "d"), UnorderedElementsAre("mine"));
}

TEST(LayerWhiteoutTest, OpaqueDirectoryKeepsOnlyThisLayersEntriesWhateverTheOrder) {
  LayerWorkspace ws;
  ASSERT_TRUE(ws.Apply({TarFile("before/old1", "1"), TarFile("before/old2/deep", "2"), TarFile("after/old", "3"),
                        TarFile("after/kept/old", "4"), TarFile("other/stays", "5")})
                  .ok());
  auto upper = ws.Apply({TarDir("before"), TarFile("before/.wh..wh..opq", ""), TarFile("before/new", "n"),
                         TarFile("after/new", "n"), TarFile("after/kept/new", "n"), TarFile("after/.wh..wh..opq", "")},
                        TarFilter::kZstd);
  ASSERT_TRUE(upper.ok()) << upper.status().ToString();
  EXPECT_THAT(Names(ws.rootfs() / "before"), UnorderedElementsAre("new"));
  EXPECT_THAT(Names(ws.rootfs() / "after"), UnorderedElementsAre("new", "kept"));
  EXPECT_THAT(Names(ws.rootfs() / "after/kept"), UnorderedElementsAre("new"));
  EXPECT_THAT(Names(ws.rootfs() / "other"), UnorderedElementsAre("stays"));
}

TEST(LayerWhiteoutTest, AnOpaqueRootEmptiesTheLowerLayers) {
  LayerWorkspace ws;
  ASSERT_TRUE(ws.Apply({TarFile("a", "1"), TarFile("b/c", "2")}).ok());
  ASSERT_TRUE(ws.Apply({TarFile("n", "3"), TarFile(".wh..wh..opq", "")}).ok());
  EXPECT_THAT(Names(ws.rootfs()), UnorderedElementsAre("n"));
}

TEST(LayerReplaceTest, MembersReplaceLowerFilesDirectoriesAndSymlinks) {
  LayerWorkspace ws;
  ASSERT_TRUE(ws.Apply({TarFile("p", "file"), TarFile("q/with/contents", "x"), TarFile("r", "old"),
                        TarSymlink("s", "../outside/sentinel"), TarSymlink("u", "q")})
                  .ok());
  auto upper = ws.Apply({TarDir("p", 0750), TarFile("p/inside", "i"), TarFile("q", "now a file"),
                         TarFile("r", "new", 0600), TarFile("s", "replaces the link"), TarDir("u")},
                        TarFilter::kGzip);
  ASSERT_TRUE(upper.ok()) << upper.status().ToString();
  const fs::path root = ws.rootfs();
  EXPECT_EQ(Lstat(root / "p").st_mode & 07777, 0750u);
  EXPECT_EQ(Slurp(root / "p/inside"), "i");
  EXPECT_EQ(Slurp(root / "q"), "now a file");
  EXPECT_EQ(Slurp(root / "r"), "new");
  EXPECT_EQ(Lstat(root / "r").st_mode & 07777, 0600u);
  EXPECT_TRUE(S_ISREG(Lstat(root / "s").st_mode));
  EXPECT_EQ(Slurp(root / "s"), "replaces the link");
  EXPECT_TRUE(S_ISDIR(Lstat(root / "u").st_mode));
  EXPECT_EQ(ws.Escapes(), "");
}

// The store's root may lie under a symlink (/var/lib → /data/var/lib): only the members'
// own paths are checked for symlinks, not the root's.
TEST(LayerUnpackPathTest, TheRootMayBeNamedThroughASymlink) {
  LayerWorkspace ws;
  const fs::path link = ws.rootfs().parent_path() / "layers/root-link";
  fs::create_directory_symlink(ws.rootfs(), link);
  auto layer = ApplyLayer(ws.Blob({TarFile("d/f", "x")}), link.string());
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  EXPECT_EQ(Slurp(ws.rootfs() / "d/f"), "x");
}

TEST(LayerUnpackPathTest, TheRootEntryGivesTheRootItsModeAndAufsMetadataIsSkipped) {
  LayerWorkspace ws;
  auto layer = ws.Apply({TarDir("./", 0751), TarFile(".wh..wh.aufs", ""), TarDir(".wh..wh.plnk"), TarFile("a", "1")});
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  EXPECT_EQ(Lstat(ws.rootfs()).st_mode & 07777, 0751u);
  EXPECT_THAT(Names(ws.rootfs()), UnorderedElementsAre("a"));
}

TEST(LayerReplaceTest, ADirectoryMemberMergesIntoALowerDirectory) {
  LayerWorkspace ws;
  ASSERT_TRUE(ws.Apply({TarDir("d", 0755), TarFile("d/lower", "l")}).ok());
  ASSERT_TRUE(ws.Apply({TarDir("d", 0700), TarFile("d/upper", "u")}).ok());
  EXPECT_THAT(Names(ws.rootfs() / "d"), UnorderedElementsAre("lower", "upper"));
  EXPECT_EQ(Lstat(ws.rootfs() / "d").st_mode & 07777, 0700u);
}

void ExpectBadLayer(const Result<UnpackedLayer>& r) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), kBadLayer) << r.status().ToString();
}

// Overwrites `n` bytes at `offset` of the file (negative: from its end).
void Corrupt(const std::string& path, long offset, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset, offset < 0 ? std::ios::end : std::ios::beg);
  f.write(std::string(n, '\x5a').data(), static_cast<std::streamsize>(n));
}

std::vector<TarMember> BigLayer() {
  // Text, so that deflate codes it (random bytes would be stored verbatim, where a flipped
  // byte is no error at all), and varied, so that the stream is long.
  std::mt19937 random(42);
  std::string noise;
  for (int i = 0; i < 20000; ++i) noise += "line " + std::to_string(random() % 100000) + "\n";
  return {TarFile("big", noise), TarFile("small", "s")};
}

TEST(LayerStreamTest, ACorruptGzipStreamIsABadLayer) {
  LayerWorkspace ws;
  const std::string blob = ws.Blob(BigLayer(), TarFilter::kGzip);
  ASSERT_GT(fs::file_size(blob), 4000u);
  Corrupt(blob, 2000, 64);
  auto layer = ApplyLayer(blob, ws.rootfs().string());
  ExpectBadLayer(layer);
  EXPECT_THAT(layer.status().message(), HasSubstr("gzip decompression failed"));
}

// libarchive's gzip reader does not check the trailer's CRC, so a stream is only as good as
// its diff ID: the ID must cover every byte, the tar's end padding and anything after it too.
TEST(LayerStreamTest, DiffIdCoversBytesAfterTheEndOfTheArchive) {
  LayerWorkspace ws;
  const std::string blob = ws.Blob({TarFile("a", "1")});
  std::ofstream(blob, std::ios::app | std::ios::binary) << std::string(100000, '\0') << "trailing";
  auto layer = ApplyLayer(blob, ws.rootfs().string());
  ASSERT_TRUE(layer.ok()) << layer.status().ToString();
  EXPECT_EQ(layer->diff_id, stasis::testing::Sha256OfFile(blob));
}

TEST(LayerStreamTest, ATruncatedStreamAndNonTarDataAreBadLayers) {
  LayerWorkspace ws;
  const std::string blob = ws.Blob(BigLayer(), TarFilter::kZstd);
  fs::resize_file(blob, fs::file_size(blob) / 2);
  ExpectBadLayer(ApplyLayer(blob, ws.rootfs().string()));
  const std::string junk = (ws.rootfs().parent_path() / "layers/junk").string();
  std::ofstream(junk) << std::string(4096, '\x01');
  ExpectBadLayer(ApplyLayer(junk, ws.rootfs().string()));
}

TEST(LayerStreamTest, ADamagedTarHeaderIsABadLayer) {
  LayerWorkspace ws;
  const std::string blob = ws.Blob({TarFile("a", "1"), TarFile("b", "2")});
  Corrupt(blob, 1024, 8);  // the second member's header: "a" takes a header and a data block
  auto layer = ApplyLayer(blob, ws.rootfs().string());
  ExpectBadLayer(layer);
  EXPECT_THAT(layer.status().message(), HasSubstr("tar"));
}

TEST(LayerStreamTest, AMissingBlobOrRootIsAHostFailure) {
  LayerWorkspace ws;
  auto missing = ApplyLayer((ws.rootfs().parent_path() / "layers/none").string(), ws.rootfs().string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kInternal);
  EXPECT_EQ(missing.status().reason(), "unpack_failed");
  auto no_root = ApplyLayer(ws.Blob({TarFile("a", "")}), (ws.rootfs() / "nope").string());
  ASSERT_FALSE(no_root.ok());
  EXPECT_EQ(no_root.status().code(), Code::kInternal);
}

}  // namespace
}  // namespace stasis::images
