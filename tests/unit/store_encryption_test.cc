// The object store's encryption key and manifest object: key files (32 raw bytes or 64 hex,
// never readable by group or others, never echoed), the key id (stable, one-way), the sealed
// manifest (no plaintext in it, bound to its snapshot, refused by key id before anything else),
// and old manifests without a transform read as none/none.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "snapshots/encryption_key.h"
#include "snapshots/sha256.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/stored_manifest.h"
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

SnapshotManifest Manifest() {
  SnapshotManifest m;
  m.id = "s1";
  m.ns = "default";
  m.name = "counter";
  m.owner_uid = "uid-1";
  m.files = {SnapshotFile{"pages.img", 5, {Sha256Hex("hello")}, ""}};
  m.total_bytes = 5;
  m.chunk_list_sha256 = ChunkListSha256(m.files);
  return m;
}

EncryptionKey Key(char fill) { return *EncryptionKey::FromBytes(std::string(kEncryptionKeyBytes, fill)); }

TEST(StoredManifest, SealedWithAKeyItRevealsNothingAndOpensOnlyForItsSnapshotAndKey) {
  const EncryptionKey key = Key('k');
  SnapshotManifest m = Manifest();
  m.compression = Compression::kZstd;
  m.encryption = Encryption::kAes256Gcm;
  m.key_id = key.id();
  auto object = StoredManifestObject(m, &key);
  ASSERT_TRUE(object.ok()) << object.status().ToString();
  for (const std::string& secret : {m.owner_uid, m.files[0].chunks[0], m.chunk_list_sha256, std::string("pages.img")}) {
    EXPECT_THAT(*object, Not(HasSubstr(secret)));
  }
  EXPECT_THAT(*object, HasSubstr("\"keyId\":\"" + key.id() + "\""));

  auto back = ParseStoredManifest(*object, &key, "default/counter/s1", "s3://b/s1/manifest.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->chunk_list_sha256, m.chunk_list_sha256);
  EXPECT_EQ(back->compression, Compression::kZstd);
  EXPECT_EQ(back->encryption, Encryption::kAes256Gcm);
  EXPECT_EQ(back->key_id, key.id());

  // Copied under another snapshot's key in the store: does not authenticate.
  auto moved = ParseStoredManifest(*object, &key, "default/counter/s2", "s3://b/s2/manifest.json");
  EXPECT_EQ(moved.status().reason(), snapshot_reason::kSnapshotCorrupt);
  EXPECT_THAT(moved.status().message(), HasSubstr("failed authentication"));

  // Another key, or none: refused by name, both ids said.
  const EncryptionKey other = Key('o');
  auto wrong = ParseStoredManifest(*object, &other, "default/counter/s1", "s3://b/s1/manifest.json");
  EXPECT_EQ(wrong.status().reason(), snapshot_reason::kSnapshotKeyMismatch);
  EXPECT_EQ(wrong.status().message(), "snapshot s3://b/s1/manifest.json was encrypted with key id " + key.id() +
                                          "; this agent has key id " + other.id() +
                                          ": it needs the key the snapshot was written with");
  auto none = ParseStoredManifest(*object, nullptr, "default/counter/s1", "s3://b/s1/manifest.json");
  EXPECT_EQ(none.status().reason(), snapshot_reason::kSnapshotKeyMismatch);
  EXPECT_THAT(none.status().message(), HasSubstr("this agent has no key (--snapshot-store-encryption-key)"));

  // A flipped hex digit in the sealed text.
  std::string tampered = *object;
  const size_t at = tampered.find("\"sealed\":\"") + 40;
  tampered[at] = tampered[at] == '0' ? '1' : '0';
  EXPECT_EQ(ParseStoredManifest(tampered, &key, "default/counter/s1", "w").status().reason(),
            snapshot_reason::kSnapshotCorrupt);
}

TEST(StoredManifest, APlainManifestReadsAsBeforeAndOnlyWithoutAKey) {
  const SnapshotManifest m = Manifest();
  auto object = StoredManifestObject(m, nullptr);
  ASSERT_TRUE(object.ok());
  EXPECT_EQ(*object, ManifestText(m)) << "no transform, no new fields: the text of before";
  EXPECT_THAT(*object, Not(HasSubstr("compression")));
  auto back = ParseStoredManifest(*object, nullptr, "default/counter/s1", "w");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->compression, Compression::kNone);
  EXPECT_EQ(back->encryption, Encryption::kNone);
  // An agent with a key restores only what its key sealed: a plain manifest could be anyone's.
  const EncryptionKey key = Key('k');
  auto with_key = ParseStoredManifest(*object, &key, "default/counter/s1", "w");
  EXPECT_EQ(with_key.status().reason(), snapshot_reason::kSnapshotKeyMismatch);
  EXPECT_THAT(with_key.status().message(), HasSubstr("is not encrypted; this agent (key id " + key.id()));
  // A plain manifest that claims encryption is a forgery or a bug, and an unknown codec is a
  // newer stasis's: both refused.
  std::string claims = ManifestText(m);
  claims.insert(claims.find('{') + 1, "\"encryption\": \"aes-256-gcm\",");
  EXPECT_THAT(ParseStoredManifest(claims, nullptr, "default/counter/s1", "w").status().message(),
              HasSubstr("says it is encrypted but is not sealed"));
  std::string lz4 = ManifestText(m);
  lz4.insert(lz4.find('{') + 1, "\"compression\": \"lz4\",");
  EXPECT_THAT(ParseStoredManifest(lz4, nullptr, "default/counter/s1", "w").status().message(),
              HasSubstr("compression \"lz4\" is not one this stasis reads"));
}

}  // namespace
}  // namespace stasis
