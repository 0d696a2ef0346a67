// bundle_confinement: a bundle is used only under an allowed root, with no symlink on its path,
// its config.json a regular file, its root filesystem and bind sources under the same root, and
// no host-side hooks; the roots themselves never hold the agent's own directories.
#include "runtimes/bundle_confinement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::TempDir;

class BundleConfinementTest : public ::testing::Test {
 protected:
  BundleConfinementTest() : dir_("stasis-confine-") {
    root_ = dir_.path() / "bundles";
    bundle_ = root_ / "app";
    fs::create_directories(bundle_ / "rootfs");
    fs::create_directories(root_ / "data");
    WriteConfig(bundle_, {});
    roots_.roots = {root_.string()};
  }

  static void WriteConfig(const fs::path& bundle, const std::vector<json>& mounts, json extra = json::object()) {
    json config = {{"root", {{"path", "rootfs"}}}, {"mounts", json::array()}};
    for (const auto& m : mounts) config["mounts"].push_back(m);
    config.update(extra);
    std::ofstream(bundle / "config.json") << config.dump();
  }
  static json Bind(const std::string& source) {
    return {{"destination", "/data"}, {"type", "bind"}, {"source", source}, {"options", {"rbind", "rw"}}};
  }
  Status Check(const fs::path& bundle, const std::string& ns = "default") {
    auto r = ConfineBundle(bundle.string(), ns, roots_);
    return r.ok() ? OkStatus() : r.status();
  }
  void ExpectRefused(const fs::path& bundle, const std::string& why, const std::string& ns = "default") {
    Status s = Check(bundle, ns);
    EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
    EXPECT_EQ(s.reason(), kBundleNotAllowed) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(why));
  }

  TempDir dir_;
  fs::path root_, bundle_;
  BundleRoots roots_;
};

TEST_F(BundleConfinementTest, AllowsABundleUnderARootWithItsBindSource) {
  WriteConfig(bundle_, {Bind((root_ / "data").string()), {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}}});
  auto r = ConfineBundle(bundle_.string(), "default", roots_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, root_.string());
}

TEST_F(BundleConfinementTest, RefusesEverythingWithoutARoot) {
  roots_.roots.clear();
  ExpectRefused(bundle_, "--bundle-root");
}

TEST_F(BundleConfinementTest, RefusesABundleOutsideTheRoots) {
  const fs::path outside = dir_.path() / "elsewhere";
  fs::create_directories(outside / "rootfs");
  WriteConfig(outside, {});
  ExpectRefused(outside, "not under an allowed bundle root");
  ExpectRefused(root_, "not under an allowed bundle root");  // the root itself is no bundle
  ExpectRefused(root_.string() + "/../elsewhere", "\"..\" component");
  ExpectRefused("relative/bundle", "not an absolute path");
}

TEST_F(BundleConfinementTest, RefusesASymlinkedComponentOrBundle) {
  const fs::path outside = dir_.path() / "elsewhere";
  fs::create_directories(outside / "app" / "rootfs");
  WriteConfig(outside / "app", {});
  fs::create_directory_symlink(outside, root_ / "link");
  ExpectRefused(root_ / "link" / "app", "is a symlink");  // a component
  fs::create_directory_symlink(outside / "app", root_ / "app2");
  ExpectRefused(root_ / "app2", "is a symlink");  // the bundle itself
}

TEST_F(BundleConfinementTest, RefusesASymlinkedConfig) {
  const fs::path outside = dir_.path() / "evil.json";
  std::ofstream(outside) << json{{"root", {{"path", "rootfs"}}}}.dump();
  fs::remove(bundle_ / "config.json");
  fs::create_symlink(outside, bundle_ / "config.json");
  ExpectRefused(bundle_, "config.json is a symlink");
}

TEST_F(BundleConfinementTest, RefusesBindSourcesThatEscape) {
  WriteConfig(bundle_, {Bind("/var/lib/stasis")});
  ExpectRefused(bundle_, "/var/lib/stasis is not under the bundle's root");
  WriteConfig(bundle_, {Bind("../../")});
  ExpectRefused(bundle_, "\"..\" component");
  WriteConfig(bundle_, {Bind(root_.string())});  // the whole root: every other bundle
  ExpectRefused(bundle_, "is not under the bundle's root");
  fs::create_directory_symlink(dir_.path(), root_ / "up");
  WriteConfig(bundle_, {Bind((root_ / "up").string())});
  ExpectRefused(bundle_, "is a symlink");
  // Options alone make a bind mount (runc's convention: type "none").
  WriteConfig(bundle_, {{{"destination", "/x"}, {"type", "none"}, {"source", "/etc"}, {"options", {"bind"}}}});
  ExpectRefused(bundle_, "/etc is not under");
}

TEST_F(BundleConfinementTest, ReadOnlySourcesAllowOnlyReadOnlyBinds) {
  const fs::path usr = dir_.path() / "usr";
  fs::create_directories(usr / "lib");
  roots_.readonly_sources = {usr.string()};
  json ro = {{"destination", "/usr"}, {"type", "bind"}, {"source", usr.string()}, {"options", {"rbind", "ro"}}};
  WriteConfig(bundle_, {ro});
  EXPECT_TRUE(Check(bundle_).ok()) << Check(bundle_).ToString();
  ro["source"] = (usr / "lib").string();
  WriteConfig(bundle_, {ro});
  EXPECT_TRUE(Check(bundle_).ok()) << "a directory under a read-only source";
  WriteConfig(bundle_, {{{"destination", "/usr"}, {"type", "bind"}, {"source", usr.string()}, {"options", {"rbind", "rw"}}}});
  ExpectRefused(bundle_, "is not under the bundle's root");  // writable: refused
  fs::create_directory_symlink(dir_.path(), usr / "up");
  ro["source"] = (usr / "up").string();
  WriteConfig(bundle_, {ro});
  ExpectRefused(bundle_, "is not under the bundle's root");  // through a symlink: refused
  AgentDirs own{(dir_.path() / "state").string(), {(dir_.path() / "state" / "run").string()}};
  EXPECT_TRUE(ValidateBundleRoots(roots_, own).ok());
  EXPECT_THAT(ValidateBundleRoots(BundleRoots{roots_.roots, false, {dir_.path().string()}}, own).message(),
              HasSubstr("overlaps the agent's"));
  EXPECT_THAT(ValidateBundleRoots(BundleRoots{roots_.roots, false, {"/"}}, own).message(), HasSubstr("whole file system"));
}

TEST_F(BundleConfinementTest, RefusesARootFilesystemOutsideTheRoot) {
  WriteConfig(bundle_, {}, {{"root", {{"path", "/"}}}});
  ExpectRefused(bundle_, "root.path");
}

TEST_F(BundleConfinementTest, RefusesHostControl) {
  WriteConfig(bundle_, {}, {{"hooks", {{"prestart", {{{"path", "/bin/sh"}}}}}}});
  ExpectRefused(bundle_, "hooks");
  WriteConfig(bundle_, {}, {{"linux", {{"namespaces", {{{"type", "network"}, {"path", "/proc/1/ns/net"}}}}}}});
  ExpectRefused(bundle_, "/proc/1/ns/net");
  WriteConfig(bundle_, {}, {{"linux", {{"devices", {{{"path", "/dev/sda"}}}}}}});
  ExpectRefused(bundle_, "linux.devices");
}

TEST_F(BundleConfinementTest, PerNamespaceRootsSeparateNamespaces) {
  roots_.per_namespace = true;
  fs::create_directories(root_ / "team-a" / "app" / "rootfs");
  fs::create_directories(root_ / "team-a" / "data");
  WriteConfig(root_ / "team-a" / "app", {Bind((root_ / "team-a" / "data").string())});
  EXPECT_TRUE(Check(root_ / "team-a" / "app", "team-a").ok());
  ExpectRefused(root_ / "team-a" / "app", (root_ / "team-b").string(), "team-b");
  // A bind source in another namespace's tree is outside this bundle's root.
  WriteConfig(root_ / "team-a" / "app", {Bind((root_ / "data").string())});
  ExpectRefused(root_ / "team-a" / "app", "is not under the bundle's root", "team-a");
}

TEST_F(BundleConfinementTest, MissingPiecesAreBadBundlesNotRefusals) {
  Status s = Check(root_ / "missing");
  EXPECT_EQ(s.reason(), "bad_bundle") << s.ToString();
  WriteConfig(bundle_, {}, {{"root", {{"path", "missing-rootfs"}}}});
  EXPECT_TRUE(Check(bundle_).ok()) << "runsc's bundle check names the missing root filesystem";
}

TEST_F(BundleConfinementTest, RootsNeverHoldTheAgentsOwnDirectories) {
  const fs::path state = dir_.path();
  AgentDirs own{state.string(), {(state / "run").string(), (state / "store").string(),
                                 (state / "secrets" / "serviceaccount").string()}};
  fs::create_directories(state / "secrets" / "serviceaccount");
  EXPECT_TRUE(ValidateBundleRoots(roots_, own).ok()) << "a root beside the agent's directories, under --root";
  for (const auto& [root, why] : std::vector<std::pair<std::string, std::string>>{
           {"/", "whole file system"},
           {state.string(), "holds the agent's --root"},
           {(state / "store" / "x").string(), "lies inside the agent's own directory"},
           {(state / "secrets").string(), "holds the agent's own directory"},
           {(state / "nonexistent").string(), "No such file"},
           {"relative", "absolute"}}) {
    fs::create_directories(state / "store" / "x");
    Status s = ValidateBundleRoots(BundleRoots{{root}, false, {}}, own);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << root;
    EXPECT_THAT(s.message(), HasSubstr(why)) << root;
  }
  fs::create_directory_symlink(root_, state / "linked");
  EXPECT_THAT(ValidateBundleRoots(BundleRoots{{(state / "linked").string()}, false, {}}, own).message(),
              HasSubstr("is a symlink"));
}

TEST(LexicalPathProblem, NamesTheRule) {
  EXPECT_EQ(LexicalPathProblem("/a/b"), "");
  EXPECT_THAT(LexicalPathProblem("a/b"), HasSubstr("absolute"));
  EXPECT_THAT(LexicalPathProblem("/a/../b"), HasSubstr(".."));
  EXPECT_THAT(LexicalPathProblem("/a/./b"), HasSubstr("\".\""));
  EXPECT_THAT(LexicalPathProblem("/a//b"), HasSubstr("empty component"));
}

}  // namespace
}  // namespace stasis
