// Snapshot upload and download through ObjectStoreBackend against curl's own SigV4 client on
// the same store, interleaved, for hack/bench/object-store.sh:
//   bench_object_store_transfer --mb N --rounds R --dir DIR
// with AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// STASIS_S3_BUCKET set (hack/object-store.sh up prints them). A local snapshot of N MiB (one
// pages.img of random bytes and a small checkpoint.img) is completed once; each round then
//   stasis put   ObjectStoreBackend::Put under a new id (every chunk read, checked, sent)
//   curl put     `curl --aws-sigv4 -T pages.img` of the same bytes as one object
//   stasis get   ObjectStoreBackend::Fetch of that id into an empty cache (every chunk checked)
//   curl get     `curl --aws-sigv4 -o` of the object
// and prints the medians, MB/s and stasis / curl throughput ratios.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "snapshots/object_store_backend.h"
#include "snapshots/snapshot_store.h"
#include "tests/bench/object_store_bench.h"
#include "tests/bench/s3_curl.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double TimeMs(F&& fn) {
  const auto t0 = Clock::now();
  if (!fn()) std::exit(3);
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void WriteRandom(const fs::path& p, size_t bytes) {
  std::ofstream out(p, std::ios::binary);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> buf((1 << 20) / 8);
  for (size_t done = 0; done < bytes; done += buf.size() * 8) {
    for (auto& w : buf) w = rng();
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(std::min(bytes - done, buf.size() * 8)));
  }
}

bool Curl(const stasis::S3Endpoint& e, const std::vector<std::string>& args) {
  if (stasis::Status st = stasis::bench::CurlSigV4(e, args); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mb = 1024;
  int rounds = 3;
  std::string dir = "/var/tmp/stasis-bench-object-store";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mb")) mb = std::strtoul(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  spdlog::set_level(spdlog::level::warn);
  const auto env = stasis::bench::StoreFromEnvironment();
  if (!env) return 2;
  const stasis::S3Endpoint* endpoint = &env->endpoint;
  const char* bucket = env->bucket.c_str();
  fs::remove_all(dir);
  const stasis::S3Location location{bucket, "bench/"};
  auto backend = std::make_unique<stasis::ObjectStoreBackend>(
      std::make_unique<stasis::S3Client>(*endpoint, bucket), location, dir + "/cache");
  stasis::ObjectStoreBackend& b = *backend;
  stasis::SnapshotStore store(dir + "/local", std::move(backend));
  auto done = stasis::bench::CompleteBenchSnapshot(store, "transfer", [&](const fs::path& p) { WriteRandom(p, mb << 20); });
  if (!done.ok()) return 2;
  const fs::path source = store.LocalPath("bench", "transfer", "s0");
  const std::string pages = (source / "pages.img").string();
  const std::string object = endpoint->url + "/" + bucket + "/bench/curl/pages.img";

  std::vector<double> put_s, put_c, get_s, get_c;
  for (int r = 1; r <= rounds; ++r) {
    stasis::SnapshotManifest mr = *done;
    mr.id = "s" + std::to_string(r);
    put_s.push_back(TimeMs([&] { return b.Put(source, mr, true).ok(); }));
    put_c.push_back(TimeMs([&] { return Curl(*endpoint, {"-H", stasis::bench::kUnsignedPayloadHeader, "-T", pages, object}); }));
    fs::remove_all(dir + "/cache");
    get_s.push_back(TimeMs([&] { return b.Fetch("bench", "transfer", mr.id).ok(); }));
    get_c.push_back(TimeMs([&] { return Curl(*endpoint, {"-o", dir + "/curl.out", object}); }));
    fs::remove(dir + "/curl.out");
  }
  const double total_mb = static_cast<double>(done->total_bytes) / 1e6;
  std::printf("image: %.0f MB, %d rounds\n%-12s %12s %10s\n", total_mb, rounds, "", "median ms", "MB/s");
  auto row = [&](const char* what, const std::vector<double>& v) {
    std::printf("%-12s %12.1f %10.0f\n", what, Median(v), total_mb / (Median(v) / 1000));
  };
  row("stasis put", put_s);
  row("curl put", put_c);
  row("stasis get", get_s);
  row("curl get", get_c);
  std::printf("ratio stasis/curl throughput: upload %.3f, download %.3f\n", Median(put_c) / Median(put_s),
              Median(get_c) / Median(get_s));
  fs::remove_all(dir);
  return 0;
}
