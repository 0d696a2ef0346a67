#include "base/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace stasis {

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

size_t WorkersFor(size_t n, int threads) {
  const int wanted = threads > 0 ? threads : AvailableCpus();
  return std::clamp<size_t>(static_cast<size_t>(wanted), 1, std::max<size_t>(n, 1));
}

Status ParallelFor(size_t n, int threads, const std::function<Status(size_t i, size_t worker)>& fn) {
  std::vector<Status> results(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&](size_t worker) {
    for (size_t i = next++; i < n && !failed; i = next++) {
      results[i] = fn(i, worker);
      if (!results[i].ok()) failed = true;
    }
  };
  const size_t workers = WorkersFor(n, threads);
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  for (const auto& r : results) {
    if (!r.ok()) return r;
  }
  return OkStatus();
}

}  // namespace stasis
