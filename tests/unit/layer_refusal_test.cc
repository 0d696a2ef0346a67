// Hostile layers refused (images/layer_unpack.h): absolute and ".." names, writes, whiteouts
// and hardlinks through a symlink that a lower layer or the same layer made, hardlinks out of
// the root, device nodes and FIFOs unless the node allows them. After every refusal nothing
// exists outside the root: not beside it (outside/sentinel stays as it was), not in /etc.
#include <sys/stat.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "images/layer_unpack.h"
#include "tests/support/layer_tar.h"

namespace stasis::images {
namespace {

namespace fs = std::filesystem;
using stasis::testing::LayerWorkspace;
using stasis::testing::TarCharDevice;
using stasis::testing::TarDir;
using stasis::testing::TarFifo;
using stasis::testing::TarFile;
using stasis::testing::TarHardlink;
using stasis::testing::TarMember;
using stasis::testing::TarSymlink;
using ::testing::HasSubstr;

const std::string kProbe = LayerWorkspace::kEtcProbe;
const std::string kViaSymlink = "under the symlink";

// A lower layer whose symlinks lead out of the root: "etc" to the host's /etc (absolute),
// "up" to the root's parent (where outside/ is), "deep/x" to the sentinel directory by "../..".
std::vector<TarMember> LowerWithSymlinks() {
  return {TarSymlink("etc", "/etc"), TarSymlink("up", ".."), TarDir("deep"), TarSymlink("deep/x", "../../outside"),
          TarFile("ok", "fine")};
}

// Applies `lower` then `upper` on a fresh root; expects `upper` refused naming `member`, and
// nothing written outside the root.
// `why`, when given, is part of the reason the refusal must give.
void ExpectRefused(const std::vector<TarMember>& lower, const std::vector<TarMember>& upper,
                   const std::string& member, const std::string& why = "", const UnpackOptions& options = {}) {
  SCOPED_TRACE("member " + member);
  LayerWorkspace ws;
  if (!lower.empty()) {
    auto l = ws.Apply(lower);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
  }
  auto r = ws.Apply(upper, stasis::testing::TarFilter::kGzip, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), kBadLayer);
  EXPECT_THAT(r.status().message(), HasSubstr("\"" + member + "\""));
  EXPECT_THAT(r.status().message(), HasSubstr(why));
  EXPECT_EQ(ws.Escapes(), "");
}

TEST(LayerRefusalTest, AbsoluteAndDotDotNames) {
  ExpectRefused({}, {TarFile("/etc/" + kProbe, "x")}, "/etc/" + kProbe);
  ExpectRefused({}, {TarFile("../outside/evil", "x")}, "../outside/evil");
  ExpectRefused({}, {TarDir("a"), TarFile("a/../../outside/evil", "x")}, "a/../../outside/evil");
  ExpectRefused({}, {TarFile("./../outside/sentinel", "overwritten")}, "./../outside/sentinel");
}

TEST(LayerRefusalTest, TheRootAsAnythingButADirectory) {
  ExpectRefused({}, {TarFile(".", "x")}, ".", "names the root");
  ExpectRefused({}, {TarSymlink(".", "/etc")}, ".", "names the root");
}

TEST(LayerRefusalTest, WritesThroughALowerLayersSymlink) {
  ExpectRefused(LowerWithSymlinks(), {TarFile("etc/" + kProbe, "x")}, "etc/" + kProbe, kViaSymlink);
  ExpectRefused(LowerWithSymlinks(), {TarFile("up/outside/evil", "x")}, "up/outside/evil", kViaSymlink);
  ExpectRefused(LowerWithSymlinks(), {TarFile("up/outside/sentinel", "overwritten")}, "up/outside/sentinel",
                kViaSymlink);
  // The writer adds the "/" to a directory's name.
  ExpectRefused(LowerWithSymlinks(), {TarDir("deep/x/newdir")}, "deep/x/newdir/", kViaSymlink);
  ExpectRefused(LowerWithSymlinks(), {TarSymlink("deep/x/link", "/")}, "deep/x/link", kViaSymlink);
}

TEST(LayerRefusalTest, WritesThroughASymlinkOfTheSameLayer) {
  ExpectRefused({}, {TarSymlink("link", "../outside"), TarFile("link/evil", "x")}, "link/evil", kViaSymlink);
  ExpectRefused({}, {TarSymlink("etc", "/etc"), TarFile("etc/" + kProbe, "x")}, "etc/" + kProbe, kViaSymlink);
  ExpectRefused({}, {TarDir("d"), TarSymlink("d/up", "../.."), TarDir("d/up/outside/new")}, "d/up/outside/new/",
                kViaSymlink);
}

TEST(LayerRefusalTest, WhiteoutsThroughASymlink) {
  ExpectRefused(LowerWithSymlinks(), {TarFile("up/outside/.wh.sentinel", "")}, "up/outside/.wh.sentinel",
                kViaSymlink);
  ExpectRefused(LowerWithSymlinks(), {TarFile("deep/x/.wh..wh..opq", "")}, "deep/x/.wh..wh..opq", kViaSymlink);
  ExpectRefused({}, {TarFile(".wh..", "")}, ".wh..", "is a whiteout of");
  ExpectRefused({}, {TarFile("a/.wh.", "")}, "a/.wh.", "is a whiteout of");
  ExpectRefused({}, {TarFile(".wh...", "")}, ".wh...", "is a whiteout of");
}

TEST(LayerRefusalTest, HardlinksOutOfTheRoot) {
  ExpectRefused({}, {TarHardlink("h", "/etc/passwd")}, "h", "hardlink whose target");
  ExpectRefused({}, {TarHardlink("h", "../outside/sentinel")}, "h", "hardlink whose target");
  ExpectRefused({}, {TarDir("a"), TarHardlink("a/h", "a/../../outside/sentinel")}, "a/h", "hardlink whose target");
  ExpectRefused(LowerWithSymlinks(), {TarHardlink("h", "up/outside/sentinel")}, "h", kViaSymlink);
  ExpectRefused(LowerWithSymlinks(), {TarHardlink("h", "etc/passwd")}, "h", kViaSymlink);
  ExpectRefused({}, {TarHardlink("h", "missing")}, "h", "does not exist");
  ExpectRefused({}, {TarDir("d"), TarHardlink("h", "d")}, "h", "to the directory");
  ExpectRefused({TarFile("h", "lower")}, {TarHardlink("h", "h")}, "h", "to itself");
}

TEST(LayerRefusalTest, DevicesAndFifosUnlessTheNodeAllowsThem) {
  ExpectRefused({}, {TarDir("dev"), TarCharDevice("dev/null")}, "dev/null", "is a device");
  ExpectRefused({}, {TarFifo("pipe")}, "pipe", "is a FIFO");
  LayerWorkspace ws;
  UnpackOptions allow;
  allow.allow_devices = true;
  auto r = ws.Apply({TarDir("dev"), TarCharDevice("dev/null"), TarFifo("pipe")}, stasis::testing::TarFilter::kNone,
                    allow);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  struct stat st {};
  ASSERT_EQ(lstat((ws.rootfs() / "dev/null").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  ASSERT_EQ(lstat((ws.rootfs() / "pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(LayerRefusalTest, ARefusalStopsTheLayerAtThatMember) {
  LayerWorkspace ws;
  auto r = ws.Apply({TarFile("first", "1"), TarFile("../evil", "x"), TarFile("after", "2")});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(fs::exists(ws.rootfs() / "first"));
  EXPECT_FALSE(fs::exists(ws.rootfs() / "after"));
}

// libarchive sets a directory's mode and time when the layer ends: by then a later member may
// have put a symlink in its place, which must not carry them out of the root.
TEST(LayerRefusalTest, ADirectoryReplacedByASymlinkLeavesItsTargetAlone) {
  LayerWorkspace ws;
  struct stat before {};
  ASSERT_EQ(stat(ws.outside().c_str(), &before), 0);
  auto r = ws.Apply({TarDir("d", 0700), TarSymlink("d", "../outside")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  struct stat after {};
  ASSERT_EQ(stat(ws.outside().c_str(), &after), 0);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(after.st_mtime, before.st_mtime);
  EXPECT_EQ(fs::read_symlink(ws.rootfs() / "d"), "../outside");
  EXPECT_EQ(ws.Escapes(), "");
}

TEST(LayerRefusalTest, SymlinksPointingOutAreWrittenAsTheyAre) {
  LayerWorkspace ws;
  auto r = ws.Apply(LowerWithSymlinks());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(fs::read_symlink(ws.rootfs() / "etc"), "/etc");
  EXPECT_EQ(fs::read_symlink(ws.rootfs() / "deep/x"), "../../outside");
  EXPECT_EQ(ws.Escapes(), "");
}

}  // namespace
}  // namespace stasis::images
