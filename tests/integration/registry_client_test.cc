// RegistryClient against a real registry (docker-registry 2.8 over TLS with htpasswd auth,
// hack/registry.sh), holding images the test builds and pushes with skopeo: manifests by tag
// and digest, credentials required, unknown digests, a blob corrupted in the registry's own
// storage, a transfer cut by the registry stopping and resumed once it is back, an index of
// two platforms.
#include "images/registry_client.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/subprocess.h"
#include "images/oci_manifest.h"
#include "tests/support/oci_test_image.h"
#include "tests/support/sandbox.h"
#include "tests/support/test_registry.h"

namespace stasis::images {
namespace {

using stasis::testing::BuiltImage;
using stasis::testing::LayerCompression;
using stasis::testing::LayerMember;
using stasis::testing::TempDir;
using stasis::testing::TestImage;
using stasis::testing::TestRegistry;

constexpr int64_t kLargeLayerBytes = 64 << 20;

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  return out;
}

int64_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

class RegistryClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    registry_ = TestRegistry::Start(&error).release();
    ASSERT_NE(registry_, nullptr) << error;
    layout_ = new TempDir("stasis-oci-layout-");
    std::string layout = layout_->path().string();
    counter_ = Push("counter", "v1", {stasis::testing::CounterImage()});
    // Two platforms under one tag: an index.
    multi_ = Push("multi", "v1",
                  {stasis::testing::CounterImage("amd64"), stasis::testing::CounterImage("arm64")});
    // One uncompressed random layer, large enough to stop the registry in the middle of it.
    TestImage large;
    large.entrypoint = {"/bin/true"};
    large.layers = {{{LayerMember::File("random.bin", RandomBytes(kLargeLayerBytes, 42))},
                     LayerCompression::kNone}};
    large_ = Push("large", "v1", {large});
    // A layer of its own for the corruption test (blobs are shared by digest across repositories).
    TestImage own;
    own.entrypoint = {"/bin/true"};
    own.layers = {
        {{LayerMember::File("own.txt", RandomBytes(1 << 20, 7))}, LayerCompression::kZstd}};
    corrupt_ = Push("corrupt", "v1", {own});
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
    delete layout_;
  }

  static BuiltImage Push(const std::string& repo, const std::string& tag,
                         const std::vector<TestImage>& images) {
    std::string layout = layout_->path().string() + "/" + repo;
    auto built = stasis::testing::WriteOciLayout(layout, tag, images);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    if (!built.ok()) return {};
    Status pushed = stasis::testing::PushOciLayout(layout, tag, *registry_, repo);
    EXPECT_TRUE(pushed.ok()) << pushed.ToString();
    return *built;
  }

  static RegistryClientOptions Options() {
    RegistryClientOptions o;
    o.ca_file = registry_->ca_file();
    o.connect_timeout = std::chrono::seconds(2);
    o.max_resumes = 1;
    return o;
  }
  static ImageReference Ref(const std::string& repo) {
    auto r = ParseImageReference(registry_->host() + "/" + repo + ":v1");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return *r;
  }

  static TestRegistry* registry_;
  static TempDir* layout_;
  static BuiltImage counter_, multi_, large_, corrupt_;
  TempDir dir_{"stasis-registry-client-"};
};

TestRegistry* RegistryClientTest::registry_ = nullptr;
TempDir* RegistryClientTest::layout_ = nullptr;
BuiltImage RegistryClientTest::counter_, RegistryClientTest::multi_, RegistryClientTest::large_,
    RegistryClientTest::corrupt_;

TEST_F(RegistryClientTest, ManifestByTagAndByDigest) {
  RegistryClient client(Options());
  auto by_tag = client.GetManifest(Ref("counter"), "v1", registry_->credentials());
  ASSERT_TRUE(by_tag.ok()) << by_tag.status().ToString();
  EXPECT_EQ(by_tag->digest, counter_.target.digest);
  EXPECT_EQ(by_tag->media_type, media_type::kOciManifest);
  auto doc = nlohmann::json::parse(by_tag->body);
  EXPECT_EQ(doc["config"]["digest"], counter_.platforms[0].config.digest);
  EXPECT_EQ(doc["layers"][0]["digest"], counter_.platforms[0].layers[0].digest);

  auto by_digest =
      client.GetManifest(Ref("counter"), counter_.target.digest, registry_->credentials());
  ASSERT_TRUE(by_digest.ok()) << by_digest.status().ToString();
  EXPECT_EQ(by_digest->body, by_tag->body);
  EXPECT_EQ(by_digest->digest, counter_.target.digest);

  // Neither a tag nor a digest: refused before any request, never pasted into the URL.
  auto bad = client.GetManifest(Ref("counter"), "../v1", registry_->credentials());
  EXPECT_EQ(bad.status().reason(), "invalid_image_reference") << bad.status().ToString();
}

// The test images carry what fault tests ask for, as tar sees it after a round trip through
// the registry: a file, a directory, a symlink, a hardlink and a whiteout.
TEST_F(RegistryClientTest, TestLayersHoldTheMembersAsked) {
  TestImage image;
  image.entrypoint = {"/bin/true"};
  image.layers = {
      {{LayerMember::Dir("etc"), LayerMember::File("etc/motd", "hello\n"),
        LayerMember::Symlink("etc/link", "motd"), LayerMember::Hardlink("etc/hard", "etc/motd"),
        LayerMember::File("etc/.wh.gone", "")},
       LayerCompression::kGzip}};
  BuiltImage built = Push("members", "v1", {image});
  ASSERT_EQ(built.platforms.size(), 1u);
  const auto& layer = built.platforms[0].layers[0];
  EXPECT_EQ(layer.media_type, media_type::kOciLayerGzip);
  RegistryClient client(Options());
  std::string path = dir_.path().string() + "/layer.tgz";
  ASSERT_TRUE(
      client.FetchBlob(Ref("members"), layer.digest, layer.size, path, registry_->credentials())
          .ok());
  auto listed = RunCommand({"/usr/bin/tar", "-tvzf", path}, std::chrono::seconds(30));
  ASSERT_TRUE(listed.ok() && listed->success())
      << (listed.ok() ? listed->Summary() : listed.status().ToString());
  for (const char* want : {"etc/\n", "etc/motd\n", "etc/link -> motd\n",
                           "etc/hard link to etc/motd\n", "etc/.wh.gone\n"}) {
    EXPECT_NE(listed->out.find(want), std::string::npos) << want << " not in:\n" << listed->out;
  }
  // The config's diff ID is the uncompressed tar's digest.
  auto tar = RunCommand({"/usr/bin/gzip", "-dc", path}, std::chrono::seconds(30));
  ASSERT_TRUE(tar.ok() && tar->success());
  EXPECT_EQ(stasis::testing::Sha256Digest(tar->out), built.platforms[0].diff_ids[0]);
}

TEST_F(RegistryClientTest, WithoutOrWithWrongCredentialsIsUnauthorized) {
  RegistryClient client(Options());
  auto anonymous = client.GetManifest(Ref("counter"), "v1", std::nullopt);
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), Code::kUnauthenticated) << anonymous.status().ToString();
  EXPECT_EQ(anonymous.status().reason(), pull_reason::kUnauthorized);

  BasicCredentials wrong = *registry_->credentials();
  wrong.password += "x";
  auto refused = client.GetManifest(Ref("counter"), "v1", wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), pull_reason::kUnauthorized) << refused.status().ToString();
  std::string path = dir_.path().string() + "/blob";
  Status blob = client.FetchBlob(Ref("counter"), counter_.platforms[0].config.digest,
                                 counter_.platforms[0].config.size, path, wrong);
  EXPECT_EQ(blob.reason(), pull_reason::kUnauthorized) << blob.ToString();

  // The right credentials on the same client still work: a refusal is not cached.
  EXPECT_TRUE(client.GetManifest(Ref("counter"), "v1", registry_->credentials()).ok());
}

// docker-registry 2.8 answers a manifest digest it does not hold with 404 MANIFEST_UNKNOWN
// (it never serves other content under a digest), so the client says image_not_found.
TEST_F(RegistryClientTest, UnknownDigestTagOrRepositoryIsNotFound) {
  RegistryClient client(Options());
  const std::string unknown = stasis::testing::Sha256Digest("no such manifest");
  for (const auto& [repo, ref] : std::vector<std::pair<std::string, std::string>>{
           {"counter", unknown}, {"counter", "v2"}, {"nosuchrepo", "v1"}}) {
    auto m = client.GetManifest(Ref(repo), ref, registry_->credentials());
    ASSERT_FALSE(m.ok()) << repo << ":" << ref;
    EXPECT_EQ(m.status().code(), Code::kNotFound) << m.status().ToString();
    EXPECT_EQ(m.status().reason(), pull_reason::kImageNotFound);
  }
  std::string path = dir_.path().string() + "/blob";
  Status blob = client.FetchBlob(Ref("counter"), unknown, 10, path, registry_->credentials());
  EXPECT_EQ(blob.code(), Code::kNotFound) << blob.ToString();
}

TEST_F(RegistryClientTest, FetchesABlobVerifiedAndReportsProgress) {
  RegistryClient client(Options());
  const auto& layer = counter_.platforms[0].layers[0];
  std::string path = dir_.path().string() + "/layer";
  int64_t last = 0;
  Status s = client.FetchBlob(Ref("counter"), layer.digest, layer.size, path,
                              registry_->credentials(), [&](int64_t bytes) { last = bytes; });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stasis::testing::Sha256Digest(ReadWhole(path)), layer.digest);
  EXPECT_EQ(last, layer.size);

  // A size smaller than the blob: refused as soon as the bytes run past it (never written),
  // the file removed.
  int64_t most = 0;
  Status short_size =
      client.FetchBlob(Ref("counter"), layer.digest, layer.size - 1, path, registry_->credentials(),
                       [&](int64_t bytes) { most = std::max(most, bytes); });
  EXPECT_LE(most, layer.size - 1);
  EXPECT_EQ(short_size.code(), Code::kFailedPrecondition) << short_size.ToString();
  EXPECT_EQ(short_size.reason(), pull_reason::kDigestMismatch);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(RegistryClientTest, ABlobCorruptedInTheRegistrysStorageIsRefusedAndRemoved) {
  const auto& layer = corrupt_.platforms[0].layers[0];
  std::string stored = registry_->BlobDataPath(layer.digest);
  ASSERT_EQ(FileSize(stored), layer.size) << stored;
  std::string original = ReadWhole(stored);
  {
    std::ofstream out(stored, std::ios::binary | std::ios::trunc);
    out << RandomBytes(static_cast<size_t>(layer.size), 99);
  }
  RegistryClient client(Options());
  std::string path = dir_.path().string() + "/layer";
  Status s =
      client.FetchBlob(Ref("corrupt"), layer.digest, layer.size, path, registry_->credentials());
  std::ofstream(stored, std::ios::binary | std::ios::trunc) << original;
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(s.reason(), pull_reason::kDigestMismatch);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(
      client.FetchBlob(Ref("corrupt"), layer.digest, layer.size, path, registry_->credentials())
          .ok());
}

// The registry serves a manifest's stored bytes as they are: one changed in its storage (still
// JSON, the same length) no longer hashes to its digest, asked by digest or by tag (whose
// Docker-Content-Digest still names the digest the tag was pushed with).
TEST_F(RegistryClientTest, AManifestCorruptedInTheRegistrysStorageIsRefused) {
  const std::string digest = corrupt_.target.digest;
  std::string stored = registry_->BlobDataPath(digest);
  std::string original = ReadWhole(stored);
  ASSERT_EQ(stasis::testing::Sha256Digest(original), digest);
  std::string changed = original;
  size_t at =
      changed.find(corrupt_.platforms[0].config.digest) + 7;  // the config digest's first hex digit
  ASSERT_NE(at, std::string::npos + 7);
  changed[at] = changed[at] == '0' ? '1' : '0';
  std::ofstream(stored, std::ios::binary | std::ios::trunc) << changed;
  RegistryClient client(Options());
  auto by_digest = client.GetManifest(Ref("corrupt"), digest, registry_->credentials());
  auto by_tag = client.GetManifest(Ref("corrupt"), "v1", registry_->credentials());
  std::ofstream(stored, std::ios::binary | std::ios::trunc) << original;
  for (const auto* m : {&by_digest, &by_tag}) {
    ASSERT_FALSE(m->ok());
    EXPECT_EQ(m->status().code(), Code::kFailedPrecondition) << m->status().ToString();
    EXPECT_EQ(m->status().reason(), pull_reason::kDigestMismatch);
  }
  // Asked by digest, the body is checked against the digest asked, whatever headers say.
  EXPECT_EQ(by_digest.status().message().find("the registry says"), std::string::npos)
      << by_digest.status().message();
  EXPECT_TRUE(client.GetManifest(Ref("corrupt"), digest, registry_->credentials()).ok());
}

TEST_F(RegistryClientTest, ATransferCutByTheRegistryStoppingResumesWhereItStopped) {
  const auto& layer = large_.platforms[0].layers[0];
  ASSERT_GT(layer.size, kLargeLayerBytes);
  RegistryClient client(Options());
  std::string path = dir_.path().string() + "/layer";
  std::string stop_error;
  bool stopped = false;
  Status cut = client.FetchBlob(Ref("large"), layer.digest, layer.size, path,
                                registry_->credentials(), [&](int64_t bytes) {
                                  if (!stopped && bytes >= (8 << 20)) {
                                    stopped = true;
                                    stop_error = registry_->Stop();
                                  }
                                });
  ASSERT_TRUE(stopped);
  ASSERT_EQ(stop_error, "");
  EXPECT_EQ(cut.code(), Code::kUnavailable) << cut.ToString();
  EXPECT_EQ(cut.reason(), pull_reason::kRegistryUnavailable);
  int64_t partial = FileSize(path);
  EXPECT_GE(partial, 8 << 20) << "the partial file is kept for a resume";
  EXPECT_LT(partial, layer.size);

  ASSERT_EQ(registry_->Restart(), "");
  int64_t fetched = 0;
  Status resumed =
      client.FetchBlob(Ref("large"), layer.digest, layer.size, path, registry_->credentials(),
                       [&](int64_t bytes) { fetched = bytes; });
  ASSERT_TRUE(resumed.ok()) << resumed.ToString();
  EXPECT_EQ(fetched, layer.size - partial) << "only the missing bytes were fetched";
  EXPECT_EQ(FileSize(path), layer.size);
  EXPECT_EQ(stasis::testing::Sha256Digest(ReadWhole(path)), layer.digest);
}

TEST_F(RegistryClientTest, AnIndexOfTwoPlatformsAndEachOfItsManifests) {
  RegistryClient client(Options());
  auto index = client.GetManifest(Ref("multi"), "v1", registry_->credentials());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->media_type, media_type::kOciIndex);
  EXPECT_EQ(index->digest, multi_.target.digest);
  auto doc = nlohmann::json::parse(index->body);
  ASSERT_EQ(doc["manifests"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& entry = doc["manifests"][i];
    EXPECT_EQ(entry["platform"]["architecture"], i == 0 ? "amd64" : "arm64");
    EXPECT_EQ(entry["digest"], multi_.platforms[i].manifest.digest);
    auto m = client.GetManifest(Ref("multi"), entry["digest"], registry_->credentials());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->media_type, media_type::kOciManifest);
    EXPECT_EQ(nlohmann::json::parse(m->body)["config"]["digest"],
              multi_.platforms[i].config.digest);
  }
}

TEST_F(RegistryClientTest, TlsIsVerifiedAgainstTheGivenCa) {
  RegistryClientOptions no_ca = Options();
  no_ca.ca_file.clear();
  RegistryClient client(no_ca);
  auto m = client.GetManifest(Ref("counter"), "v1", registry_->credentials());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kUnavailable) << m.status().ToString();
  EXPECT_EQ(m.status().reason(), pull_reason::kRegistryUnavailable);
}

// The CA file is added to the system store, not put in its place: a registry behind a public CA
// still verifies when an operator names a private one. A second registry, whose CA stands in
// for the system store, is reached beside the first; with no system store, only the CA file's.
TEST_F(RegistryClientTest, TheCaFileIsTrustedBesideTheSystemStore) {
  std::string error;
  auto other = TestRegistry::Start(&error, {.auth = false});
  ASSERT_NE(other, nullptr) << error;
  TempDir layout("stasis-oci-layout-");
  ASSERT_TRUE(stasis::testing::WriteOciLayout(layout.path().string(), "v1",
                                              {stasis::testing::CounterImage()})
                  .ok());
  ASSERT_TRUE(
      stasis::testing::PushOciLayout(layout.path().string(), "v1", *other, "public").ok());
  auto public_ref = ParseImageReference(other->host() + "/public:v1");
  ASSERT_TRUE(public_ref.ok());

  RegistryClientOptions both = Options();
  both.system_ca_file = other->ca_file();
  RegistryClient client(both);
  auto mine = client.GetManifest(Ref("counter"), "v1", registry_->credentials());
  EXPECT_TRUE(mine.ok()) << mine.status().ToString();
  auto theirs = client.GetManifest(*public_ref, "v1", std::nullopt);
  EXPECT_TRUE(theirs.ok()) << theirs.status().ToString();

  RegistryClientOptions ca_file_only = Options();
  ca_file_only.system_ca_file = dir_.path().string() + "/no-system-store.pem";
  RegistryClient alone(ca_file_only);
  EXPECT_TRUE(alone.GetManifest(Ref("counter"), "v1", registry_->credentials()).ok());
  auto refused = alone.GetManifest(*public_ref, "v1", std::nullopt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), pull_reason::kRegistryUnavailable)
      << refused.status().ToString();
}

TEST(RegistryWithoutAuth, PullsAnonymously) {
  std::string error;
  auto registry = TestRegistry::Start(&error, {.auth = false});
  ASSERT_NE(registry, nullptr) << error;
  ASSERT_FALSE(registry->credentials());
  TempDir layout("stasis-oci-layout-");
  auto built = stasis::testing::WriteOciLayout(layout.path().string(), "v1",
                                               {stasis::testing::CounterImage()});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  Status pushed = stasis::testing::PushOciLayout(layout.path().string(), "v1", *registry, "anon");
  ASSERT_TRUE(pushed.ok()) << pushed.ToString();
  RegistryClientOptions o;
  o.ca_file = registry->ca_file();
  RegistryClient client(o);
  auto ref = ParseImageReference(
      "localhost:" + registry->host().substr(registry->host().find(':') + 1) + "/anon:v1");
  ASSERT_TRUE(ref.ok());
  auto m = client.GetManifest(*ref, "v1", std::nullopt);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->digest, built->target.digest);
}

// A registry the operator lists as insecure is reached over plain HTTP; any other over HTTPS
// only (the same plain registry, not listed, is unavailable: its answer is not TLS).
TEST(InsecureRegistry, PlainHttpOnlyForTheHostsListed) {
  std::string error;
  auto registry = TestRegistry::Start(&error, {.auth = false, .plain_http = true});
  ASSERT_NE(registry, nullptr) << error;
  TempDir layout("stasis-oci-layout-");
  auto built = stasis::testing::WriteOciLayout(layout.path().string(), "v1",
                                               {stasis::testing::CounterImage()});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  Status pushed = stasis::testing::PushOciLayout(layout.path().string(), "v1", *registry, "plain");
  ASSERT_TRUE(pushed.ok()) << pushed.ToString();
  auto ref = ParseImageReference(registry->host() + "/plain:v1");
  ASSERT_TRUE(ref.ok());

  RegistryClientOptions listed;
  listed.insecure_hosts = {registry->host()};
  RegistryClient insecure(listed);
  auto m = insecure.GetManifest(*ref, "v1", std::nullopt);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->digest, built->target.digest);
  const auto& layer = built->platforms[0].layers[0];
  TempDir dir("stasis-registry-client-");
  Status blob = insecure.FetchBlob(*ref, layer.digest, layer.size, dir.path().string() + "/layer",
                                   std::nullopt);
  EXPECT_TRUE(blob.ok()) << blob.ToString();

  RegistryClient secure(RegistryClientOptions{});
  auto refused = secure.GetManifest(*ref, "v1", std::nullopt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), pull_reason::kRegistryUnavailable)
      << refused.status().ToString();
}

}  // namespace
}  // namespace stasis::images

namespace stasis::images {
namespace {

// Registries send blobs from elsewhere: docker-registry on an S3 bucket (SeaweedFS) answers a
// blob GET with a 307 to a presigned URL on the store, another origin. The client follows it
// (without its Authorization header, registry_http_test checks the origin rule), verifies
// what the store sends, and resumes from a partial file with a Range request to the store.
TEST(RegistryRedirectingToObjectStore, BlobsComeFromTheStoreAndResumeThere) {
  std::string error;
  auto store = stasis::testing::ObjectStore::Start(&error);
  ASSERT_NE(store, nullptr) << error;
  auto registry = TestRegistry::Start(&error, {.store = store.get()});
  ASSERT_NE(registry, nullptr) << error;
  TempDir layout("stasis-oci-layout-");
  TestImage image;
  image.entrypoint = {"/bin/true"};
  const std::string content = RandomBytes(4 << 20, 3);
  image.layers = {{{LayerMember::File("data.bin", content)}, LayerCompression::kNone}};
  auto built = stasis::testing::WriteOciLayout(layout.path().string(), "v1", {image});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  Status pushed =
      stasis::testing::PushOciLayout(layout.path().string(), "v1", *registry, "redirected");
  ASSERT_TRUE(pushed.ok()) << pushed.ToString();

  RegistryClientOptions o;
  o.ca_file = registry->ca_file();
  RegistryClient client(o);
  auto ref = ParseImageReference(registry->host() + "/redirected:v1");
  ASSERT_TRUE(ref.ok());
  auto m = client.GetManifest(*ref, "v1", registry->credentials());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->digest, built->target.digest);

  const auto& layer = built->platforms[0].layers[0];
  TempDir dir("stasis-registry-client-");
  std::string path = dir.path().string() + "/layer";
  Status whole = client.FetchBlob(*ref, layer.digest, layer.size, path, registry->credentials());
  ASSERT_TRUE(whole.ok()) << whole.ToString();
  std::string blob = ReadWhole(path);
  EXPECT_EQ(stasis::testing::Sha256Digest(blob), layer.digest);

  // Half of it left from an earlier attempt: only the other half comes from the store.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << blob.substr(0, blob.size() / 2);
  int64_t fetched = 0;
  Status resumed = client.FetchBlob(*ref, layer.digest, layer.size, path, registry->credentials(),
                                    [&](int64_t bytes) { fetched = bytes; });
  ASSERT_TRUE(resumed.ok()) << resumed.ToString();
  EXPECT_EQ(fetched, layer.size - static_cast<int64_t>(blob.size() / 2));
  EXPECT_EQ(ReadWhole(path), blob);
}

}  // namespace
}  // namespace stasis::images
