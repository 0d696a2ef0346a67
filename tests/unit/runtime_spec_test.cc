// The runtime spec of an actor started from an image (images/runtime_spec.h): Kubernetes'
// command/args rules over Entrypoint/Cmd, the environment merged in place, the working
// directory and numeric user, the refusals, and the fixed parts compared with what
// hack/make-bundle.sh gives runsc (root, mounts, capabilities, namespaces).
#include "images/runtime_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stasis::images {
namespace {

using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
using Strings = std::vector<std::string>;

RuntimeSpecRequest Request() {
  RuntimeSpecRequest r;
  r.image.entrypoint = {"/entry"};
  r.image.cmd = {"--from-image"};
  r.image.env = {"PATH=/image/bin", "LANG=C"};
  r.rootfs = "/var/lib/stasis/images/unpacked/abc/rootfs";
  r.hostname = "actor-a";
  return r;
}

Strings Args(const RuntimeSpecRequest& r) {
  auto spec = BuildRuntimeSpec(r);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? (*spec)["process"]["args"].get<Strings>() : Strings{};
}

TEST(RuntimeSpecTest, CommandAndArgsFollowKubernetesRules) {
  RuntimeSpecRequest r = Request();
  EXPECT_THAT(Args(r), ElementsAre("/entry", "--from-image"));
  r.args = {"--mine"};
  EXPECT_THAT(Args(r), ElementsAre("/entry", "--mine"));  // args replace Cmd only
  r.command = {"/bin/sh", "-c"};
  EXPECT_THAT(Args(r), ElementsAre("/bin/sh", "-c", "--mine"));
  r.args.clear();
  EXPECT_THAT(Args(r), ElementsAre("/bin/sh", "-c"));  // command alone drops the image's Cmd
}

TEST(RuntimeSpecTest, CmdAloneRunsWhenTheImageHasNoEntrypoint) {
  RuntimeSpecRequest r = Request();
  r.image.entrypoint.clear();
  EXPECT_THAT(Args(r), ElementsAre("--from-image"));
}

TEST(RuntimeSpecTest, ActorEnvOverridesInPlaceAndAppendsTheRest) {
  RuntimeSpecRequest r = Request();
  r.env = {{"LANG", "C.UTF-8"}, {"EXTRA", "1"}, {"PATH", "/mine"}};
  auto spec = BuildRuntimeSpec(r);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_THAT((*spec)["process"]["env"].get<Strings>(), ElementsAre("PATH=/mine", "LANG=C.UTF-8", "EXTRA=1"));
}

TEST(RuntimeSpecTest, PathDefaultsToContainerdsWhenNobodySetsIt) {
  RuntimeSpecRequest r = Request();
  r.image.env = {"A=1"};
  auto spec = BuildRuntimeSpec(r);
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT((*spec)["process"]["env"].get<Strings>(),
              ElementsAre("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "A=1"));
}

TEST(RuntimeSpecTest, WorkingDirectoryActorThenImageThenRoot) {
  RuntimeSpecRequest r = Request();
  EXPECT_EQ((*BuildRuntimeSpec(r))["process"]["cwd"], "/");
  r.image.working_dir = "/app";
  EXPECT_EQ((*BuildRuntimeSpec(r))["process"]["cwd"], "/app");
  r.working_dir = "/work";
  EXPECT_EQ((*BuildRuntimeSpec(r))["process"]["cwd"], "/work");
}

TEST(RuntimeSpecTest, UserIsNumericAndRootWhenUnset) {
  RuntimeSpecRequest r = Request();
  EXPECT_EQ((*BuildRuntimeSpec(r))["process"]["user"], (nlohmann::json{{"uid", 0}, {"gid", 0}}));
  r.image.user = "1000";
  EXPECT_EQ((*BuildRuntimeSpec(r))["process"]["user"], (nlohmann::json{{"uid", 1000}, {"gid", 0}}));
  r.image.user = "1000:2000";
  EXPECT_EQ((*BuildRuntimeSpec(r))["process"]["user"], (nlohmann::json{{"uid", 1000}, {"gid", 2000}}));
}

void ExpectBad(const RuntimeSpecRequest& r, const std::string& what) {
  auto spec = BuildRuntimeSpec(r);
  ASSERT_FALSE(spec.ok()) << what;
  EXPECT_EQ(spec.status().code(), Code::kInvalidArgument) << what;
  EXPECT_EQ(spec.status().reason(), "bad_image_config") << what;
}

TEST(RuntimeSpecTest, RefusesWhatCannotRun) {
  RuntimeSpecRequest r = Request();
  r.image.entrypoint.clear();
  r.image.cmd.clear();
  ExpectBad(r, "nothing to run");
  for (const char* user : {"nobody", "1000:staff", "1000:", ":1000", "-1", "99999999999", "10x", "1000:20x"}) {
    RuntimeSpecRequest named = Request();
    named.image.user = user;
    ExpectBad(named, std::string("user ") + user);
  }
  RuntimeSpecRequest relative = Request();
  relative.working_dir = "app";
  ExpectBad(relative, "relative working directory");
  RuntimeSpecRequest image_relative = Request();
  image_relative.image.working_dir = "app";
  ExpectBad(image_relative, "relative image working directory");
}

TEST(RuntimeSpecTest, FixedPartsMatchWhatRunscRunsHere) {
  auto spec = BuildRuntimeSpec(Request());
  ASSERT_TRUE(spec.ok());
  const auto& s = *spec;
  EXPECT_EQ(s["ociVersion"], "1.0.2");
  EXPECT_EQ(s["root"], (nlohmann::json{{"path", "/var/lib/stasis/images/unpacked/abc/rootfs"}, {"readonly", false}}));
  EXPECT_EQ(s["hostname"], "actor-a");
  EXPECT_EQ(s["process"]["terminal"], false);
  EXPECT_EQ(s["process"]["noNewPrivileges"], true);
  std::vector<std::string> destinations;
  for (const auto& m : s["mounts"]) destinations.push_back(m["destination"]);
  EXPECT_THAT(destinations, ElementsAre("/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys"));
  EXPECT_THAT(s["mounts"][5]["options"].get<Strings>(), IsSupersetOf({"ro"}));
  for (const char* set : {"bounding", "effective", "permitted"}) {
    const auto caps = s["process"]["capabilities"][set].get<Strings>();
    EXPECT_EQ(caps.size(), 14u) << set;
    EXPECT_THAT(caps, IsSupersetOf({"CAP_KILL", "CAP_CHOWN", "CAP_NET_BIND_SERVICE", "CAP_AUDIT_WRITE"})) << set;
  }
  EXPECT_FALSE(s["process"]["capabilities"].contains("ambient"));
  std::vector<std::string> namespaces;
  for (const auto& n : s["linux"]["namespaces"]) namespaces.push_back(n["type"]);
  EXPECT_THAT(namespaces, ElementsAre("pid", "ipc", "uts", "mount", "network"));
}

TEST(RuntimeSpecTest, RefusesARelativeRootfs) {
  RuntimeSpecRequest r = Request();
  r.rootfs = "rootfs";
  EXPECT_FALSE(BuildRuntimeSpec(r).ok());
}

}  // namespace
}  // namespace stasis::images
