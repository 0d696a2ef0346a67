// The work queue between informers and reconcile workers, with client-go's workqueue
// semantics (a FIFO plus `dirty` and `processing` sets, a delaying heap, a per-key rate
// limiter). Informer handlers only Add keys; workers Get, reconcile, and always call Done.
//
// Invariants (client-go's "fair, stingy" contract):
//   - a key added several times before a worker takes it is handed out once (dedup);
//   - a key is never held by two workers at once: re-added while in flight, it is queued
//     again only when its worker calls Done;
//   - every key handed out by Get() stays in `processing` until Done(key).
//
// Time (delays, backoff deadlines, metrics durations) comes from the injected Clock, so tests
// drive AddAfter and AddRateLimited with a FakeClock without sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/clock.h"
#include "controller/backoff.h"

namespace stasis {

// The workqueue_* series of one queue. Implemented by Metrics (metrics.h); the queue itself
// does not depend on prometheus. Called with the queue's lock held: keep them cheap.
class WorkQueueMetrics {
 public:
  virtual ~WorkQueueMetrics() = default;
  virtual void SetDepth(int64_t depth) = 0;                   // workqueue_depth
  virtual void Added() = 0;                                   // workqueue_adds_total
  virtual void ObserveQueueDuration(double seconds) = 0;      // ..._queue_duration_seconds
  virtual void ObserveWorkDuration(double seconds) = 0;       // ..._work_duration_seconds
  virtual void Retried() = 0;                                 // workqueue_retries_total
  virtual void SetUnfinishedWorkSeconds(double seconds) = 0;  // ..._unfinished_work_seconds
  virtual void SetLongestRunningProcessorSeconds(double seconds) = 0;
};

class WorkQueueMetricsProvider {
 public:
  virtual ~WorkQueueMetricsProvider() = default;
  // One per queue; `name` is the queue's (= the controller's) name.
  virtual std::unique_ptr<WorkQueueMetrics> NewWorkQueueMetrics(const std::string& name) = 0;
};

// How long a key waits before its next retry. Called with the queue's lock held.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // The delay for this retry; counts one more failure of `key`.
  virtual Clock::TimePoint::duration When(const std::string& key) = 0;
  // Clears the failure count of `key` (after a success).
  virtual void Forget(const std::string& key) = 0;
  virtual int NumRequeues(const std::string& key) const = 0;
};

// client-go's ItemExponentialFailureRateLimiter, with jitter: base × 2^failures, capped,
// stretched by up to a tenth (BackoffPolicy). The defaults are controller-runtime's
// (5 ms → 1000 s): 5, 10, 20, 40 ms, … The jitter keeps keys that failed together (every
// actor of a node when the API server restarts) from retrying together.
class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  using Duration = Clock::TimePoint::duration;
  static constexpr BackoffPolicy kDefaultPolicy{std::chrono::milliseconds(5), std::chrono::seconds(1000),
                                                2.0, 0.1};
  explicit ItemExponentialRateLimiter(BackoffPolicy policy = kDefaultPolicy,
                                      uint64_t seed = std::random_device{}())
      : policy_(policy), rng_(seed) {}
  Duration When(const std::string& key) override;
  void Forget(const std::string& key) override { failures_.erase(key); }
  int NumRequeues(const std::string& key) const override;

 private:
  BackoffPolicy policy_;
  std::mt19937_64 rng_;
  std::unordered_map<std::string, int> failures_;
};

struct WorkQueueOptions {
  std::string name;                             // metrics label; the controller's name
  Clock* clock = &RealClock::Get();             // not owned; must outlive the queue
  WorkQueueMetricsProvider* metrics = nullptr;  // not owned; nullptr = no metrics
  std::unique_ptr<RateLimiter> rate_limiter;    // nullptr = ItemExponentialRateLimiter()
};

class WorkQueue {
 public:
  using Duration = Clock::TimePoint::duration;

  explicit WorkQueue(WorkQueueOptions options = {});
  // Shuts down (without draining) and joins the delay thread.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` unless it is already queued (dirty); a no-op after shutdown.
  void Add(const std::string& key);
  // Adds `key` once `delay` has passed on the clock (at once when delay <= 0). A key already
  // waiting keeps the earlier of its two ready times. Counts as a retry in the metrics.
  void AddAfter(const std::string& key, Duration delay);
  // AddAfter(key, rate_limiter.When(key)): per-key exponential backoff.
  void AddRateLimited(const std::string& key);
  // Resets the key's backoff. The worker must still call Done.
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks until a key is available; std::nullopt once the queue is shut down and empty
  // (keys queued before ShutDown are still handed out, as in client-go).
  std::optional<std::string> Get();
  // Marks the end of processing of a key returned by Get; re-queues it when it was added
  // again meanwhile.
  void Done(const std::string& key);

  // Stops intake: Add becomes a no-op, delayed keys are dropped, idle Get() calls return.
  void ShutDown();
  // ShutDown, then waits until every key handed out by Get has been Done.
  void ShutDownWithDrain();
  // Same, waiting at most until `deadline` (on the clock); false when keys were still in
  // flight at the deadline.
  bool ShutDownWithDrain(Clock::TimePoint deadline);
  bool ShuttingDown();

  // Queued keys (not counting those in flight or waiting on a delay).
  size_t Len();
  // Keys waiting on AddAfter (for tests and debugging).
  size_t NumWaiting();
  // Keys handed out and not yet Done.
  size_t NumProcessing();

 private:
  void AddLocked(const std::string& key);
  void DelayLoop();
  void UpdateUnfinishedWorkLocked(Clock::TimePoint now);

  const std::string name_;
  Clock& clock_;
  std::unique_ptr<WorkQueueMetrics> metrics_;
  std::unique_ptr<RateLimiter> limiter_;

  std::mutex mu_;
  std::condition_variable cv_;        // Get() waiters; drain waiters
  std::condition_variable delay_cv_;  // the delay thread
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;
  std::unordered_set<std::string> processing_;
  bool shutting_down_ = false;

  // Delayed keys: ordered by ready time, and the ready time of each key (for dedup).
  std::set<std::pair<Clock::TimePoint, std::string>> waiting_;
  std::unordered_map<std::string, Clock::TimePoint> waiting_ready_;
  uint64_t waiting_generation_ = 0;  // bumped when the delay thread must recompute its wait

  // For metrics: when each queued key was added, when each in-flight key was taken.
  std::unordered_map<std::string, Clock::TimePoint> add_times_;
  std::unordered_map<std::string, Clock::TimePoint> processing_start_;

  std::thread delay_thread_;
};

}  // namespace stasis
