// microvm.json validation: the fields that reach QEMU's argv, and paths confined under the
// bundle directory (a '..', an absolute path or a symlink out of it is refused).
#include "runtimes/microvm_bundle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

class MicrovmBundleTest : public ::testing::Test {
 protected:
  MicrovmBundleTest() : dir_("stasis-microvm-bundle-") {
    std::ofstream(dir_.path() / "vmlinuz") << "kernel";
    std::ofstream(dir_.path() / "initramfs.gz") << "initramfs";
  }
  void Write(const std::string& json) { std::ofstream(dir_.path() / "microvm.json") << json; }
  Result<MicrovmBundle> Load() { return LoadMicrovmBundle(dir_.path().string()); }
  void ExpectBad(const std::string& json, const std::string& why) {
    Write(json);
    auto b = Load();
    ASSERT_FALSE(b.ok()) << json;
    EXPECT_EQ(b.status().code(), Code::kInvalidArgument) << json;
    EXPECT_EQ(b.status().reason(), "bad_bundle") << json;
    EXPECT_THAT(b.status().message(), HasSubstr(why)) << json;
  }
  TempDir dir_;
};

TEST_F(MicrovmBundleTest, AValidBundleResolvesUnderItsDirectory) {
  Write(R"({"kernel": "vmlinuz", "initramfs": "./initramfs.gz", "memoryMiB": 128, "vcpus": 2,
            "cmdline": "console=ttyS0 panic=-1"})");
  auto b = Load();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const fs::path dir = fs::canonical(dir_.path());
  EXPECT_EQ(b->dir, dir.string());
  EXPECT_EQ(b->kernel, (dir / "vmlinuz").string());
  EXPECT_EQ(b->initramfs, (dir / "initramfs.gz").string());
  EXPECT_EQ(b->memory_mib, 128);
  EXPECT_EQ(b->vcpus, 2);
  EXPECT_EQ(b->cmdline, "console=ttyS0 panic=-1");
}

TEST_F(MicrovmBundleTest, DefaultsForOptionalFields) {
  Write(R"({"kernel": "vmlinuz"})");
  auto b = Load();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->initramfs, "");
  EXPECT_EQ(b->memory_mib, 256);
  EXPECT_EQ(b->vcpus, 1);
  EXPECT_EQ(b->cmdline, "console=ttyS0 panic=-1");
}

TEST_F(MicrovmBundleTest, RefusesPathsOutOfTheBundle) {
  ExpectBad(R"({"kernel": "/boot/vmlinuz"})", "kernel: must be a path relative");
  ExpectBad(R"({"kernel": "../vmlinuz"})", "kernel: must not contain a '..' segment");
  ExpectBad(R"({"kernel": "a/../../vmlinuz"})", "must not contain a '..' segment");
  TempDir outside("stasis-microvm-outside-");
  std::ofstream(outside.path() / "secret") << "x";
  fs::create_symlink(outside.path() / "secret", dir_.path() / "link");
  ExpectBad(R"({"kernel": "link"})", "kernel: resolves outside the bundle directory");
  ExpectBad(R"({"kernel": "vmlinuz", "initramfs": "missing.gz"})", "initramfs:");
  fs::create_directory(dir_.path() / "sub");
  ExpectBad(R"({"kernel": "sub"})", "kernel: not a regular file");
  ExpectBad(R"({"kernel": ""})", "kernel: must not be empty");
  ExpectBad(R"({"kernel": 3})", "kernel: must be a string");
}

TEST_F(MicrovmBundleTest, RefusesBadFields) {
  ExpectBad(R"({})", "no kernel");
  ExpectBad(R"([1])", "not an object");
  ExpectBad(R"({"kernel": "vmlinuz", "memoryMiB": 8})", "memoryMiB: must be between 64 and 65536");
  ExpectBad(R"({"kernel": "vmlinuz", "memoryMiB": "256"})", "memoryMiB: must be an integer");
  ExpectBad(R"({"kernel": "vmlinuz", "vcpus": 0})", "vcpus: must be between 1 and 32");
  ExpectBad(R"({"kernel": "vmlinuz", "cmdline": "a\nb"})", "cmdline: only printable ASCII");
  ExpectBad(R"({"kernel": "vmlinuz", "cmdline": ")" + std::string(3000, 'x') + R"("})",
            "cmdline: longer than 2048");
  ExpectBad(R"({"kernel": "vmlinuz", "device": "vfio-pci"})", "unknown field \"device\"");
  ExpectBad(R"({"kernel": )", "microvm.json:");
}

TEST(MicrovmBundleLoadTest, RefusesAMissingDirectoryOrFile) {
  auto b = LoadMicrovmBundle("/nonexistent-stasis-bundle");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("not a directory"));
  TempDir empty("stasis-microvm-bundle-");
  b = LoadMicrovmBundle(empty.path().string());
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("cannot read microvm.json"));
  EXPECT_FALSE(LoadMicrovmBundle("").ok());
}

}  // namespace
}  // namespace stasis
