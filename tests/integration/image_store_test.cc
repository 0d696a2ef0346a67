// The node's image cache (images/image_store.h) against a real registry (hack/registry.sh:
// Debian's docker-registry with TLS and htpasswd) holding images the tests build and push:
// pulls by tag and by digest under each pull policy, a multi-platform index resolved to this
// node's platform, one pull for concurrent starts, failures that leave nothing partial in the
// cache (a corrupted blob, a refused layer, a registry that is down), and eviction by least
// recent use that never takes an image in use or held.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "images/image_reference.h"
#include "images/image_store.h"
#include "images/registry_client.h"
#include "tests/support/oci_test_image.h"
#include "tests/support/sandbox.h"
#include "tests/support/test_registry.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Counts what the store reports.
class CountingObserver : public images::ImageObserver {
 public:
  void Pull(std::string_view result, int64_t, double) override {
    std::lock_guard lock(mu_);
    pulls.push_back(std::string(result));
  }
  void Unpack(int64_t, double) override {}
  void CacheLookup(bool hit) override { (hit ? hits : misses)++; }
  void CacheBytes(int64_t bytes) override { cache_bytes = bytes; }
  void CacheEviction(int64_t) override { evictions++; }

  std::mutex mu_;
  std::vector<std::string> pulls;
  std::atomic<int> hits{0}, misses{0}, evictions{0};
  std::atomic<int64_t> cache_bytes{-1};
};

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class ImageStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    registry_ = TestRegistry::Start(&error).release();
    ASSERT_NE(registry_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }

  ImageStoreTest()
      : dir_("stasis-image-store-"),
        client_(images::RegistryClientOptions{.ca_file = registry_->ca_file()}),
        store_(images::ImageStoreOptions{.root = dir_.path().string(), .budget_bytes = 0}, client_, &observer_) {}

  void SetUp() override {
    ASSERT_TRUE(registry_->Restart().empty()) << "the registry did not come back";
    ASSERT_TRUE(store_.Open().ok());
  }

  // Pushes `images` (several: an index) as repo:tag; returns what the tag names.
  std::string Push(const std::string& repo, const std::string& tag, const std::vector<TestImage>& images,
                   BuiltImage* built_out = nullptr) {
    const std::string layout = (dir_.path() / ("layout-" + tag)).string();
    fs::remove_all(layout);
    auto built = WriteOciLayout(layout, tag, images);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    if (!built.ok()) return "";
    Status pushed = PushOciLayout(layout, tag, *registry_, repo);
    EXPECT_TRUE(pushed.ok()) << pushed.ToString();
    if (built_out) *built_out = *built;
    return built->target.digest;
  }

  images::PullRequest Request(const std::string& repo, const std::string& tag_or_digest,
                              images::PullPolicy policy = images::PullPolicy::kIfNotPresent) {
    const std::string sep = tag_or_digest.rfind("sha256:", 0) == 0 ? "@" : ":";
    auto ref = images::ParseImageReference(registry_->host() + "/" + repo + sep + tag_or_digest);
    EXPECT_TRUE(ref.ok()) << ref.status().ToString();
    images::PullRequest r;
    r.image = *ref;
    r.policy = policy;
    r.auths = {{registry_->host(), *registry_->credentials()}};
    return r;
  }

  fs::path Unpacked() const { return dir_.path() / "images" / "unpacked"; }
  std::vector<std::string> Leftovers() const {
    auto tmp = Entries(dir_.path() / "images" / "tmp");
    auto partial = Entries(dir_.path() / "images" / "blobs" / "partial");
    tmp.insert(tmp.end(), partial.begin(), partial.end());
    return tmp;
  }

  static TestRegistry* registry_;
  TempDir dir_;
  CountingObserver observer_;
  images::RegistryClient client_;
  images::ImageStore store_;
};

TestRegistry* ImageStoreTest::registry_ = nullptr;

TEST_F(ImageStoreTest, PulledOnceThenFoundWithoutTheRegistry) {
  const std::string digest = Push("store/counter", "v1", {CounterImage()});
  auto image = store_.Ensure(Request("store/counter", "v1"));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->digest, digest);
  EXPECT_FALSE(image->cache_hit);
  EXPECT_TRUE(fs::is_regular_file(image->rootfs + "/bin/busybox"));
  EXPECT_EQ(image->config.entrypoint, CounterImage().entrypoint);
  EXPECT_GT(image->bytes, 0);
  EXPECT_EQ(observer_.cache_bytes.load(), image->bytes);
  EXPECT_THAT(Entries(Unpacked()), ElementsAre(digest.substr(7)));
  EXPECT_THAT(Leftovers(), IsEmpty()) << "layer blobs are removed once unpacked";

  ASSERT_TRUE(registry_->Stop().empty());
  for (auto policy : {images::PullPolicy::kIfNotPresent, images::PullPolicy::kNever}) {
    auto again = store_.Ensure(Request("store/counter", "v1", policy));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(again->cache_hit);
    EXPECT_EQ(again->rootfs, image->rootfs);
  }
  auto by_digest = store_.Ensure(Request("store/counter", digest, images::PullPolicy::kAlways));
  ASSERT_TRUE(by_digest.ok()) << "a digest the node holds needs no registry: " << by_digest.status().ToString();
  auto always = store_.Ensure(Request("store/counter", "v1", images::PullPolicy::kAlways));
  EXPECT_EQ(always.status().reason(), images::pull_reason::kRegistryUnavailable) << "Always asks the registry";
  EXPECT_EQ(observer_.pulls, (std::vector<std::string>{"success", "registry_unavailable"}));
}

// An agent killed mid-pull leaves an unpack in tmp/ and a partial blob: the next agent's Open
// removes both, and the complete image it also left is still found.
TEST_F(ImageStoreTest, OpenEmptiesWhatAnEarlierAgentLeftHalfDone) {
  const std::string digest = Push("store/restart", "v1", {CounterImage()});
  ASSERT_TRUE(store_.Ensure(Request("store/restart", "v1")).ok());
  const fs::path images = dir_.path() / "images";
  fs::create_directories(images / "tmp" / "0123-half" / "rootfs" / "bin");
  std::ofstream(images / "tmp" / "0123-half" / "rootfs" / "bin" / "sh") << "half";
  std::ofstream(images / "blobs" / "partial" / std::string(64, 'a')) << "partial";
  images::ImageStore next(images::ImageStoreOptions{.root = dir_.path().string()}, client_, &observer_);
  ASSERT_TRUE(next.Open().ok());
  EXPECT_THAT(Leftovers(), IsEmpty());
  auto found = next.Find(digest);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_TRUE(fs::is_regular_file(found->rootfs + "/bin/busybox"));
}

TEST_F(ImageStoreTest, NeverWithoutACopyIsImageNotPresent) {
  Push("store/never", "v1", {CounterImage()});
  auto image = store_.Ensure(Request("store/never", "v1", images::PullPolicy::kNever));
  EXPECT_EQ(image.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(image.status().reason(), "image_not_present");
  EXPECT_THAT(observer_.pulls, IsEmpty()) << "Never must not reach the registry";
}

TEST_F(ImageStoreTest, AlwaysFollowsTheTagAndAPinnedDigestDoesNot) {
  const std::string v1 = Push("store/moving", "t", {CounterImage()});
  ASSERT_TRUE(store_.Ensure(Request("store/moving", "t")).ok());
  TestImage changed = CounterImage();
  changed.layers.push_back({{LayerMember::File("etc/release", "2\n")}, LayerCompression::kZstd});
  const std::string v2 = Push("store/moving", "t", {changed});
  ASSERT_NE(v1, v2);

  auto stale = store_.Ensure(Request("store/moving", "t", images::PullPolicy::kIfNotPresent));
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->digest, v1) << "IfNotPresent uses what the tag named when this node pulled it";
  auto fresh = store_.Ensure(Request("store/moving", "t", images::PullPolicy::kAlways));
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->digest, v2);
  EXPECT_TRUE(fs::is_regular_file(fresh->rootfs + "/etc/release"));
  auto pinned_request = Request("store/moving", "t", images::PullPolicy::kAlways);
  pinned_request.pinned_digest = v1;
  auto pinned = store_.Ensure(pinned_request);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->digest, v1) << "a snapshot's image is its digest, whatever the tag says now";
  EXPECT_THAT(Entries(Unpacked()), UnorderedElementsAre(v1.substr(7), v2.substr(7)));
}

TEST_F(ImageStoreTest, AnIndexResolvesToThisNodesPlatform) {
  TestImage amd64 = CounterImage("amd64");
  TestImage arm64 = CounterImage("arm64");
  arm64.layers.push_back({{LayerMember::File("etc/arch", "arm64\n")}, LayerCompression::kGzip});
  amd64.layers.push_back({{LayerMember::File("etc/arch", "amd64\n")}, LayerCompression::kGzip});
  BuiltImage built;
  const std::string index = Push("store/multi", "v1", {amd64, arm64}, &built);
  ASSERT_EQ(built.platforms.size(), 2u);
  images::ImageStoreOptions options{.root = dir_.path().string()};
  options.platform = {"linux", "arm64", ""};
  images::ImageStore arm_store(options, client_);
  ASSERT_TRUE(arm_store.Open().ok());
  auto image = arm_store.Ensure(Request("store/multi", "v1"));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_NE(image->digest, index) << "the digest recorded is the platform's manifest, not the index";
  EXPECT_EQ(image->digest, built.platforms[1].manifest.digest);
  std::ifstream arch(image->rootfs + "/etc/arch");
  std::string got;
  std::getline(arch, got);
  EXPECT_EQ(got, "arm64");
  // A node of another platform (its own cache: the tag→digest record is per node).
  options.root = (dir_.path() / "s390x").string();
  options.platform = {"linux", "s390x", ""};
  images::ImageStore s390x_store(options, client_);
  ASSERT_TRUE(s390x_store.Open().ok());
  EXPECT_EQ(s390x_store.Ensure(Request("store/multi", "v1")).status().reason(), "platform_not_found");
}

TEST_F(ImageStoreTest, ConcurrentStartsOfOneImagePullItOnce) {
  Push("store/together", "v1", {CounterImage()});
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] { ok += store_.Ensure(Request("store/together", "v1")).ok(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(observer_.pulls, std::vector<std::string>{"success"});
  EXPECT_EQ(observer_.hits.load(), 3);
  EXPECT_EQ(Entries(Unpacked()).size(), 1u);
}

TEST_F(ImageStoreTest, ACorruptedBlobLeavesNothingInTheCache) {
  // A layer of its own: the busybox layer is shared with every other test's images.
  TestImage own = CounterImage();
  own.layers.push_back({{LayerMember::File("etc/corrupt-me", std::string(4096, 'c'))}, LayerCompression::kNone});
  BuiltImage built;
  Push("store/corrupt", "v1", {own}, &built);
  const std::string blob = registry_->BlobDataPath(built.platforms[0].layers[1].digest);
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f) << blob;
    f.seekp(100);
    f.write("XXXXXXXX", 8);  // same size, other bytes
  }
  auto image = store_.Ensure(Request("store/corrupt", "v1"));
  EXPECT_EQ(image.status().reason(), images::pull_reason::kDigestMismatch) << image.status().ToString();
  EXPECT_THAT(Entries(Unpacked()), IsEmpty());
  EXPECT_THAT(Leftovers(), IsEmpty());
}

TEST_F(ImageStoreTest, ARefusedLayerLeavesNothingInTheCache) {
  TestImage hostile = CounterImage();
  hostile.layers.push_back({{LayerMember::File("../escaped", "x")}, LayerCompression::kGzip});
  Push("store/hostile", "v1", {hostile});
  auto image = store_.Ensure(Request("store/hostile", "v1"));
  EXPECT_EQ(image.status().reason(), images::kBadLayer) << image.status().ToString();
  EXPECT_THAT(Entries(Unpacked()), IsEmpty());
  EXPECT_THAT(Leftovers(), IsEmpty());
  EXPECT_FALSE(fs::exists(dir_.path() / "images" / "escaped"));
  EXPECT_FALSE(fs::exists(dir_.path() / "images" / "tmp" / "escaped"));
}

TEST_F(ImageStoreTest, ARegistryThatIsDownFailsTheStartAndCostsNothing) {
  Push("store/down", "v1", {CounterImage()});
  ASSERT_TRUE(registry_->Stop().empty());
  auto image = store_.Ensure(Request("store/down", "v1"));
  EXPECT_EQ(image.status().reason(), images::pull_reason::kRegistryUnavailable);
  EXPECT_THAT(Entries(Unpacked()), IsEmpty());
  ASSERT_TRUE(registry_->Restart().empty());
  EXPECT_TRUE(store_.Ensure(Request("store/down", "v1")).ok()) << "the next attempt pulls";
}

TEST_F(ImageStoreTest, EvictionTakesTheLeastRecentlyUsedAndNeverOneInUseOrHeld) {
  std::vector<std::string> digests;
  for (const char* tag : {"a", "b", "c", "d"}) {
    TestImage image = CounterImage();
    image.layers.push_back({{LayerMember::File("etc/tag", tag)}, LayerCompression::kGzip});
    digests.push_back(Push("store/evict", tag, {image}));
  }
  // Every image is the same size; the budget holds three and a half of them.
  int64_t one = 0;
  {
    auto probe = store_.Ensure(Request("store/evict", "a"));
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    one = probe->bytes;
  }
  images::ImageStoreOptions options{.root = dir_.path().string(), .budget_bytes = one * 7 / 2};
  // Every image here was used seconds ago: what the grace protects is checked below.
  options.recent_use_grace = std::chrono::seconds(0);
  images::ImageStore bounded(options, client_, &observer_);
  ASSERT_TRUE(bounded.Open().ok());
  std::optional<images::LocalImage> held_b;
  for (const char* tag : {"a", "b", "c", "d"}) {
    auto image = bounded.Ensure(Request("store/evict", tag));
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    if (std::string(tag) == "b") held_b = *image;  // a start between its lookup and its sandbox
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // last use has 1 s resolution
  }
  // a runs in an actor, b is held: of c and d the older, c, goes.
  EXPECT_THAT(bounded.Collect({digests[0]}), ElementsAre(digests[2]));
  EXPECT_THAT(Entries(Unpacked()), UnorderedElementsAre(digests[0].substr(7), digests[1].substr(7),
                                                        digests[3].substr(7)));
  EXPECT_EQ(observer_.evictions.load(), 1);
  // b's start is over; a budget of one and a half images leaves only a, in use.
  held_b.reset();
  options.budget_bytes = one * 3 / 2;
  images::ImageStore tight(options, client_, &observer_);
  // With the default grace, images used in the last ten minutes stay whatever the budget.
  images::ImageStore graced(images::ImageStoreOptions{.root = dir_.path().string(), .budget_bytes = 1}, client_);
  EXPECT_THAT(graced.Collect({}), IsEmpty());
  EXPECT_THAT(tight.Collect({digests[0]}), ElementsAre(digests[1], digests[3]));
  EXPECT_THAT(Entries(Unpacked()), ElementsAre(digests[0].substr(7)));
  EXPECT_THAT(Leftovers(), IsEmpty());
}

}  // namespace
}  // namespace stasis::testing
