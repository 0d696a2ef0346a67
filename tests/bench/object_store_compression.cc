// What compressing snapshot chunks costs and saves, for hack/bench/object-store-compression.sh:
//   bench_object_store_compression --mb N --rounds R --dir DIR [--settings none,zstd:1,zstd:3]
// with AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// STASIS_S3_BUCKET set (hack/object-store.sh up prints them).
//
// The image (one pages.img of N MiB) stands in for a checkpoint's memory: per MiB, 2 of 5 are
// code and data (the bytes of this machine's /usr/lib and /usr/bin, read in order), 2 of 5
// random (weights and already-compressed data: incompressible, the worst case for them) and 1
// of 5 zero pages. Per setting it measures, on one core, the chunk codec's encode and decode
// throughput and sha256's (the transfer's other CPU work) over the first 256 MiB, then the
// ratio and the real put and fetch through ObjectStoreBackend, and derives the link speed above
// which compression costs more than it saves: the transfers are pipelined across cores, so with
// n cores an upload takes max(bytes·(1/H + 1/C)/n, ratio·bytes/link) against
// max(bytes/(n·H), bytes/link) without — compression loses once link > n / (1/H + 1/C).
#include <dirent.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/parallel.h"
#include "snapshots/object_store_backend.h"
#include "snapshots/encryption_key.h"
#include "base/sha256.h"
#include "snapshots/snapshot_store.h"
#include "tests/bench/object_store_bench.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Real code and data: every regular file under the directories, in sorted order, cycled.
class FileBytes {
 public:
  FileBytes() {
    for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/bin"}) {
      std::error_code ec;
      for (const auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec)) {
        if (e.is_regular_file(ec) && !e.is_symlink(ec)) files_.push_back(e.path());
      }
    }
    std::sort(files_.begin(), files_.end());
  }
  void Fill(char* out, size_t n) {
    while (n > 0) {
      if (!in_.is_open() || in_.peek() == EOF) {
        in_.close();
        in_.clear();
        in_.open(files_[next_++ % files_.size()], std::ios::binary);
        continue;
      }
      in_.read(out, static_cast<std::streamsize>(n));
      const auto got = static_cast<size_t>(in_.gcount());
      out += got;
      n -= got;
    }
  }

 private:
  std::vector<fs::path> files_;
  size_t next_ = 0;
  std::ifstream in_;
};

void WriteImage(const fs::path& p, size_t mb) {
  std::ofstream out(p, std::ios::binary);
  FileBytes files;
  std::mt19937_64 rng(7);
  std::string block(kMiB, '\0');
  for (size_t i = 0; i < mb; ++i) {
    const size_t kind = i % 5;
    if (kind < 2) {
      files.Fill(block.data(), kMiB);
    } else if (kind < 4) {
      for (size_t j = 0; j < kMiB; j += 8) {
        const uint64_t w = rng();
        std::memcpy(block.data() + j, &w, 8);
      }
    } else {
      std::fill(block.begin(), block.end(), '\0');
    }
    out.write(block.data(), static_cast<std::streamsize>(kMiB));
  }
}

struct CpuRates {
  double encode = 0, decode = 0, sha = 0;  // MB/s of plaintext on one core
  double ratio = 1;                        // stored bytes / plaintext bytes
};

// One core's rates for `codec` over `sample` (whole chunks of the image).
CpuRates MeasureOneCore(const stasis::ChunkCodec& codec, const std::string& sample) {
  CpuRates r;
  const size_t chunk = static_cast<size_t>(stasis::kDefaultChunkBytes);
  std::vector<std::string> objects;
  std::string out, scratch;
  stasis::ChunkBuffers buffers;
  size_t stored = 0;
  double encoding = 0;  // the copies kept for decoding are not the codec's work
  for (size_t off = 0; off < sample.size(); off += chunk) {
    const stasis::ChunkPlace place{"bench/x/s", "", 0, static_cast<int64_t>(off / chunk)};
    const auto t = Clock::now();
    auto o = codec.Encode(std::string_view(sample).substr(off, chunk), place, out, scratch);
    encoding += SecondsSince(t);
    if (!o.ok()) std::exit(3);
    objects.emplace_back(*o);
    stored += o->size();
  }
  const double mb = static_cast<double>(sample.size()) / 1e6;
  r.encode = mb / encoding;
  r.ratio = static_cast<double>(stored) / static_cast<double>(sample.size());
  auto t0 = Clock::now();
  for (size_t i = 0; i < objects.size(); ++i) {
    const stasis::ChunkPlace place{"bench/x/s", "", 0, static_cast<int64_t>(i)};
    if (!codec.Decode(objects[i], place, static_cast<int64_t>(std::min(chunk, sample.size() - i * chunk)), buffers).ok()) {
      std::exit(3);
    }
  }
  r.decode = mb / SecondsSince(t0);
  t0 = Clock::now();
  stasis::Sha256 h;
  h.Update(sample.data(), sample.size());
  (void)h.FinishHex();
  r.sha = mb / SecondsSince(t0);
  return r;
}

// The link speed (MB/s) above which a codec of `rate` MB/s a core costs more than it saves,
// with `cores` cores also hashing at `sha` MB/s a core.
double Crossover(double rate, double sha, int cores) { return cores / (1 / sha + 1 / rate); }

double Gbit(double mb_per_s) { return mb_per_s * 8 / 1000; }

// "none", "zstd:3", "aes" or "zstd:3+aes" (encrypted with a random key).
stasis::ChunkCodec CodecFor(const std::string& setting) {
  const bool aes = setting.size() >= 3 && setting.compare(setting.size() - 3, 3, "aes") == 0;
  const std::string compression = !aes ? setting : setting == "aes" ? "none" : setting.substr(0, setting.size() - 4);
  auto s = stasis::ParseCompressionSetting(compression);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().message().c_str());
    std::exit(2);
  }
  std::shared_ptr<const stasis::EncryptionKey> key;
  if (aes) {
    std::random_device rd;
    std::string raw(stasis::kEncryptionKeyBytes, '\0');
    for (auto& c : raw) c = static_cast<char>(rd());
    key = std::make_shared<const stasis::EncryptionKey>(*stasis::EncryptionKey::FromBytes(raw));
  }
  return stasis::ChunkCodec(*s, std::move(key));
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

uint64_t StoredBytes(stasis::S3Client& client, const std::string& prefix) {
  uint64_t total = 0;
  auto objects = client.ListAllObjects(prefix);
  if (!objects.ok()) std::exit(3);
  for (const auto& o : *objects) total += o.size;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mb = 1024;
  int rounds = 1;
  std::string dir = "/var/tmp/stasis-bench-object-store-compression", settings = "none,zstd:1,zstd:3,aes,zstd:1+aes";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mb")) mb = std::strtoul(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--settings")) settings = argv[i + 1];
  }
  spdlog::set_level(spdlog::level::warn);
  const auto env = stasis::bench::StoreFromEnvironment();
  if (!env) return 2;
  const stasis::S3Endpoint& endpoint = env->endpoint;
  const std::string& bucket = env->bucket;
  fs::remove_all(dir);
  stasis::SnapshotStore local(dir + "/local", std::string());
  auto done = stasis::bench::CompleteBenchSnapshot(local, "codec", [&](const fs::path& p) { WriteImage(p, mb); });
  if (!done.ok()) return 2;
  const fs::path source = local.LocalPath("bench", "codec", "s0");
  std::string sample(std::min(mb, size_t{256}) * kMiB, '\0');
  std::ifstream(source / "pages.img", std::ios::binary).read(sample.data(), static_cast<std::streamsize>(sample.size()));
  const int cores = stasis::AvailableCpus();
  const double total_mb = static_cast<double>(done->total_bytes) / 1e6;
  std::printf("image: %.0f MB (2/5 code and data from /usr, 2/5 random, 1/5 zero pages), %d rounds, %d cores\n",
              total_mb, rounds, cores);
  std::printf("%-8s %7s %11s %11s %11s %10s %10s %10s %10s %14s %14s\n", "setting", "ratio", "enc MB/s/c",
              "dec MB/s/c", "sha MB/s/c", "put ms", "put MB/s", "get ms", "get MB/s", "up x-over/c", "down x-over/c");
  stasis::S3Client client(endpoint, bucket);
  const std::vector<std::string> all = Split(settings);
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string& setting = all[i];
    const stasis::ChunkCodec codec = CodecFor(setting);
    const CpuRates cpu = MeasureOneCore(codec, sample);
    stasis::ObjectStoreBackend backend(std::make_unique<stasis::S3Client>(endpoint, bucket),
                                       stasis::S3Location{bucket, "bench-codec/"}, dir + "/cache", 0, codec);
    std::vector<double> put, get;
    uint64_t stored = 0;
    for (int r = 1; r <= rounds; ++r) {
      stasis::SnapshotManifest mr = *done;
      mr.id = "s" + std::to_string(i) + "-" + std::to_string(r);
      auto t0 = Clock::now();
      if (!backend.Put(source, mr, true).ok()) return 3;
      put.push_back(SecondsSince(t0));
      fs::remove_all(dir + "/cache");
      t0 = Clock::now();
      if (!backend.Fetch("bench", "codec", mr.id).ok()) return 3;
      get.push_back(SecondsSince(t0));
      stored = StoredBytes(client, backend.SnapshotPrefix("bench", "codec", mr.id));
      if (!backend.Remove("bench", "codec", mr.id).ok()) return 3;
    }
    std::sort(put.begin(), put.end());
    std::sort(get.begin(), get.end());
    const double p = put[put.size() / 2], g = get[get.size() / 2];
    const bool none = codec.identity();
    std::printf("%-8s %7.3f %11.0f %11.0f %11.0f %10.0f %10.0f %10.0f %10.0f %14s %14s\n", setting.c_str(),
                static_cast<double>(stored) / static_cast<double>(done->total_bytes), none ? 0.0 : cpu.encode,
                none ? 0.0 : cpu.decode, cpu.sha, p * 1000, total_mb / p, g * 1000, total_mb / g,
                none ? "-" : (std::to_string(static_cast<int>(Crossover(cpu.encode, cpu.sha, 1))) + " MB/s").c_str(),
                none ? "-" : (std::to_string(static_cast<int>(Crossover(cpu.decode, cpu.sha, 1))) + " MB/s").c_str());
    if (codec.compression() != stasis::Compression::kNone) {
      std::printf("crossover %s: upload %.2f Gbit/s a core (%.2f on this machine's %d cores), download %.2f Gbit/s a core; "
                  "sample ratio %.3f\n",
                  setting.c_str(), Gbit(Crossover(cpu.encode, cpu.sha, 1)), Gbit(Crossover(cpu.encode, cpu.sha, cores)),
                  cores, Gbit(Crossover(cpu.decode, cpu.sha, 1)), cpu.ratio);
    }
  }
  fs::remove_all(dir);
  return 0;
}
