// What verifying a committed snapshot costs a restore: a snapshot of --mb MiB (runsc's layout:
// a large pages file, a small metadata file, a small checkpoint.img) is written, completed and
// committed through SnapshotStore, then, interleaved --rounds times in one run:
//   baseline  every byte of the same files read into a 1 MiB buffer and dropped (what
//             `cat files > /dev/null` does; runsc's restore reads at least this)
//   verify    SnapshotStore::CheckForRestore(committed): the manifest, the owner, every file's
//             chunk's sha256, on every CPU the process may use
// each with the page cache warm (the files just read) and cold (each file's pages evicted first
// with fsync + posix_fadvise(DONTNEED), which needs no global drop_caches). Prints the medians,
// the MB/s, the CPU time of each (all threads: the cost whatever else the machine runs) and
// verify/baseline wall time as a ratio. Run by hack/bench/restore-verify.sh.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/parallel.h"
#include "snapshots/snapshot_store.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr char kNs[] = "bench";
constexpr char kName[] = "restore";
constexpr char kId[] = "s1";
constexpr char kUid[] = "bench-uid";

void WriteRandom(const fs::path& p, size_t bytes) {
  const int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::exit(2);
  std::mt19937_64 rng(42);
  std::vector<uint64_t> buf((1 << 20) / 8);
  for (size_t done = 0; done < bytes;) {
    for (auto& w : buf) w = rng();
    const size_t n = std::min(bytes - done, buf.size() * 8);
    if (write(fd, buf.data(), n) != static_cast<ssize_t>(n)) std::exit(2);
    done += n;
  }
  fsync(fd);
  close(fd);
}

// Reads every byte of `files`, as cat > /dev/null would; returns the bytes read.
size_t ReadAll(const std::vector<fs::path>& files) {
  auto buf = std::make_unique<char[]>(1 << 20);
  size_t total = 0;
  for (const auto& f : files) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) std::exit(3);
    for (ssize_t n; (n = read(fd, buf.get(), 1 << 20)) > 0;) total += static_cast<size_t>(n);
    close(fd);
  }
  return total;
}

void Evict(const std::vector<fs::path>& files) {
  for (const auto& f : files) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

// CPU time of the whole process (every thread), in ms: what the work costs whatever else runs.
double CpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

struct Sample {
  double wall_ms = 0, cpu_ms = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mb = 1024;
  int rounds = 5;
  std::string dir = "/tmp/stasis-bench-restore-verify";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mb")) mb = std::strtoul(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  spdlog::set_level(spdlog::level::warn);  // the store's per-verify log lines are not the report
  fs::remove_all(dir);
  stasis::SnapshotStore store(dir + "/local", dir + "/store");
  fs::create_directories(dir + "/store");
  auto partial = store.BeginLocal(kNs, kName, kId);
  if (!partial.ok()) return 2;
  WriteRandom(fs::path(*partial) / "pages.img", mb << 20);
  WriteRandom(fs::path(*partial) / "pages_meta.img", 256 << 10);
  WriteRandom(fs::path(*partial) / "checkpoint.img", 1 << 20);
  stasis::SnapshotManifest m;
  m.id = kId;
  m.ns = kNs;
  m.name = kName;
  m.owner_uid = kUid;
  m.scope = "Full";
  m.trigger = "Suspend";
  if (!store.CompleteLocal(m).ok() || !store.Commit(kNs, kName, kId, true).ok()) return 2;
  const fs::path committed = store.StorePath(kNs, kName, kId);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(committed)) {
    if (e.path().filename() != "manifest.json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  size_t bytes = 0;
  for (const auto& f : files) bytes += fs::file_size(f);

  std::vector<Sample> base_warm, verify_warm, base_cold, verify_cold;
  auto time = [](auto&& fn) {
    const auto t0 = Clock::now();
    const double c0 = CpuMs();
    fn();
    return Sample{std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), CpuMs() - c0};
  };
  auto verify = [&] {
    if (!store.CheckForRestore(kNs, kName, kId, true, kUid).ok()) std::exit(4);
  };
  ReadAll(files);  // warm once
  for (int r = 0; r < rounds; ++r) {
    base_warm.push_back(time([&] { ReadAll(files); }));
    verify_warm.push_back(time(verify));
    Evict(files);
    base_cold.push_back(time([&] { ReadAll(files); }));
    Evict(files);
    verify_cold.push_back(time(verify));
  }
  const double mib = static_cast<double>(bytes) / (1 << 20);
  std::printf("snapshot: %zu bytes in %zu files (%.0f MiB), %d rounds, %d verify threads (8 MiB chunks)\n", bytes,
              files.size(), mib, rounds, stasis::AvailableCpus());
  std::printf("%-6s %10s %10s %10s %10s %10s %10s %8s\n", "cache", "read_ms", "verify_ms", "read_MB/s",
              "verify_MB/s", "read_cpu", "verify_cpu", "ratio");
  auto row = [&](const char* cache, const std::vector<Sample>& b, const std::vector<Sample>& v) {
    auto wall = [](const std::vector<Sample>& s) {
      std::vector<double> out;
      for (const auto& x : s) out.push_back(x.wall_ms);
      return Median(out);
    };
    auto cpu = [](const std::vector<Sample>& s) {
      std::vector<double> out;
      for (const auto& x : s) out.push_back(x.cpu_ms);
      return Median(out);
    };
    const double bm = wall(b), vm = wall(v);
    std::printf("%-6s %10.1f %10.1f %10.0f %10.0f %10.1f %10.1f %8.2f\n", cache, bm, vm, mib / (bm / 1000),
                mib / (vm / 1000), cpu(b), cpu(v), vm / bm);
  };
  row("warm", base_warm, verify_warm);
  row("cold", base_cold, verify_cold);
  fs::remove_all(dir);
  return 0;
}
