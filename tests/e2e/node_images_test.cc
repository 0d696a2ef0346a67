// `stasis node` end to end, actors from OCI images (docs/images.md): a real registry
// (hack/registry.sh: Debian's docker-registry, TLS and htpasswd) holding the busybox counter as
// an image the test builds and pushes itself; real runsc. An actor from the image runs, pauses,
// suspends and resumes on a second node agent that never pulled it, on the digest the snapshot
// was taken on even after the tag moved; a private image without its pull secret waits as
// Unauthorized and runs once the secret is named; an image behind a registry token server runs
// with its pull secret; a tag that does not exist is ImageNotFound;
// twenty actors of the image share one unpacked copy. The fixture is
// tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/conditions.h"
#include "tests/support/node_agent_fixture.h"
#include "tests/support/oci_test_image.h"
#include "tests/support/sandbox.h"
#include "tests/support/test_registry.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr char kRepository[] = "stasis/counter";

class ImagesTest : public NodeAgentTest {
 protected:
  static void SetUpTestSuite() {
    NodeAgentTest::SetUpTestSuite();
    std::string error;
    registry_ = TestRegistry::Start(&error).release();
    ASSERT_NE(registry_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }

  // Builds the counter image (plus `extra` members in a layer of their own, to make another
  // digest) and pushes it as kRepository:tag; returns the manifest digest.
  std::string Push(const std::string& tag, std::vector<LayerMember> extra = {}) {
    TestImage image = CounterImage();
    if (!extra.empty()) image.layers.push_back(TestLayer{std::move(extra), LayerCompression::kZstd});
    const std::string layout = (work_.path() / ("layout-" + tag)).string();
    fs::remove_all(layout);
    auto built = WriteOciLayout(layout, tag, {image});
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    if (!built.ok()) return "";
    Status pushed = PushOciLayout(layout, tag, *registry_, kRepository);
    EXPECT_TRUE(pushed.ok()) << pushed.ToString();
    return built->target.digest;
  }

  std::string Image(const std::string& tag) const { return registry_->host() + "/" + kRepository + ":" + tag; }

  // A kubernetes.io/dockerconfigjson Secret with the registry's credentials.
  void CreatePullSecret(const std::string& name, const TestRegistry* registry = registry_) {
    const auto& creds = registry->credentials();
    ASSERT_TRUE(creds.has_value());
    auto r = Kubectl({"create", "secret", "docker-registry", name, "-n", ns_, "--docker-server=" + registry->host(),
                      "--docker-username=" + creds->username, "--docker-password=" + creds->password});
    ASSERT_TRUE(r.success()) << r.Summary();
  }

  Agent* StartImageAgent(const std::string& suffix, int workers = 2) {
    return StartAgent(Node(suffix), PinnedRunsc(), {}, workers, "", {"--registry-ca-file", registry_->ca_file()});
  }

  json ImageSpec(const std::string& node, const std::string& tag, const std::string& desired = "Running") {
    return {{"image", Image(tag)}, {"imagePullSecrets", {{{"name", "registry"}}}}, {"nodeName", node},
            {"desiredState", desired}};
  }

  static std::vector<std::string> Unpacked(const Agent& a) { return Entries(a.root + "/images/unpacked"); }

  static TestRegistry* registry_;
};

TestRegistry* ImagesTest::registry_ = nullptr;

TEST_F(ImagesTest, AnActorFromAnImageResumesOnANodeThatNeverPulledItOnTheDigestItWasTakenOn) {
  const std::string v1 = Push("mover");
  ASSERT_FALSE(v1.empty());
  CreatePullSecret("registry");
  Agent* a = StartImageAgent("a");
  Agent* b = StartImageAgent("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CreateActor("mover", ImageSpec(a->node, "mover"));
  json actor;
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 60s, &actor));
  EXPECT_EQ(StatusField(actor, "imageDigest"), json(v1));
  EXPECT_THAT(Unpacked(*a), ::testing::ElementsAre(v1.substr(7)));
  const long booted = WaitCounter(*a, "mover", 10);

  Patch("mover", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_PAUSED", 30s, &actor));
  Patch("mover", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 30s, &actor));
  const long paused_once = WaitCounter(*a, "mover", booted);

  Patch("mover", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_SUSPENDED", 30s, &actor));
  EXPECT_EQ(StatusField(actor, "latestSnapshot").value("imageDigest", ""), v1);
  // The tag moves to another image before the resume: the snapshot must still get v1.
  const std::string v2 = Push("mover", {LayerMember::File("etc/release", "v2\n")});
  ASSERT_NE(v2, v1);

  Patch("mover", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 60s, &actor));
  EXPECT_EQ(StatusField(actor, "nodeName"), json(b->node));
  EXPECT_EQ(StatusField(actor, "imageDigest"), json(v1)) << "restored onto the tag's new image";
  EXPECT_THAT(Unpacked(*b), ::testing::ElementsAre(v1.substr(7)));
  const long after = WaitCounter(*b, "mover", paused_once);
  EXPECT_GE(after, paused_once) << "restored on " << b->node << " but the counter restarted";
  // Nothing the sandbox wrote reached the shared rootfs: its writes live in its overlay.
  EXPECT_FALSE(fs::exists(b->root + "/images/unpacked/" + v1.substr(7) + "/rootfs/tmp/counter"));
  EXPECT_THAT(Entries(b->root + "/images/tmp"), ::testing::IsEmpty());
}

TEST_F(ImagesTest, APrivateImageWaitsAsUnauthorizedUntilItsPullSecretIsNamed) {
  ASSERT_FALSE(Push("private").empty());
  CreatePullSecret("registry");
  Agent* a = StartImageAgent("a");
  ASSERT_NE(a, nullptr);
  json spec = ImageSpec(a->node, "private");
  spec.erase("imagePullSecrets");
  CreateActor("private", spec);
  json actor;
  // Each attempt says PullingImage before its pull (Progressing=True), and its failure replaces
  // that with the reason; the Ready condition says it too.
  ASSERT_TRUE(WaitActor("private",
                        [](const json& x) {
                          return CondReason(x, "Ready") == api::kReasonUnauthorized &&
                                 CondIs(x, "Progressing", "False") &&
                                 CondReason(x, "Progressing") == api::kReasonUnauthorized;
                        },
                        30s, "Ready=False and Progressing=False, both Unauthorized", &actor));
  EXPECT_NE(StatusOf(actor), "STATUS_RUNNING");
  EXPECT_EQ(StatusField(actor, "workerName"), json()) << "a worker was held while the image could not be pulled";
  ExpectAllWorkersFree(a->node);
  EXPECT_THAT(Unpacked(*a), ::testing::IsEmpty());
  EXPECT_THAT(Entries(a->root + "/images/tmp"), ::testing::IsEmpty());
  // Retried with backoff (1 s, 2 s, 4 s …), not each time its own status write re-enqueues it:
  // a few attempts in five seconds, not hundreds.
  std::this_thread::sleep_for(5s);
  const double attempts = MetricValue(ScrapeMetrics(a->proc->Log()), "stasis_image_pulls_total{result=\"unauthorized\"}");
  EXPECT_GE(attempts, 1);
  EXPECT_LE(attempts, 5) << "pulls of a refused image are not backed off";

  Patch("private", {{"imagePullSecrets", {{{"name", "registry"}}}}});
  ASSERT_TRUE(WaitStatus("private", "STATUS_RUNNING", 60s, &actor));
  WaitCounter(*a, "private", 5);
}

// Hosted registries (Docker Hub, GHCR, Quay) answer with a Bearer challenge. Here the
// distribution project's own token server issues the tokens and the registry accepts nothing
// else, so an actor that runs got its image through the token flow with its pull secret.
TEST_F(ImagesTest, AnImageBehindATokenServerRunsWithItsPullSecret) {
  std::string error;
  auto tokens = TestRegistry::Start(&error, {.token = true});
  ASSERT_NE(tokens, nullptr) << error;
  const std::string repository = tokens->credentials()->username + "/counter";
  const std::string layout = (work_.path() / "layout-token").string();
  auto built = WriteOciLayout(layout, "v1", {CounterImage()});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_TRUE(PushOciLayout(layout, "v1", *tokens, repository).ok());
  CreatePullSecret("token-registry", tokens.get());
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 1, "", {"--registry-ca-file", tokens->ca_file()});
  ASSERT_NE(a, nullptr);
  CreateActor("tokened", {{"image", tokens->host() + "/" + repository + ":v1"},
                          {"imagePullSecrets", {{{"name", "token-registry"}}}},
                          {"nodeName", a->node},
                          {"desiredState", "Running"}});
  json actor;
  ASSERT_TRUE(WaitStatus("tokened", "STATUS_RUNNING", 60s, &actor));
  EXPECT_EQ(StatusField(actor, "imageDigest"), json(built->target.digest));
  WaitCounter(*a, "tokened", 5);
}

TEST_F(ImagesTest, ATagThatDoesNotExistIsImageNotFoundWithAWarning) {
  CreatePullSecret("registry");
  Agent* a = StartImageAgent("a");
  ASSERT_NE(a, nullptr);
  CreateActor("missing", ImageSpec(a->node, "no-such-tag"));
  json actor;
  ASSERT_TRUE(WaitActor("missing", [](const json& x) { return CondReason(x, "Ready") == api::kReasonImageNotFound; },
                        30s, "Ready=False ImageNotFound", &actor));
  EXPECT_THAT(CondMessage(actor, "Ready"), HasSubstr("no-such-tag"));
  ExpectAllWorkersFree(a->node);
  bool warned = false;
  for (int i = 0; i < 50 && !warned; ++i) {
    auto r = Kubectl({"get", "events", "-n", ns_, "-o", "json"});
    if (r.success()) {
      for (const auto& e : json::parse(r.out).value("items", json::array())) {
        warned |= e["involvedObject"].value("name", "") == "missing" && e.value("type", "") == "Warning" &&
                  e.value("reason", "") == api::kReasonImageNotFound;
      }
    }
    if (!warned) std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(warned) << "no Warning Event ImageNotFound";
}

// Twenty actors of one image on one node: one unpacked copy, one pull, and every lookup after
// the first a cache hit. The start times are printed (the first pulls; the rest do not).
TEST_F(ImagesTest, TwentyActorsOfOneImageShareOneUnpackedCopy) {
  constexpr int kActors = 20;
  const std::string digest = Push("shared");
  ASSERT_FALSE(digest.empty());
  CreatePullSecret("registry");
  Agent* a = StartImageAgent("a", kActors);
  ASSERT_NE(a, nullptr);
  std::vector<double> seconds;
  for (int i = 0; i < kActors; ++i) {
    const std::string name = "shared-" + std::to_string(i);
    const auto start = Clock::now();
    CreateActor(name, ImageSpec(a->node, "shared"));
    ASSERT_TRUE(WaitStatus(name, "STATUS_RUNNING", 60s)) << name;
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  EXPECT_THAT(Unpacked(*a), ::testing::ElementsAre(digest.substr(7)));
  // Twenty sandboxes run on the shared rootfs, none writes into it: runsc keeps each one's
  // overlay in its own root (its default would put a filestore file in the rootfs).
  for (const auto& entry : Entries(a->root + "/images/unpacked/" + digest.substr(7) + "/rootfs")) {
    EXPECT_EQ(entry.rfind(".gvisor", 0), std::string::npos) << entry << " written into the shared rootfs";
  }
  std::printf("[ images ] create to RUNNING: first %.3f s (pull), 20th %.3f s (cache hit)\n", seconds.front(),
              seconds.back());
  const std::string metrics = ScrapeMetrics(a->proc->Log());
  // A start tried again (its status write lost a conflict on a loaded machine) looks the image
  // up again: a hit too. What sharing means is one miss and one pull.
  EXPECT_EQ(MetricValue(metrics, "stasis_image_cache_lookups_total{result=\"miss\"}"), 1) << metrics;
  EXPECT_GE(MetricValue(metrics, "stasis_image_cache_lookups_total{result=\"hit\"}"), kActors - 1) << metrics;
  EXPECT_THAT(metrics, HasSubstr("stasis_image_pulls_total{result=\"success\"} 1"));
  for (int i = 0; i < kActors; ++i) WaitCounter(*a, "shared-" + std::to_string(i), 3);
}

}  // namespace
}  // namespace stasis::testing
