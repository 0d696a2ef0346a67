// data_dirs: a dataDir maps to a host directory only through a bind mount of the bundle, never
// outside that mount's source; archives made with the real tar restore the directory exactly
// (contents replaced, not merged); hostile archives (written with Python's tarfile) are refused
// whole before anything is emptied, and never restored outside the bundle's root.
#include "snapshots/data_dirs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::TempDir;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class DataDirsTest : public ::testing::Test {
 protected:
  DataDirsTest() : dir_("stasis-data-dirs-") {
    bundle_ = dir_.path() / "bundle";
    host_ = dir_.path() / "host";
    fs::create_directories(bundle_ / "rootfs");
    fs::create_directories(host_ / "sub");
  }

  void WriteConfig(const std::vector<json>& mounts) {
    json config = {{"root", {{"path", "rootfs"}}}, {"mounts", json::array()}};
    for (const auto& m : mounts) config["mounts"].push_back(m);
    std::ofstream(bundle_ / "config.json") << config.dump();
  }
  json Bind(const std::string& dest, const std::string& source) {
    return {{"destination", dest}, {"type", "bind"}, {"source", source}, {"options", {"rbind", "rw"}}};
  }

  TempDir dir_;
  fs::path bundle_, host_;
};

TEST_F(DataDirsTest, MapsThroughTheInnermostBindMount) {
  fs::create_directories(dir_.path() / "other");
  WriteConfig({{{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"}},
               Bind("/data", host_.string()),
               // Options alone make a bind mount (runc's convention: type "none").
               {{"destination", "/data/inner"}, {"type", "none"}, {"source", (dir_.path() / "other").string()},
                {"options", {"bind"}}}});
  auto r = ResolveDataDirs(bundle_.string(), {"/data/sub/../sub/", "/data/inner"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].container_path, "/data/sub");
  EXPECT_EQ((*r)[0].host_path, fs::canonical(host_ / "sub").string());
  EXPECT_EQ((*r)[1].container_path, "/data/inner");
  EXPECT_EQ((*r)[1].host_path, fs::canonical(dir_.path() / "other").string());
  r = ResolveDataDirs(bundle_.string(), {"/data/"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].container_path, "/data");
  EXPECT_EQ((*r)[0].host_path, fs::canonical(host_).string());
}

TEST_F(DataDirsTest, RefusesWhatAFreshBootWouldNotKeep) {
  WriteConfig({{{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"}}, Bind("/data", host_.string())});
  auto expect_unusable = [&](const std::vector<std::string>& dirs, const std::string& why) {
    auto r = ResolveDataDirs(bundle_.string(), dirs);
    ASSERT_FALSE(r.ok()) << ::testing::PrintToString(dirs);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(r.status().reason(), "data_dir_unusable");
    EXPECT_THAT(r.status().message(), HasSubstr(why)) << r.status().message();
  };
  expect_unusable({"/tmp"}, "root filesystem");
  expect_unusable({"/dev/shm"}, "not a bind mount");
  expect_unusable({"/data/missing"}, "does not exist");
  expect_unusable({}, "at least one");
  expect_unusable({"/data", "/data/sub"}, "overlaps");
  // A symlink inside the mount's source that leads out of it.
  fs::create_directory_symlink("/etc", host_ / "escape");
  expect_unusable({"/data/escape"}, "outside the bind mount's source");
  // A bind mount whose source is not a directory.
  WriteConfig({Bind("/data", (dir_.path() / "nothing").string())});
  expect_unusable({"/data"}, "not a host directory");
}

TEST_F(DataDirsTest, ArchiveThenRestoreReplacesTheContents) {
  WriteConfig({Bind("/data", host_.string())});
  std::ofstream(host_ / "count") << "42\n";
  std::ofstream(host_ / "sub" / "nested") << "deep\n";
  fs::create_symlink("count", host_ / "link");
  auto dirs = ResolveDataDirs(bundle_.string(), {"/data"});
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  const fs::path image = dir_.path() / "image";
  fs::create_directories(image);
  ASSERT_TRUE(ArchiveDataDirs(*dirs, image.string(), std::chrono::seconds(30)).ok());
  EXPECT_TRUE(fs::is_regular_file(image / "data-0.tar"));
  const json index = json::parse(ReadFile(image / "data-dirs.json"));
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0].value("containerPath", ""), "/data");
  EXPECT_EQ(index[0].value("archive", ""), "data-0.tar");

  // What changed since is gone after the restore; what was archived is back.
  std::ofstream(host_ / "count") << "0\n";
  fs::remove_all(host_ / "sub");
  std::ofstream(host_ / "stray") << "x\n";
  Status s = RestoreDataDirs(bundle_.string(), image.string(), dir_.path().string(), std::chrono::seconds(30));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadFile(host_ / "count"), "42\n");
  EXPECT_EQ(ReadFile(host_ / "sub" / "nested"), "deep\n");
  EXPECT_TRUE(fs::is_symlink(host_ / "link"));
  EXPECT_FALSE(fs::exists(host_ / "stray"));
}

TEST_F(DataDirsTest, RestoreRefusesABadIndexAndAnUnmappedDirectory) {
  WriteConfig({Bind("/data", host_.string())});
  const fs::path image = dir_.path() / "image";
  fs::create_directories(image);
  Status s = RestoreDataDirs(bundle_.string(), image.string(), dir_.path().string(), std::chrono::seconds(30));
  EXPECT_EQ(s.reason(), "snapshot_corrupt") << s.ToString();
  std::ofstream(image / "data-dirs.json") << json::array({{{"containerPath", "/data"}, {"archive", "../x.tar"}}}).dump();
  s = RestoreDataDirs(bundle_.string(), image.string(), dir_.path().string(), std::chrono::seconds(30));
  EXPECT_EQ(s.reason(), "snapshot_corrupt") << s.ToString();
  // The bundle of the node that resumes no longer mounts the directory.
  fs::remove(image / "data-dirs.json");
  std::ofstream(image / "data-dirs.json") << json::array({{{"containerPath", "/srv"}, {"archive", "data-0.tar"}}}).dump();
  s = RestoreDataDirs(bundle_.string(), image.string(), dir_.path().string(), std::chrono::seconds(30));
  EXPECT_EQ(s.reason(), "data_dir_unusable") << s.ToString();
  // A broken archive is refused before the directory is emptied.
  fs::remove(image / "data-dirs.json");
  std::ofstream(image / "data-dirs.json") << json::array({{{"containerPath", "/data"}, {"archive", "data-0.tar"}}}).dump();
  std::ofstream(image / "data-0.tar") << "not a tar archive";
  std::ofstream(host_ / "keep") << "kept\n";
  s = RestoreDataDirs(bundle_.string(), image.string(), dir_.path().string(), std::chrono::seconds(30));
  EXPECT_EQ(s.reason(), "snapshot_corrupt") << s.ToString();
  EXPECT_EQ(ReadFile(host_ / "keep"), "kept\n");
  // A directory outside the confinement root (the bundle's --bundle-root) is never written.
  s = RestoreDataDirs(bundle_.string(), image.string(), bundle_.string(), std::chrono::seconds(30));
  EXPECT_EQ(s.reason(), "data_dir_unusable") << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("not under the bundle's root"));
}

// Archives as an attacker would write them (Python's tarfile): each is refused whole, before
// anything is emptied, and nothing lands outside the directory.
class HostileArchiveTest : public DataDirsTest {
 protected:
  // Restores a data-0.tar holding a good member, then one of tarfile's `type` (REGTYPE,
  // SYMTYPE, LNKTYPE, CHRTYPE, FIFOTYPE) named `name`, linking to `link`.
  Status RestoreWith(const std::string& type, const std::string& name, const std::string& link = "") {
    WriteConfig({Bind("/data", host_.string())});
    const fs::path image = dir_.path() / "image";
    fs::remove_all(image);
    fs::create_directories(image);
    std::ofstream(image / "data-dirs.json") << json::array({{{"containerPath", "/data"}, {"archive", "data-0.tar"}}}).dump();
    const std::string script =
        "import io, sys, tarfile\n"
        "t = tarfile.open(sys.argv[1], 'w')\n"
        "ok = tarfile.TarInfo('./ok'); ok.size = 2; t.addfile(ok, io.BytesIO(b'ok'))\n"
        "m = tarfile.TarInfo(sys.argv[3]); m.type = getattr(tarfile, sys.argv[2]); m.linkname = sys.argv[4]\n"
        "if m.type == tarfile.REGTYPE: m.size = 3; t.addfile(m, io.BytesIO(b'bad'))\n"
        "else: t.addfile(m)\n"
        "t.close()\n";
    auto r = RunCommand({"python3", "-c", script, (image / "data-0.tar").string(), type, name, link},
                        std::chrono::seconds(30));
    EXPECT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.status().ToString());
    fs::create_directories(dir_.path() / "outside");
    std::ofstream(host_ / "keep") << "kept\n";
    return RestoreDataDirs(bundle_.string(), image.string(), dir_.path().string(), std::chrono::seconds(30));
  }
  void ExpectRefused(const Status& s, const std::string& why) {
    EXPECT_EQ(s.reason(), "snapshot_corrupt") << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(why));
    EXPECT_EQ(ReadFile(host_ / "keep"), "kept\n") << "emptied before the refusal";
    EXPECT_FALSE(fs::exists(host_ / "ok")) << "unpacked before the refusal";
    EXPECT_TRUE(fs::is_empty(dir_.path() / "outside"));
  }
};

TEST_F(HostileArchiveTest, DotDotMember) { ExpectRefused(RestoreWith("REGTYPE", "../outside/x"), "\"..\" component"); }

TEST_F(HostileArchiveTest, AbsoluteMember) {
  ExpectRefused(RestoreWith("REGTYPE", (dir_.path() / "outside" / "x").string()), "absolute path");
}

TEST_F(HostileArchiveTest, SymlinkOut) {
  ExpectRefused(RestoreWith("SYMTYPE", "./up", "../outside"), "outside the directory");
  ExpectRefused(RestoreWith("SYMTYPE", "./abs", "/etc"), "absolute path");
}

TEST_F(HostileArchiveTest, HardlinkOut) {
  ExpectRefused(RestoreWith("LNKTYPE", "./hard", "../outside/x"), "hardlink");
  ExpectRefused(RestoreWith("LNKTYPE", "./hard", "/etc/shadow"), "hardlink");
}

TEST_F(HostileArchiveTest, DeviceAndFifo) {
  ExpectRefused(RestoreWith("CHRTYPE", "./null"), "device");
  ExpectRefused(RestoreWith("FIFOTYPE", "./pipe"), "FIFO");
}

TEST_F(HostileArchiveTest, MemberThroughASymlink) {
  // A symlink inside the tree is kept; a later member through it is refused (it could have
  // been retargeted by a member in between).
  WriteConfig({Bind("/data", host_.string())});
  const fs::path image = dir_.path() / "image";
  fs::create_directories(image);
  std::ofstream(image / "data-dirs.json") << json::array({{{"containerPath", "/data"}, {"archive", "data-0.tar"}}}).dump();
  const std::string script =
      "import io, sys, tarfile\n"
      "t = tarfile.open(sys.argv[1], 'w')\n"
      "l = tarfile.TarInfo('./in'); l.type = tarfile.SYMTYPE; l.linkname = 'sub'; t.addfile(l)\n"
      "f = tarfile.TarInfo('./in/x'); f.size = 1; t.addfile(f, io.BytesIO(b'x'))\n"
      "t.close()\n";
  auto r = RunCommand({"python3", "-c", script, (image / "data-0.tar").string()}, std::chrono::seconds(30));
  ASSERT_TRUE(r.ok() && r->success());
  std::ofstream(host_ / "keep") << "kept\n";
  Status s = RestoreDataDirs(bundle_.string(), image.string(), dir_.path().string(), std::chrono::seconds(30));
  EXPECT_EQ(s.reason(), "snapshot_corrupt") << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("lies under the symlink in"));
  EXPECT_EQ(ReadFile(host_ / "keep"), "kept\n");
}

// What a restore would refuse fails the checkpoint instead, while the actor still runs.
TEST_F(DataDirsTest, ArchiveRefusesWhatARestoreWouldRefuse) {
  WriteConfig({Bind("/data", host_.string())});
  fs::create_symlink("/etc", host_ / "etc");
  auto dirs = ResolveDataDirs(bundle_.string(), {"/data"});
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  const fs::path image = dir_.path() / "image";
  fs::create_directories(image);
  Status s = ArchiveDataDirs(*dirs, image.string(), std::chrono::seconds(30));
  EXPECT_EQ(s.reason(), "data_archive_failed") << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("absolute path"));
}

}  // namespace
}  // namespace stasis
