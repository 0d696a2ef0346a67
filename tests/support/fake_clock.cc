#include "tests/support/fake_clock.h"

#include <thread>

namespace stasis::testing {

using namespace std::chrono_literals;

FakeClock::FakeClock()
    : now_(TimePoint(std::chrono::hours(24 * 365))),
      // 2026-01-01T00:00:00Z
      wall_now_(SystemTimePoint(std::chrono::seconds(1767225600))) {}

Clock::TimePoint FakeClock::Now() const {
  std::lock_guard lock(mu_);
  return now_;
}

Clock::SystemTimePoint FakeClock::WallNow() const {
  std::lock_guard lock(mu_);
  return wall_now_;
}

bool FakeClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          TimePoint deadline, const std::function<bool()>& pred) {
  {
    std::lock_guard self(mu_);
    waiting_cvs_.insert(&cv);
  }
  bool result;
  while (true) {
    if (pred()) {
      result = true;
      break;
    }
    if (Now() >= deadline) {
      result = false;
      break;
    }
    // Real time bounds the wait: Advance's notify may come between the checks above and
    // this wait (it cannot take the caller's lock), so a missed wakeup costs at most 1 ms.
    cv.wait_for(lock, 1ms);
  }
  std::lock_guard self(mu_);
  waiting_cvs_.erase(waiting_cvs_.find(&cv));
  return result;
}

void FakeClock::Advance(std::chrono::nanoseconds d) {
  std::lock_guard lock(mu_);
  now_ += std::chrono::duration_cast<TimePoint::duration>(d);
  wall_now_ += std::chrono::duration_cast<SystemTimePoint::duration>(d);
  // Safe without the waiters' locks: a cv stays registered (and alive) until its waiter
  // has removed it under mu_.
  for (auto* cv : waiting_cvs_) cv->notify_all();
}

int FakeClock::Waiters() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(waiting_cvs_.size());
}

bool FakeClock::AwaitWaiters(int n, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Waiters() < n) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

}  // namespace stasis::testing
