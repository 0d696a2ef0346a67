// Actors from images, measured (hack/bench/image-pull.sh). A real registry (hack/registry.sh)
// holds an image of --mb MiB built here (busybox plus files half random, half text, over four
// gzip layers). Two comparisons, each interleaved round by round in one run:
//
//   cold   the image pulled and unpacked into an empty cache by the node agent's ImageStore,
//          against `skopeo copy docker://… oci:…` then `umoci unpack` of the same image — the
//          field's tools for the same work. Target: stasis / baseline ≤ 1.1 (median).
//   warm   a sandbox started from the cached image (the cache lookup, the runtime spec and
//          config.json written, `runsc run` on the shared rootfs with its own overlay), against
//          `runsc run` of an ordinary bundle with the same counter; each until runsc has
//          returned. Target: image p50 − bundle p50 ≤ 50 ms.
//
//   bench_image_pull [--rounds N] [--mb M] [--warm-rounds N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/subprocess.h"
#include "images/image_reference.h"
#include "images/image_store.h"
#include "images/registry_client.h"
#include "images/runtime_spec.h"
#include "runtimes/runsc_driver.h"
#include "tests/support/oci_test_image.h"
#include "tests/support/sandbox.h"
#include "tests/support/test_registry.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace stasis;
using namespace stasis::testing;

namespace {

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "bench_image_pull: %s\n", what.c_str());
  std::exit(1);
}

// Four layers of files: half random bytes (incompressible), half repeated text.
TestImage BigImage(int mb) {
  TestImage image = CounterImage();
  std::mt19937_64 rng(7);
  const size_t per_layer = static_cast<size_t>(mb) * (1 << 20) / 4;
  for (int l = 0; l < 4; ++l) {
    TestLayer layer;
    std::string random(per_layer / 2, '\0');
    for (auto& c : random) c = static_cast<char>(rng());
    std::string text;
    while (text.size() < per_layer / 2) text += "the quick brown fox jumps over the lazy dog " + std::to_string(text.size());
    layer.members.push_back(LayerMember::Dir("data"));
    layer.members.push_back(LayerMember::File("data/random-" + std::to_string(l), random));
    layer.members.push_back(LayerMember::File("data/text-" + std::to_string(l), text));
    image.layers.push_back(std::move(layer));
  }
  return image;
}

struct Setup {
  std::unique_ptr<TestRegistry> registry;
  std::string reference;  // host/repo:tag
  std::string work;
};

double ColdStasis(const Setup& s, int round) {
  const std::string root = s.work + "/stasis-" + std::to_string(round);
  images::RegistryClient client(images::RegistryClientOptions{.ca_file = s.registry->ca_file()});
  images::ImageStore store(images::ImageStoreOptions{.root = root}, client);
  if (!store.Open().ok()) Fail("cannot open the cache in " + root);
  images::PullRequest request;
  request.image = *images::ParseImageReference(s.reference);
  request.auths = {{s.registry->host(), *s.registry->credentials()}};
  const auto start = Clock::now();
  auto image = store.Ensure(request);
  const double took = Since(start);
  if (!image.ok()) Fail("stasis pull: " + image.status().ToString());
  fs::remove_all(root);
  return took;
}

double ColdBaseline(const Setup& s, int round) {
  const std::string layout = s.work + "/oci-" + std::to_string(round);
  const std::string bundle = s.work + "/bundle-" + std::to_string(round);
  const auto& creds = *s.registry->credentials();
  const auto start = Clock::now();
  auto copy = RunCommand({"skopeo", "copy", "--src-cert-dir", fs::path(s.registry->ca_file()).parent_path().string(),
                          "--src-creds", creds.username + ":" + creds.password, "docker://" + s.reference,
                          "oci:" + layout + ":bench"},
                         std::chrono::minutes(10));
  if (!copy.ok() || !copy->success()) Fail("skopeo copy: " + (copy.ok() ? copy->err : copy.status().ToString()));
  auto unpack = RunCommand({"umoci", "unpack", "--image", layout + ":bench", bundle}, std::chrono::minutes(10));
  if (!unpack.ok() || !unpack->success()) Fail("umoci unpack: " + (unpack.ok() ? unpack->err : unpack.status().ToString()));
  const double took = Since(start);
  fs::remove_all(layout);
  fs::remove_all(bundle);
  return took;
}

// One sandbox started and deleted: seconds from the start of `prepare` until runsc run returned.
double StartOnce(RunscDriver& driver, SandboxRef ref, const std::function<void(SandboxRef&)>& prepare) {
  fs::create_directories(ref.root);
  const auto start = Clock::now();
  prepare(ref);
  Status run = driver.Run(ref, std::chrono::seconds(60));
  const double took = Since(start);
  if (!run.ok()) Fail("runsc run: " + run.ToString());
  (void)driver.Delete(ref);
  fs::remove_all(ref.root);
  return took;
}

void Warm(const Setup& s, int rounds) {
  images::RegistryClient client(images::RegistryClientOptions{.ca_file = s.registry->ca_file()});
  images::ImageStore store(images::ImageStoreOptions{.root = s.work + "/warm"}, client);
  if (!store.Open().ok()) Fail("cannot open the warm cache");
  images::PullRequest request;
  request.image = *images::ParseImageReference(s.reference);
  request.auths = {{s.registry->host(), *s.registry->credentials()}};
  if (auto first = store.Ensure(request); !first.ok()) Fail("warm pull: " + first.status().ToString());
  Bundle bundle(CounterArgs(), s.work);
  RunscDriver driver(PinnedRunsc());
  std::vector<double> from_bundle, from_image;
  for (int i = 0; i < rounds; ++i) {
    SandboxRef ref{"bench-" + std::to_string(i), s.work + "/run/bench-" + std::to_string(i), "",
                   s.work + "/logs/bench-" + std::to_string(i) + ".log"};
    from_bundle.push_back(StartOnce(driver, ref, [&](SandboxRef& r) { r.bundle = bundle.dir().string(); }));
    from_image.push_back(StartOnce(driver, ref, [&](SandboxRef& r) {
      auto image = store.Ensure(request);
      if (!image.ok() || !image->cache_hit) Fail("the warm image was not a cache hit");
      auto spec = images::BuildRuntimeSpec({.image = image->config, .rootfs = image->rootfs, .hostname = "bench"});
      if (!spec.ok()) Fail("runtime spec: " + spec.status().ToString());
      const std::string dir = s.work + "/image-bundles/" + r.id;
      fs::create_directories(dir);
      std::ofstream(dir + "/config.json") << spec->dump(2);
      r.bundle = dir;
      r.shared_rootfs = true;
    }));
  }
  const double b = Median(from_bundle) * 1000, m = Median(from_image) * 1000;
  std::printf("warm start (create → runsc run returned), %d rounds, p50:\n", rounds);
  std::printf("  bundle  %8.1f ms\n  image   %8.1f ms  (overhead %+.1f ms; target ≤ 50 ms: %s)\n", b, m, m - b,
              m - b <= 50 ? "met" : "missed");
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5, mb = 256, warm_rounds = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--rounds") rounds = value;
    else if (flag == "--mb") mb = value;
    else if (flag == "--warm-rounds") warm_rounds = value;
    else Fail("unknown flag " + flag);
  }
  spdlog::set_level(spdlog::level::warn);
  Setup s;
  TempDir work("stasis-bench-image-");
  s.work = work.path().string();
  std::string error;
  s.registry = TestRegistry::Start(&error);
  if (!s.registry) Fail("registry: " + error);
  const auto built = WriteOciLayout(s.work + "/layout", "bench", {BigImage(mb)});
  if (!built.ok()) Fail("image: " + built.status().ToString());
  if (Status pushed = PushOciLayout(s.work + "/layout", "bench", *s.registry, "bench/big"); !pushed.ok()) {
    Fail("push: " + pushed.ToString());
  }
  s.reference = s.registry->host() + "/bench/big:bench";
  int64_t compressed = 0;
  for (const auto& l : built->platforms[0].layers) compressed += l.size;
  std::printf("image: %d MiB of files, %.1f MiB compressed in %zu layers\n", mb, compressed / 1048576.0,
              built->platforms[0].layers.size());
  std::vector<double> stasis_s, baseline_s;
  for (int i = 0; i < rounds; ++i) {
    stasis_s.push_back(ColdStasis(s, i));
    baseline_s.push_back(ColdBaseline(s, i));
  }
  const double ours = Median(stasis_s), theirs = Median(baseline_s);
  std::printf("cold pull + unpack, %d rounds interleaved, median:\n", rounds);
  std::printf("  skopeo copy + umoci unpack  %7.3f s\n  stasis ImageStore           %7.3f s  (ratio %.3f; target ≤ 1.1: %s)\n",
              theirs, ours, ours / theirs, ours / theirs <= 1.1 ? "met" : "missed");
  Warm(s, warm_rounds);
  return 0;
}
