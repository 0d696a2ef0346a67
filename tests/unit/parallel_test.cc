// ParallelFor: every index once, worker ids within the pool, the lowest-index failure whichever
// thread met it, nothing new started after a failure.
#include "base/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

namespace stasis {
namespace {

TEST(ParallelForTest, EveryIndexRunsOnceOnAWorkerOfThePool) {
  for (int threads : {0, 1, 3, 64}) {
    std::vector<std::atomic<int>> runs(100);
    std::mutex mu;
    std::set<size_t> workers;
    const Status s = ParallelFor(runs.size(), threads, [&](size_t i, size_t worker) {
      ++runs[i];
      std::lock_guard<std::mutex> lock(mu);
      workers.insert(worker);
      return OkStatus();
    });
    EXPECT_TRUE(s.ok());
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
    EXPECT_LT(*workers.rbegin(), WorkersFor(runs.size(), threads)) << threads;
  }
  EXPECT_EQ(WorkersFor(5, 64), 5u);
  EXPECT_EQ(WorkersFor(0, 4), 1u);
  EXPECT_EQ(WorkersFor(100, 0), static_cast<size_t>(AvailableCpus()));
}

TEST(ParallelForTest, TheLowestFailingIndexIsReportedAndNothingNewStartsAfterIt) {
  std::atomic<int> started{0};
  const Status s = ParallelFor(1000, 4, [&](size_t i, size_t) {
    ++started;
    if (i == 3 || i == 5) return Status(Code::kInternal, "item " + std::to_string(i));
    return OkStatus();
  });
  EXPECT_EQ(s.message(), "item 3");
  EXPECT_LT(started.load(), 1000) << "the pool stops taking items after a failure";
  EXPECT_TRUE(ParallelFor(0, 4, [](size_t, size_t) { return Status(Code::kInternal, "never"); }).ok());
}

}  // namespace
}  // namespace stasis
