// The manifest object of an object-store snapshot: sealed with a key it reveals nothing and opens
// only for its snapshot and key, another key or none refused by both ids before anything else;
// a plain manifest reads as before (none/none) and only by an agent without a key.
#include "snapshots/stored_manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/sha256.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
