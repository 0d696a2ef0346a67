// The work queue's client-go contract: dedup, one worker per key, re-add during processing,
// delayed adds and per-key backoff on a fake clock, shutdown with drain, metrics hooks.
#include "controller/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "tests/support/fake_clock.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

// Polls `pred` in real time; the queue's delay thread reacts to the fake clock within ~1 ms.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = 2s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(200us);
  }
  return true;
}

// Exact delays on the fake clock: the jitter (tested below) set to nothing.
constexpr BackoffPolicy kNoJitter{5ms, 1000s, 2.0, 0.0};

WorkQueueOptions WithClock(FakeClock& clock) {
  WorkQueueOptions o;
  o.name = "test";
  o.clock = &clock;
  o.rate_limiter = std::make_unique<ItemExponentialRateLimiter>(kNoJitter);
  return o;
}

TEST(WorkQueueTest, KeyAddedManyTimesIsProcessedOnce) {
  WorkQueue q;
  q.Add("ns/a");
  q.Add("ns/a");
  q.Add("ns/b");
  q.Add("ns/a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.Get(), "ns/a");  // FIFO: first-added order is kept
  EXPECT_EQ(q.Get(), "ns/b");
  EXPECT_EQ(q.Len(), 0u);
  q.Done("ns/a");
  q.Done("ns/b");
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_EQ(q.NumProcessing(), 0u);
}

TEST(WorkQueueTest, ReAddDuringProcessingIsDeliveredAfterDone) {
  WorkQueue q;
  q.Add("ns/a");
  auto key = q.Get();
  ASSERT_EQ(key, "ns/a");
  q.Add("ns/a");
  q.Add("ns/a");
  // Not handed to another worker while the first still holds it.
  EXPECT_EQ(q.Len(), 0u);
  q.Done("ns/a");
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, NoKeyIsProcessedByTwoWorkersAtOnce) {
  WorkQueue q;
  constexpr int kKeys = 8, kWorkers = 6, kAddsPerKey = 400;
  std::map<std::string, std::atomic<int>> in_flight;
  for (int k = 0; k < kKeys; ++k) in_flight["ns/k" + std::to_string(k)] = 0;
  std::atomic<int> violations{0}, processed{0};

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.Get()) {
        if (in_flight.at(*key).fetch_add(1) != 0) ++violations;
        std::this_thread::sleep_for(50us);  // widen the window for a second worker
        in_flight.at(*key).fetch_sub(1);
        ++processed;
        q.Done(*key);
      }
    });
  }
  std::thread producer([&] {
    for (int i = 0; i < kAddsPerKey; ++i) {
      for (int k = 0; k < kKeys; ++k) q.Add("ns/k" + std::to_string(k));
      if (i % 16 == 0) std::this_thread::sleep_for(100us);
    }
  });
  producer.join();
  ASSERT_TRUE(Eventually([&] { return q.Len() == 0 && q.NumProcessing() == 0; }, 10s));
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_EQ(violations.load(), 0);
  // Dedup collapsed most of the 3200 adds; every key was processed at least once.
  EXPECT_GE(processed.load(), kKeys);
  EXPECT_LE(processed.load(), kKeys * kAddsPerKey);
}

TEST(WorkQueueTest, AddAfterWaitsForTheClock) {
  FakeClock clock;
  WorkQueue q(WithClock(clock));
  q.AddAfter("ns/a", 1s);
  EXPECT_EQ(q.NumWaiting(), 1u);
  clock.Advance(999ms);
  // Give the delay thread ample real time to (wrongly) move it.
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(1ms);
  ASSERT_TRUE(Eventually([&] { return q.Len() == 1; }));
  EXPECT_EQ(q.NumWaiting(), 0u);
  EXPECT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");
}

TEST(WorkQueueTest, AddAfterKeepsTheEarlierReadyTime) {
  FakeClock clock;
  WorkQueue q(WithClock(clock));
  q.AddAfter("ns/a", 10s);
  q.AddAfter("ns/a", 2s);   // earlier: wins
  q.AddAfter("ns/a", 30s);  // later: ignored
  EXPECT_EQ(q.NumWaiting(), 1u);
  clock.Advance(2s);
  ASSERT_TRUE(Eventually([&] { return q.Len() == 1; }));
  q.Get();
  q.Done("ns/a");
  clock.Advance(60s);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(q.Len(), 0u);  // delivered once
}

TEST(WorkQueueTest, NonPositiveDelayAddsAtOnce) {
  FakeClock clock;
  WorkQueue q(WithClock(clock));
  q.AddAfter("ns/a", 0s);
  q.AddAfter("ns/b", -1s);
  EXPECT_EQ(q.Len(), 2u);
}

TEST(WorkQueueTest, BackoffIsFiveMillisecondsDoublingCappedAtThousandSeconds) {
  ItemExponentialRateLimiter limiter(kNoJitter);
  std::chrono::nanoseconds expected = 5ms;
  for (int i = 0; i < 18; ++i) {  // 5 ms × 2^17 = 655.36 s is the last uncapped delay
    EXPECT_EQ(limiter.When("ns/a"), expected) << "failure " << i;
    expected *= 2;
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.When("ns/a"), 1000s);  // no overflow
  EXPECT_EQ(limiter.NumRequeues("ns/a"), 118);
  EXPECT_EQ(limiter.When("ns/b"), 5ms);  // per key
  limiter.Forget("ns/a");
  EXPECT_EQ(limiter.NumRequeues("ns/a"), 0);
  EXPECT_EQ(limiter.When("ns/a"), 5ms);
  EXPECT_EQ(limiter.When("ns/a"), 10ms);
}

// The default limiter stretches each delay by up to a tenth, differently for each key and each
// queue, so that keys (and agents) that failed together do not retry together.
TEST(WorkQueueTest, DefaultBackoffIsJitteredWithinATenth) {
  ItemExponentialRateLimiter a(ItemExponentialRateLimiter::kDefaultPolicy, 1);
  ItemExponentialRateLimiter b(ItemExponentialRateLimiter::kDefaultPolicy, 2);
  int differ = 0;
  for (int i = 0; i < 30; ++i) {
    const auto nominal = std::min<std::chrono::nanoseconds>(5ms * (1LL << std::min(i, 20)), 1000s);
    const auto da = a.When("ns/a"), db = b.When("ns/a");
    for (auto d : {da, db}) {
      EXPECT_GE(d, nominal) << "failure " << i;
      EXPECT_LT(d, nominal + nominal / 10) << "failure " << i;
    }
    differ += da != db;
  }
  EXPECT_GE(differ, 25) << "two queues retried in lockstep";
}

TEST(WorkQueueTest, AddRateLimitedBacksOffOnTheClockAndForgetResets) {
  FakeClock clock;
  WorkQueue q(WithClock(clock));
  auto fail_once = [&](std::chrono::milliseconds expected_delay) {
    q.AddRateLimited("ns/a");
    clock.Advance(expected_delay - 1ms);
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(q.Len(), 0u) << "delivered before " << expected_delay.count() << " ms";
    clock.Advance(1ms);
    ASSERT_TRUE(Eventually([&] { return q.Len() == 1; })) << expected_delay.count() << " ms";
    ASSERT_EQ(q.Get(), "ns/a");
    q.Done("ns/a");
  };
  fail_once(5ms);
  fail_once(10ms);
  fail_once(20ms);
  fail_once(40ms);
  EXPECT_EQ(q.NumRequeues("ns/a"), 4);
  q.Forget("ns/a");
  EXPECT_EQ(q.NumRequeues("ns/a"), 0);
  fail_once(5ms);
}

TEST(WorkQueueTest, ShutDownHandsOutWhatIsQueuedThenReturnsNullopt) {
  WorkQueue q;
  q.Add("ns/a");
  q.ShutDown();
  q.Add("ns/b");  // ignored after shutdown
  EXPECT_TRUE(q.ShuttingDown());
  EXPECT_EQ(q.Get(), "ns/a");
  q.Done("ns/a");
  EXPECT_EQ(q.Get(), std::nullopt);
}

TEST(WorkQueueTest, ShutDownWakesBlockedWorkers) {
  WorkQueue q;
  std::atomic<bool> returned{false};
  std::thread worker([&] {
    EXPECT_EQ(q.Get(), std::nullopt);
    returned = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(returned.load());
  q.ShutDown();
  worker.join();
  EXPECT_TRUE(returned.load());
}

TEST(WorkQueueTest, ShutDownWithDrainWaitsForInFlightKeys) {
  WorkQueue q;
  q.Add("ns/a");
  ASSERT_EQ(q.Get(), "ns/a");
  std::atomic<bool> drained{false};
  std::thread stopper([&] {
    q.ShutDownWithDrain();
    drained = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(drained.load()) << "returned while ns/a was still being processed";
  EXPECT_TRUE(q.ShuttingDown());
  q.Done("ns/a");
  stopper.join();
  EXPECT_TRUE(drained.load());
}

TEST(WorkQueueTest, ShutDownWithDrainDeadlinePassesOnTheClock) {
  FakeClock clock;
  WorkQueue q(WithClock(clock));
  q.Add("ns/a");
  ASSERT_EQ(q.Get(), "ns/a");
  std::atomic<int> result{-1};
  // The deadline is fixed before the stopper runs: computed inside it, an Advance that came
  // first would push it out of reach and the stopper would never return.
  const auto deadline = clock.Now() + 30s;
  std::thread stopper([&] { result = q.ShutDownWithDrain(deadline) ? 1 : 0; });
  // The queue's delay loop also waits on the clock, until the shutdown ends it: the stopper is
  // the one waiter once the queue is shutting down.
  for (int i = 0; i < 5000 && !q.ShuttingDown(); ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(q.ShuttingDown());
  ASSERT_TRUE(clock.AwaitWaiters(1));
  EXPECT_EQ(result.load(), -1);
  clock.Advance(30s);
  stopper.join();
  EXPECT_EQ(result.load(), 0);  // ns/a was still in flight
  q.Done("ns/a");
}

TEST(WorkQueueTest, DelayedKeysAreDroppedOnShutDown) {
  FakeClock clock;
  WorkQueue q(WithClock(clock));
  q.AddAfter("ns/a", 1s);
  q.ShutDown();
  clock.Advance(2s);
  EXPECT_EQ(q.Get(), std::nullopt);
}

// Records what the queue reports, as a metrics provider would.
struct RecordingMetrics : WorkQueueMetrics {
  std::atomic<int64_t> depth{-1};
  std::atomic<int> adds{0}, retries{0}, queue_observations{0}, work_observations{0};
  std::atomic<double> last_work{0}, longest{0}, unfinished{0};
  void SetDepth(int64_t d) override { depth = d; }
  void Added() override { ++adds; }
  void ObserveQueueDuration(double) override { ++queue_observations; }
  void ObserveWorkDuration(double s) override {
    ++work_observations;
    last_work = s;
  }
  void Retried() override { ++retries; }
  void SetUnfinishedWorkSeconds(double s) override { unfinished = s; }
  void SetLongestRunningProcessorSeconds(double s) override { longest = s; }
};

struct RecordingProvider : WorkQueueMetricsProvider {
  RecordingMetrics* last = nullptr;
  std::string name;
  std::unique_ptr<WorkQueueMetrics> NewWorkQueueMetrics(const std::string& n) override {
    name = n;
    auto m = std::make_unique<RecordingMetrics>();
    last = m.get();
    return m;
  }
};

TEST(WorkQueueTest, ReportsMetrics) {
  FakeClock clock;
  RecordingProvider provider;
  WorkQueueOptions o = WithClock(clock);
  o.name = "actors";
  o.metrics = &provider;
  WorkQueue q(std::move(o));
  ASSERT_NE(provider.last, nullptr);
  RecordingMetrics& m = *provider.last;
  EXPECT_EQ(provider.name, "actors");
  EXPECT_EQ(m.depth.load(), 0);

  q.Add("ns/a");
  q.Add("ns/a");  // deduplicated: not an add
  q.Add("ns/b");
  EXPECT_EQ(m.adds.load(), 2);
  EXPECT_EQ(m.depth.load(), 2);
  ASSERT_EQ(q.Get(), "ns/a");
  EXPECT_EQ(m.depth.load(), 1);
  EXPECT_EQ(m.queue_observations.load(), 1);
  clock.Advance(3s);
  // The in-flight gauges are refreshed by the delay thread every 500 ms of clock time.
  ASSERT_TRUE(Eventually([&] { return m.longest.load() >= 3.0; }));
  q.Done("ns/a");
  EXPECT_EQ(m.work_observations.load(), 1);
  EXPECT_DOUBLE_EQ(m.last_work.load(), 3.0);
  q.AddRateLimited("ns/c");
  q.AddAfter("ns/d", 0s);
  EXPECT_EQ(m.retries.load(), 2);  // every delayed add counts as a retry
}

}  // namespace
}  // namespace stasis
