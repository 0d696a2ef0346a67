#include "controller/work_queue.h"

#include <algorithm>

namespace stasis {
namespace {

using namespace std::chrono_literals;

// client-go's delaying queue wakes at least this often even with nothing due, so a missed
// notification can never hold a delayed key for long.
constexpr auto kMaxWait = 10s;
// client-go refreshes the unfinished-work gauges every 500 ms.
constexpr auto kUnfinishedWorkUpdatePeriod = 500ms;

double Seconds(Clock::TimePoint::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

ItemExponentialRateLimiter::Duration ItemExponentialRateLimiter::When(const std::string& key) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return std::chrono::duration_cast<Duration>(BackoffDelay(policy_, failures_[key]++, unit(rng_)));
}

int ItemExponentialRateLimiter::NumRequeues(const std::string& key) const {
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

WorkQueue::WorkQueue(WorkQueueOptions options)
    : name_(std::move(options.name)),
      clock_(*options.clock),
      metrics_(options.metrics ? options.metrics->NewWorkQueueMetrics(name_) : nullptr),
      limiter_(options.rate_limiter ? std::move(options.rate_limiter)
                                    : std::make_unique<ItemExponentialRateLimiter>()) {
  if (metrics_) metrics_->SetDepth(0);
  delay_thread_ = std::thread([this] { DelayLoop(); });
}

WorkQueue::~WorkQueue() {
  ShutDown();
  delay_thread_.join();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.contains(key)) return;
  if (metrics_) metrics_->Added();
  dirty_.insert(key);
  // In flight: Done() queues it again, so that no two workers ever hold the same key.
  if (processing_.contains(key)) return;
  queue_.push_back(key);
  add_times_.emplace(key, clock_.Now());
  if (metrics_) metrics_->SetDepth(static_cast<int64_t>(queue_.size()));
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, Duration delay) {
  std::lock_guard lock(mu_);
  if (shutting_down_) return;
  if (metrics_) metrics_->Retried();
  if (delay <= Duration::zero()) {
    AddLocked(key);
    return;
  }
  auto ready = clock_.Now() + delay;
  auto it = waiting_ready_.find(key);
  if (it != waiting_ready_.end()) {
    if (it->second <= ready) return;  // already due earlier
    waiting_.erase({it->second, key});
    it->second = ready;
  } else {
    waiting_ready_.emplace(key, ready);
  }
  waiting_.emplace(ready, key);
  ++waiting_generation_;
  delay_cv_.notify_one();
}

void WorkQueue::AddRateLimited(const std::string& key) {
  Duration delay;
  {
    std::lock_guard lock(mu_);
    delay = limiter_->When(key);
  }
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  limiter_->Forget(key);
}

int WorkQueue::NumRequeues(const std::string& key) {
  std::lock_guard lock(mu_);
  return limiter_->NumRequeues(key);
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || shutting_down_; });
  if (queue_.empty()) return std::nullopt;  // shut down and nothing left
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  auto now = clock_.Now();
  if (metrics_) {
    metrics_->SetDepth(static_cast<int64_t>(queue_.size()));
    if (auto it = add_times_.find(key); it != add_times_.end()) {
      metrics_->ObserveQueueDuration(Seconds(now - it->second));
    }
  }
  add_times_.erase(key);
  processing_start_[key] = now;
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard lock(mu_);
  if (!processing_.erase(key)) return;  // Done without Get: nothing to release
  if (auto it = processing_start_.find(key); it != processing_start_.end()) {
    if (metrics_) metrics_->ObserveWorkDuration(Seconds(clock_.Now() - it->second));
    processing_start_.erase(it);
  }
  if (dirty_.contains(key)) {
    // Re-added while in flight: its turn comes now. Shutdown does not drop it, as in
    // client-go; workers drain what is queued.
    queue_.push_back(key);
    add_times_.emplace(key, clock_.Now());
    if (metrics_) metrics_->SetDepth(static_cast<int64_t>(queue_.size()));
    cv_.notify_one();
  }
  if (processing_.empty()) cv_.notify_all();  // ShutDownWithDrain waiters
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
  // Delayed keys are dropped: nothing would take them after shutdown.
  waiting_.clear();
  waiting_ready_.clear();
  ++waiting_generation_;
  cv_.notify_all();
  delay_cv_.notify_all();
}

void WorkQueue::ShutDownWithDrain() {
  ShutDown();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return processing_.empty(); });
}

bool WorkQueue::ShutDownWithDrain(Clock::TimePoint deadline) {
  ShutDown();
  std::unique_lock lock(mu_);
  return clock_.WaitUntil(cv_, lock, deadline, [&] { return processing_.empty(); });
}

bool WorkQueue::ShuttingDown() {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::Len() {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t WorkQueue::NumWaiting() {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

size_t WorkQueue::NumProcessing() {
  std::lock_guard lock(mu_);
  return processing_.size();
}

void WorkQueue::UpdateUnfinishedWorkLocked(Clock::TimePoint now) {
  double total = 0, longest = 0;
  for (const auto& [key, start] : processing_start_) {
    double s = Seconds(now - start);
    total += s;
    longest = std::max(longest, s);
  }
  metrics_->SetUnfinishedWorkSeconds(total);
  metrics_->SetLongestRunningProcessorSeconds(longest);
}

void WorkQueue::DelayLoop() {
  std::unique_lock lock(mu_);
  auto next_metrics_update = clock_.Now();
  while (!shutting_down_) {
    auto now = clock_.Now();
    // Move every due key onto the queue.
    while (!waiting_.empty() && waiting_.begin()->first <= now) {
      std::string key = waiting_.begin()->second;
      waiting_.erase(waiting_.begin());
      waiting_ready_.erase(key);
      AddLocked(key);
    }
    if (metrics_ && now >= next_metrics_update) {
      UpdateUnfinishedWorkLocked(now);
      next_metrics_update = now + kUnfinishedWorkUpdatePeriod;
    }
    auto wake = now + kMaxWait;
    if (!waiting_.empty()) wake = std::min(wake, waiting_.begin()->first);
    if (metrics_) wake = std::min(wake, next_metrics_update);
    uint64_t generation = waiting_generation_;
    clock_.WaitUntil(delay_cv_, lock, wake,
                     [&] { return shutting_down_ || waiting_generation_ != generation; });
  }
  if (metrics_) UpdateUnfinishedWorkLocked(clock_.Now());
}

}  // namespace stasis
