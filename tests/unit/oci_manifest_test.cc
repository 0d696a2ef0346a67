// Manifests, indexes and image configs as registries serve them (images/oci_manifest.h): OCI
// and Docker v2 schema 2 bodies parsed into descriptors, bad bodies refused with the field
// named, platform selection (variants included), and the host's platform in GOARCH spelling.
#include "images/oci_manifest.h"

#include <sys/utsname.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stasis::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Digest(char c) { return "sha256:" + std::string(64, c); }

constexpr char kOciIndex[] = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.index.v1+json",
  "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 1000,
     "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
     "platform": {"architecture": "amd64", "os": "linux"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 1001,
     "digest": "sha256:2222222222222222222222222222222222222222222222222222222222222222",
     "platform": {"architecture": "arm", "os": "linux", "variant": "v6"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 1002,
     "digest": "sha256:3333333333333333333333333333333333333333333333333333333333333333",
     "platform": {"architecture": "arm", "os": "linux", "variant": "v7"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 1003,
     "digest": "sha256:4444444444444444444444444444444444444444444444444444444444444444",
     "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 566,
     "digest": "sha256:5555555555555555555555555555555555555555555555555555555555555555",
     "annotations": {"vnd.docker.reference.type": "attestation-manifest"},
     "platform": {"architecture": "unknown", "os": "unknown"}}
  ]
})";

constexpr char kDockerList[] = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
  "manifests": [
    {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "size": 528,
     "digest": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "platform": {"architecture": "arm64", "os": "linux"}},
    {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "size": 527,
     "digest": "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
     "platform": {"architecture": "amd64", "os": "linux"}}
  ]
})";

constexpr char kOciManifest[] = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.manifest.v1+json",
  "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 1471,
             "digest": "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"},
  "layers": [
    {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "size": 3623807,
     "digest": "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"},
    {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "size": 12,
     "digest": "sha256:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"}
  ],
  "annotations": {"org.opencontainers.image.created": "2026-01-01T00:00:00Z"}
})";

constexpr char kDockerManifest[] = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
  "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 1457,
             "digest": "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"},
  "layers": [
    {"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": 2814446,
     "digest": "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"}
  ]
})";

// As `docker inspect`-era configs are written: capitalised keys, Cmd null where unset.
constexpr char kDockerConfig[] = R"({
  "architecture": "arm64", "variant": "v8", "os": "linux",
  "config": {"Env": ["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"], "Entrypoint": ["/docker-entrypoint.sh"],
             "Cmd": null, "WorkingDir": "/srv", "User": "101:101", "ExposedPorts": {"80/tcp": {}}},
  "rootfs": {"type": "layers", "diff_ids": [
    "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    "sha256:2222222222222222222222222222222222222222222222222222222222222222"]},
  "history": [{"created_by": "/bin/sh -c #(nop) ADD file:abc in /"}]
})";

TEST(OciManifestTest, ParsesAnOciIndexWithPlatforms) {
  auto index = ParseImageIndex(kOciIndex);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_EQ(index->manifests.size(), 5u);
  const Descriptor& arm = index->manifests[2];
  EXPECT_EQ(arm.media_type, media_type::kOciManifest);
  EXPECT_EQ(arm.digest, Digest('3'));
  EXPECT_EQ(arm.size, 1002);
  ASSERT_TRUE(arm.platform.has_value());
  EXPECT_EQ(*arm.platform, (Platform{"linux", "arm", "v7"}));
}

TEST(OciManifestTest, SelectsThePlatformAndItsVariant) {
  auto index = ParseImageIndex(kOciIndex);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(SelectPlatform(*index, {"linux", "amd64", ""})->digest, Digest('1'));
  EXPECT_EQ(SelectPlatform(*index, {"linux", "arm", "v7"})->digest, Digest('3'));
  EXPECT_EQ(SelectPlatform(*index, {"linux", "arm", "v6"})->digest, Digest('2'));
  EXPECT_EQ(SelectPlatform(*index, {"linux", "arm64", "v8"})->digest, Digest('4'));
  EXPECT_EQ(SelectPlatform(*index, {"linux", "arm64", ""})->digest, Digest('4'));  // any variant
  auto missing = SelectPlatform(*index, {"linux", "arm", "v5"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().reason(), "platform_not_found");
  EXPECT_THAT(missing.status().message(), HasSubstr("linux/arm/v6, linux/arm/v7"));
  EXPECT_FALSE(SelectPlatform(*index, {"windows", "amd64", ""}).ok());
}

TEST(OciManifestTest, AnEntryWithoutVariantMatchesAnyVariantButAnExactOneWins) {
  auto list = ParseImageIndex(kDockerList);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(SelectPlatform(*list, {"linux", "arm64", "v8"})->digest, Digest('a'));
  EXPECT_EQ(SelectPlatform(*list, {"linux", "amd64", ""})->digest, Digest('b'));
  // An entry of another type for the platform (a nested index, an artifact) is no image.
  ImageIndex with_artifact = *list;
  const Descriptor sbom{"application/vnd.example.sbom.v1+json", Digest('9'), 1, Platform{"linux", "amd64", ""}};
  with_artifact.manifests.insert(with_artifact.manifests.begin(), sbom);
  EXPECT_EQ(SelectPlatform(with_artifact, {"linux", "amd64", ""})->digest, Digest('b'));
  ImageIndex both = *list;
  both.manifests.push_back({media_type::kDockerManifest, Digest('f'), 1, Platform{"linux", "arm64", "v8"}});
  EXPECT_EQ(SelectPlatform(both, {"linux", "arm64", "v8"})->digest, Digest('f'));
}

TEST(OciManifestTest, ParsesOciAndDockerManifests) {
  auto oci = ParseImageManifest(kOciManifest);
  ASSERT_TRUE(oci.ok()) << oci.status().ToString();
  EXPECT_EQ(oci->config, (Descriptor{media_type::kOciConfig, Digest('c'), 1471, std::nullopt}));
  ASSERT_EQ(oci->layers.size(), 2u);
  EXPECT_EQ(oci->layers[0], (Descriptor{media_type::kOciLayerGzip, Digest('d'), 3623807, std::nullopt}));
  EXPECT_EQ(oci->layers[1].media_type, media_type::kOciLayerZstd);
  auto docker = ParseImageManifest(kDockerManifest);
  ASSERT_TRUE(docker.ok()) << docker.status().ToString();
  EXPECT_EQ(docker->config.media_type, media_type::kDockerConfig);
  ASSERT_EQ(docker->layers.size(), 1u);
  EXPECT_EQ(docker->layers[0].media_type, media_type::kDockerLayerGzip);
  EXPECT_EQ(docker->layers[0].size, 2814446);
}

TEST(OciManifestTest, ParsesADockerConfig) {
  auto config = ParseImageConfig(kDockerConfig);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_THAT(config->entrypoint, ElementsAre("/docker-entrypoint.sh"));
  EXPECT_TRUE(config->cmd.empty());
  EXPECT_THAT(config->env, ElementsAre("PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"));
  EXPECT_EQ(config->working_dir, "/srv");
  EXPECT_EQ(config->user, "101:101");
  EXPECT_THAT(config->diff_ids, ElementsAre(Digest('1'), Digest('2')));
  EXPECT_EQ(config->platform, (Platform{"linux", "arm64", "v8"}));
}

TEST(OciManifestTest, ParsesAnOciConfigWithoutARuntimeSection) {
  auto config = ParseImageConfig(R"({"architecture": "amd64", "os": "linux",
      "rootfs": {"type": "layers", "diff_ids": []}})");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->entrypoint.empty());
  EXPECT_TRUE(config->diff_ids.empty());
  EXPECT_EQ(config->platform, (Platform{"linux", "amd64", ""}));
}

// Replaces the first `from` in `body` with `to`.
std::string With(std::string body, const std::string& from, const std::string& to) {
  const size_t at = body.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? body : body.replace(at, from.size(), to);
}

template <typename T>
void ExpectBadT(const Result<T>& r, const std::string& field) {
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << field;
  EXPECT_EQ(r.status().reason(), "bad_manifest") << field;
  EXPECT_THAT(r.status().message(), HasSubstr(field));
}

TEST(OciManifestTest, RefusesBadIndexes) {
  ExpectBadT(ParseImageIndex("{not json"), "not JSON");
  ExpectBadT(ParseImageIndex("[]"), "not an object");
  ExpectBadT(ParseImageIndex(With(kOciIndex, "\"schemaVersion\": 2", "\"schemaVersion\": 1")), "schemaVersion");
  ExpectBadT(ParseImageIndex(kOciManifest), "mediaType");  // a manifest is not an index
  ExpectBadT(ParseImageIndex(R"({"schemaVersion": 2})"), "manifests");
  ExpectBadT(ParseImageIndex(With(kOciIndex, Digest('1'), "sha256:1111")), "digest");
  ExpectBadT(ParseImageIndex(With(kOciIndex, Digest('1'), "sha512:" + std::string(64, '1'))), "digest");
  ExpectBadT(ParseImageIndex(With(kOciIndex, Digest('1'), "sha256:" + std::string(64, 'A'))), "digest");
  ExpectBadT(ParseImageIndex(With(kOciIndex, "\"size\": 1000", "\"size\": -1")), "size");
  ExpectBadT(ParseImageIndex(With(kOciIndex, "\"size\": 1000", "\"size\": \"1000\"")), "size");
  ExpectBadT(ParseImageIndex(With(kOciIndex, "\"os\": \"linux\"", "\"os\": 7")), "os");
}

TEST(OciManifestTest, RefusesBadManifestsAndConfigs) {
  ExpectBadT(ParseImageManifest(kOciIndex), "mediaType");
  ExpectBadT(ParseImageManifest(With(kOciManifest, "\"config\"", "\"konfig\"")), "config");
  ExpectBadT(ParseImageManifest(With(kOciManifest, "\"layers\"", "\"lairs\"")), "layers");
  ExpectBadT(ParseImageManifest(With(kDockerManifest, Digest('d'), "sha256:../../etc/passwd")), "digest");
  const std::string layer_type = "\"mediaType\": \"application/vnd.docker.image.rootfs.diff.tar.gzip\",";
  ExpectBadT(ParseImageManifest(With(kDockerManifest, layer_type, "")), "mediaType");
  ExpectBadT(ParseImageConfig("null"), "not an object");
  ExpectBadT(ParseImageConfig(With(kDockerConfig, "\"rootfs\"", "\"rootf\"")), "rootfs");
  ExpectBadT(ParseImageConfig(With(kDockerConfig, Digest('2'), "sha256:22")), "diff_ids");
  ExpectBadT(ParseImageConfig(With(kDockerConfig, "[\"/docker-entrypoint.sh\"]", "\"/docker-entrypoint.sh\"")),
             "Entrypoint");
  ExpectBadT(ParseImageConfig(With(kDockerConfig, "\"101:101\"", "101")), "User");
}

TEST(OciManifestTest, MediaTypePredicates) {
  EXPECT_TRUE(IsIndexMediaType(media_type::kOciIndex));
  EXPECT_TRUE(IsIndexMediaType(media_type::kDockerManifestList));
  EXPECT_FALSE(IsIndexMediaType(media_type::kOciManifest));
  EXPECT_TRUE(IsManifestMediaType(media_type::kDockerManifest));
  EXPECT_FALSE(IsManifestMediaType(media_type::kDockerManifestList));
  for (const char* t : {media_type::kOciLayerTar, media_type::kOciLayerGzip, media_type::kOciLayerZstd,
                        media_type::kDockerLayerGzip}) {
    EXPECT_TRUE(IsSupportedLayerMediaType(t)) << t;
  }
  EXPECT_FALSE(IsSupportedLayerMediaType("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"));
  EXPECT_FALSE(IsSupportedLayerMediaType(media_type::kOciConfig));
  const std::string accept = ManifestAcceptHeader();
  for (const char* t : {media_type::kOciIndex, media_type::kOciManifest, media_type::kDockerManifestList,
                        media_type::kDockerManifest}) {
    EXPECT_THAT(accept, HasSubstr(t));
  }
}

TEST(OciManifestTest, HostPlatformUsesGoArchitectureNames) {
  struct utsname u {};
  ASSERT_EQ(uname(&u), 0);
  const Platform host = HostPlatform();
  EXPECT_EQ(host.os, "linux");
  const std::string machine = u.machine;
  const std::string expected = machine == "x86_64" ? "amd64" : machine == "aarch64" ? "arm64" : machine;
  EXPECT_EQ(host.architecture, expected) << "uname says " << machine;
}

}  // namespace
}  // namespace stasis::images
