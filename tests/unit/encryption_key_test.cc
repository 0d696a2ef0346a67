// The object store's encryption key: key files (32 raw bytes or 64 hex, never readable by group
// or others, never echoed; a Secret volume's symlink followed) and the key id (stable, one-way).
#include "snapshots/encryption_key.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "base/sha256.h"
#include "snapshots/snapshot_reasons.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

const std::string kHexKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

std::string WriteKey(const TempDir& dir, const std::string& name, const std::string& content, mode_t mode) {
  const fs::path p = dir.path() / name;
  std::ofstream(p, std::ios::binary) << content;
  chmod(p.c_str(), mode);
  return p.string();
}

TEST(EncryptionKeyFile, Reads32RawBytesOr64HexDigits) {
  TempDir dir;
  auto hex = LoadEncryptionKeyFile(WriteKey(dir, "hex", kHexKey + "\n", 0400));
  ASSERT_TRUE(hex.ok()) << hex.status().ToString();
  auto raw = LoadEncryptionKeyFile(WriteKey(dir, "raw", *HexDecode(kHexKey), 0600));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(hex->id(), raw->id()) << "the same key either way";
  EXPECT_EQ(hex->id().size(), 16u);
  EXPECT_EQ(hex->id(), EncryptionKeyId(*HexDecode(kHexKey)));
  EXPECT_EQ(hex->id(), Sha256Hex(std::string("stasis snapshot-store encryption key id v1", 43) + *HexDecode(kHexKey)).substr(0, 16))
      << "the id is a documented function of the key: changing it orphans every snapshot's key id";
  // A Secret volume's file is a symbolic link into ..data/: followed.
  fs::create_symlink(dir.path() / "hex", dir.path() / "link");
  EXPECT_TRUE(LoadEncryptionKeyFile((dir.path() / "link").string()).ok());
}

TEST(EncryptionKeyFile, RefusesWhatIsNoKeyOrReadableByOthersNeverEchoingIt) {
  TempDir dir;
  struct Case {
    std::string file;
    const char* want;
  };
  const std::vector<Case> cases = {
      {WriteKey(dir, "group", kHexKey, 0640), "has mode 0640: its group or others may access it; make it 0400"},
      {WriteKey(dir, "world", kHexKey, 0604), "has mode 0604"},
      {WriteKey(dir, "short", kHexKey.substr(2), 0400), "holds 62 bytes: want exactly 32 raw bytes or 64 hex digits"},
      {WriteKey(dir, "nothex", std::string(64, 'g'), 0400), "want exactly 32 raw bytes or 64 hex digits"},
      {WriteKey(dir, "zero", std::string(32, '\0'), 0400), "all zero bytes"},
      {(dir.path() / "missing").string(), "No such file"},
      {dir.path().string(), "not a regular file"},
  };
  chmod(dir.path().c_str(), 0700);
  for (const Case& c : cases) {
    auto r = LoadEncryptionKeyFile(c.file);
    ASSERT_FALSE(r.ok()) << c.file;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.file;
    EXPECT_EQ(r.status().reason(), snapshot_reason::kStoreConfigInvalid);
    EXPECT_THAT(r.status().message(), HasSubstr(c.want));
    EXPECT_THAT(r.status().message(), HasSubstr("--snapshot-store-encryption-key " + c.file));
    EXPECT_THAT(r.status().message(), Not(HasSubstr(kHexKey.substr(4, 20))));
  }
}

}  // namespace
}  // namespace stasis
