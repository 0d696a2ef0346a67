// PrepareSandboxCgroups on cgroup trees laid out like the kernel's (v1 hierarchies, v2's one),
// in a temporary directory: which cgroups it makes, which cgroup.procs files it returns, cpuset's
// CPUs and memory nodes, and its refusals.
#include "runtimes/sandbox_cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace stasis {
namespace {

namespace fs = std::filesystem;

class SandboxCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("stasis-cgroup-test-" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Touch(const fs::path& p, const std::string& content = "") {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  std::string Read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path root_;
};

TEST_F(SandboxCgroupTest, CgroupV1JoinsEveryHierarchyAndGivesCpusetItsParentsCpus) {
  for (const char* h : {"memory", "pids", "cpu,cpuacct", "freezer"}) Touch(root_ / h / "cgroup.procs");
  fs::create_directory_symlink("cpu,cpuacct", root_ / "cpu");  // a link to a hierarchy: skipped
  Touch(root_ / "cpuset" / "cgroup.procs");
  Touch(root_ / "cpuset" / "cpuset.cpus", "0-15\n");
  Touch(root_ / "cpuset" / "cpuset.mems", "0\n");
  // What the kernel puts in a new cpuset cgroup (empty files), made ahead of the call here.
  Touch(root_ / "cpuset" / kSandboxCgroupName / "cpuset.cpus");
  Touch(root_ / "cpuset" / kSandboxCgroupName / "cpuset.mems");
  fs::create_directories(root_ / "not-a-hierarchy");

  auto procs = PrepareSandboxCgroups(root_.string());
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  std::vector<std::string> want;
  for (const char* h : {"cpu,cpuacct", "cpuset", "freezer", "memory", "pids"}) {
    want.push_back((root_ / h / kSandboxCgroupName / "cgroup.procs").string());
    EXPECT_TRUE(fs::is_directory(root_ / h / kSandboxCgroupName)) << h;
  }
  EXPECT_EQ(*procs, want);
  EXPECT_EQ(Read(root_ / "cpuset" / kSandboxCgroupName / "cpuset.cpus"), "0-15\n");
  EXPECT_EQ(Read(root_ / "cpuset" / kSandboxCgroupName / "cpuset.mems"), "0\n");
  EXPECT_FALSE(fs::exists(root_ / "not-a-hierarchy" / kSandboxCgroupName));

  // A second agent (a restart) finds the cgroups made and gets the same files.
  auto again = PrepareSandboxCgroups(root_.string());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, want);
}

TEST_F(SandboxCgroupTest, CgroupV2JoinsTheOneHierarchy) {
  Touch(root_ / "cgroup.controllers", "cpu memory pids\n");
  Touch(root_ / "cgroup.procs");
  Touch(root_ / "kubepods" / "cgroup.procs");  // a cgroup of the v2 root, not a hierarchy
  auto procs = PrepareSandboxCgroups(root_.string());
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  EXPECT_EQ(*procs, std::vector<std::string>{(root_ / kSandboxCgroupName / "cgroup.procs").string()});
}

TEST_F(SandboxCgroupTest, RefusesARelativeRootAndOneWithoutHierarchies) {
  auto relative = PrepareSandboxCgroups("host/sys/fs/cgroup");
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.status().code(), Code::kInvalidArgument);

  auto empty = PrepareSandboxCgroups(root_.string());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(empty.status().message().find("no cgroup hierarchy under " + root_.string()), std::string::npos)
      << empty.status().ToString();

  auto missing = PrepareSandboxCgroups((root_ / "absent").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace stasis
