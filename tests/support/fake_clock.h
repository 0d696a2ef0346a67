// A Clock that moves only when a test says so: Now() and WallNow() stand still until
// Advance(d), which moves both by d and wakes everything blocked in WaitUntil. Backoffs,
// delays and lease expiry are then asserted exactly, in microseconds of real time.
//
// Invariant: a WaitUntil whose deadline the fake time has reached returns within about a
// millisecond of the Advance that reached it (waiters are notified, and re-check every 1 ms
// in case the notification raced with their wait).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>

#include "base/clock.h"

namespace stasis::testing {

class FakeClock : public Clock {
 public:
  // Starts at an arbitrary fixed point: steady time well past zero (code may subtract from
  // it), wall time 2026-01-01T00:00:00Z.
  FakeClock();

  TimePoint Now() const override;
  SystemTimePoint WallNow() const override;
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline, const std::function<bool()>& pred) override;

  void Advance(std::chrono::nanoseconds d);
  // Threads currently blocked in WaitUntil: lets a test wait until a loop under test has
  // gone to sleep before it advances time.
  int Waiters() const;
  // Blocks (in real time, up to `timeout`) until at least `n` threads wait; false on timeout.
  bool AwaitWaiters(int n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

 private:
  mutable std::mutex mu_;
  TimePoint now_;
  SystemTimePoint wall_now_;
  std::multiset<std::condition_variable*> waiting_cvs_;
};

}  // namespace stasis::testing
