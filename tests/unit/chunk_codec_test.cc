// The object-store chunk codec: round trips through every transform, each tampering refused
// with a clear error (a flipped bit, a truncated object, a chunk moved to another place or
// snapshot, another key), compressible data stored smaller, incompressible data stored raw,
// and a zstd bomb refused before it is unpacked. Milliseconds: 1 MiB chunks in memory.
#include "snapshots/chunk_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <random>

#include "snapshots/aes_gcm.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kChunk = 1 << 20;

std::string Compressible(size_t n) {
  std::string s;
  while (s.size() < n) s += "page " + std::to_string(s.size() % 977) + " of a checkpoint image; ";
  s.resize(n);
  return s;
}

std::string Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::shared_ptr<const EncryptionKey> Key(char fill) {
  auto k = EncryptionKey::FromBytes(std::string(kEncryptionKeyBytes, fill));
  EXPECT_TRUE(k.ok());
  return std::make_shared<const EncryptionKey>(*k);
}

const ChunkPlace kPlace{"default/counter/s1", "c0ffee", 1, 2};

struct Encoded {
  std::string object;
};

Encoded Encode(const ChunkCodec& codec, const std::string& plain, const ChunkPlace& place = kPlace) {
  std::string out, scratch;
  auto object = codec.Encode(plain, place, out, scratch);
  EXPECT_TRUE(object.ok()) << object.status().ToString();
  return Encoded{object.ok() ? std::string(*object) : ""};
}

// The plaintext decoded from `object` by `codec`, or its error.
Result<std::string> Decode(const ChunkCodec& codec, const std::string& object, const ChunkPlace& place = kPlace,
                           int64_t length = kChunk) {
  ChunkBuffers buffers;
  auto plain = codec.Decode(object, place, length, buffers);
  if (!plain.ok()) return plain.status();
  return std::string(*plain);
}

const CompressionSetting kZstd3{Compression::kZstd, 3};

TEST(ChunkCodec, EveryTransformRoundTrips) {
  const std::string plain = Compressible(kChunk);
  for (const auto& codec : {ChunkCodec(), ChunkCodec(kZstd3, nullptr), ChunkCodec({}, Key('k')),
                            ChunkCodec(kZstd3, Key('k'))}) {
    const std::string object = Encode(codec, plain).object;
    auto back = Decode(codec, object);
    ASSERT_TRUE(back.ok()) << CompressionName(codec.compression()) << "/" << EncryptionName(codec.encryption())
                           << ": " << back.status().ToString();
    EXPECT_EQ(*back, plain);
  }
}

TEST(ChunkCodec, TheIdentityStoresThePlaintextAndEncryptionHidesIt) {
  const std::string plain = Compressible(kChunk);
  EXPECT_EQ(Encode(ChunkCodec(), plain).object, plain);
  const std::string sealed = Encode(ChunkCodec({}, Key('k')), plain).object;
  EXPECT_EQ(sealed.size(), plain.size() + kGcmOverheadBytes);
  EXPECT_EQ(sealed.find("of a checkpoint image"), std::string::npos);
  EXPECT_NE(Encode(ChunkCodec({}, Key('k')), plain).object, sealed) << "a fresh nonce for every object";
}

TEST(ChunkCodec, CompressibleDataIsStoredSmallerIncompressibleRawWithOneByteSaying) {
  const ChunkCodec zstd(kZstd3, nullptr);
  const std::string text = Compressible(kChunk);
  const std::string small = Encode(zstd, text).object;
  EXPECT_LT(small.size(), text.size() / 10);
  EXPECT_EQ(small[0], 1) << "kind 1: a zstd frame";
  // Random bytes do not compress: stored as they are, behind kind 0, one byte longer.
  const std::string noise = Random(kChunk, 1);
  const std::string raw = Encode(zstd, noise).object;
  EXPECT_EQ(raw.size(), noise.size() + 1);
  EXPECT_EQ(raw[0], 0) << "kind 0: stored raw";
  EXPECT_EQ(raw.substr(1), noise);
  EXPECT_EQ(*Decode(zstd, raw), noise);
}

TEST(ChunkCodec, ATamperedObjectIsRefused) {
  const std::string plain = Compressible(kChunk);
  for (const auto& codec : {ChunkCodec({}, Key('k')), ChunkCodec(kZstd3, Key('k'))}) {
    const std::string object = Encode(codec, plain).object;
    std::string flipped = object;
    flipped[flipped.size() / 2] ^= 0x01;
    for (const std::string& bad : {flipped, object.substr(0, object.size() - 1), object.substr(0, 20), std::string()}) {
      auto r = Decode(codec, bad);
      ASSERT_FALSE(r.ok()) << bad.size() << " bytes accepted";
      EXPECT_EQ(r.status().reason(), snapshot_reason::kSnapshotCorrupt);
      EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
    }
    EXPECT_THAT(Decode(codec, flipped).status().message(), HasSubstr("failed authentication"));
    EXPECT_THAT(Decode(codec, object.substr(0, 20)).status().message(), HasSubstr("shorter than its nonce and tag"));
  }
}

TEST(ChunkCodec, AChunkMovedToAnotherPlaceOrSnapshotOrReadWithAnotherKeyIsRefused) {
  const ChunkCodec codec(kZstd3, Key('k'));
  const std::string object = Encode(codec, Compressible(kChunk)).object;
  ChunkPlace other_chunk = kPlace, other_file = kPlace, other_snapshot = kPlace, other_content = kPlace;
  other_chunk.chunk = 3;
  other_file.file = 0;
  other_snapshot.snapshot = "default/counter/s2";
  other_content.content = "decade";
  for (const ChunkPlace& p : {other_chunk, other_file, other_snapshot, other_content}) {
    auto r = Decode(codec, object, p);
    ASSERT_FALSE(r.ok()) << p.snapshot << " " << p.file << " " << p.chunk;
    EXPECT_THAT(r.status().message(), HasSubstr("moved from another place"));
  }
  auto wrong_key = Decode(ChunkCodec(kZstd3, Key('w')), object);
  ASSERT_FALSE(wrong_key.ok());
  EXPECT_THAT(wrong_key.status().message(), HasSubstr("another key"));
  // The compression is bound too: the same bytes read as uncompressed fail.
  EXPECT_FALSE(Decode(ChunkCodec({}, Key('k')), object).ok());
  // A reader without a key cannot even try.
  auto no_key = Decode(ChunkCodec().ForSnapshot(Compression::kZstd, Encryption::kAes256Gcm), object);
  EXPECT_EQ(no_key.status().reason(), snapshot_reason::kSnapshotKeyMismatch);
}

TEST(ChunkCodec, AZstdBombOrAFrameOfTheWrongSizeIsRefusedBeforeUnpacking) {
  const ChunkCodec zstd(kZstd3, nullptr);
  // 64 MiB of zeros in a few KiB: declares more than the 1 MiB chunk.
  const std::string zeros(64 << 20, '\0');
  std::string bomb(ZSTD_compressBound(zeros.size()) + 1, '\0');
  bomb[0] = 1;
  bomb.resize(1 + ZSTD_compress(bomb.data() + 1, bomb.size() - 1, zeros.data(), zeros.size(), 1));
  auto r = Decode(zstd, bomb);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("declares 67108864 bytes, not the chunk's 1048576: refused before"));
  // A valid frame of the chunk's length read as a shorter chunk (the last of a file).
  const std::string object = Encode(zstd, Compressible(kChunk)).object;
  EXPECT_FALSE(Decode(zstd, object, kPlace, kChunk - 1).ok());
  // Raw kind with the wrong length, an unknown kind, garbage after the kind byte.
  EXPECT_THAT(Decode(zstd, std::string(1, '\0') + "abc").status().message(), HasSubstr("stored uncompressed with 3 bytes"));
  EXPECT_THAT(Decode(zstd, std::string(1, '\x07') + "abc").status().message(), HasSubstr("unknown kind 7"));
  EXPECT_THAT(Decode(zstd, std::string(1, '\x01') + "abcdefgh").status().message(), HasSubstr("not a zstd frame"));
}

TEST(ChunkCodec, AReaderDecodesByTheSnapshotsTransformNotItsOwn) {
  const std::string plain = Compressible(kChunk);
  const std::string zstd_object = Encode(ChunkCodec(kZstd3, nullptr), plain).object;
  // An agent that writes uncompressed reads a zstd snapshot, and one that writes zstd a plain one.
  EXPECT_EQ(*Decode(ChunkCodec().ForSnapshot(Compression::kZstd, Encryption::kNone), zstd_object), plain);
  EXPECT_EQ(*Decode(ChunkCodec(kZstd3, nullptr).ForSnapshot(Compression::kNone, Encryption::kNone), plain), plain);
}

TEST(CompressionSetting, ParsesTheFlagStrictly) {
  EXPECT_EQ(ParseCompressionSetting("none")->compression, Compression::kNone);
  EXPECT_EQ(ParseCompressionSetting("zstd")->level, kDefaultZstdLevel);
  EXPECT_EQ(ParseCompressionSetting("zstd:1")->level, 1);
  EXPECT_EQ(ParseCompressionSetting("zstd:19")->level, 19);
  for (const char* bad : {"", "zstd:", "zstd:0", "zstd:20", "zstd:-1", "zstd:3x", "zstd3", "ZSTD", "lz4", "gzip:6"}) {
    auto r = ParseCompressionSetting(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("want none, zstd or zstd:LEVEL with LEVEL in [1, 19]"));
  }
}

}  // namespace
}  // namespace stasis
