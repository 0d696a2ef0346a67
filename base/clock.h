// Time as a dependency. Everything in stasis that waits, backs off or compares deadlines
// takes a Clock, so tests drive time by hand (FakeClock) and assert backoff sequences and
// stuck detection exactly, without sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace stasis {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using SystemTimePoint = std::chrono::system_clock::time_point;
  virtual ~Clock() = default;
  // Monotonic time, for deadlines and durations.
  virtual TimePoint Now() const = 0;
  // Wall-clock time, for timestamps written to the API (lastTransitionTime, renewTime).
  virtual SystemTimePoint WallNow() const = 0;
  // Blocks on `cv` (with `lock` held) until `pred()` or `deadline`; returns pred().
  // Real clocks wait on the condition variable; a FakeClock wakes waiters when advanced.
  virtual bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         TimePoint deadline, const std::function<bool()>& pred) = 0;
};

class RealClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  SystemTimePoint WallNow() const override { return std::chrono::system_clock::now(); }
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline, const std::function<bool()>& pred) override {
    return cv.wait_until(lock, deadline, pred);
  }
  static RealClock& Get() {
    static RealClock clock;
    return clock;
  }
};

}  // namespace stasis
