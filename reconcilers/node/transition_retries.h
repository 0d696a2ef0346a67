// The node agent's memory of transitions that failed while the actor could stay where it was
// — a checkpoint the sandbox survived (still RUNNING), a resume that failed transiently (still
// PAUSED/SUSPENDED) — and of workers that may be held wrongly. The work queue's own backoff
// cannot do the first: each attempt writes status, and those watch events re-enqueue the key
// at once.
//
// Invariants: a retry waits base·2^failures (capped) after the last failure; a new generation
// (the user changed the spec) or a success forgets it. Errors of the host (host_errors.h) are
// also counted apart: after the caller's bound of consecutive ones, or one permanent one, it
// gives up on that generation (GaveUp) until a new one. An unsettled actor key is decided on a
// quorum read, never on the cache, until that read settles it. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "base/clock.h"

namespace stasis {

enum class RetryOp { kCheckpoint, kResume, kCommit };
const char* ToString(RetryOp op);

class TransitionRetries {
 public:
  TransitionRetries(std::chrono::milliseconds base, std::chrono::milliseconds max, Clock& clock)
      : base_(base), max_(max), clock_(clock) {}

  // How long `op` on this actor (at `generation`) must still wait; zero: go ahead.
  std::chrono::milliseconds Wait(const std::string& key, RetryOp op, int64_t generation);
  // Returns how many consecutive failures of this generation were host errors (0 if this one
  // is not).
  int NoteFailure(const std::string& key, RetryOp op, int64_t generation, bool host_error = false);
  // No more attempts of `op` at this generation; Wait says zero, GaveUp true, until a new one.
  void GiveUp(const std::string& key, RetryOp op, int64_t generation);
  bool GaveUp(const std::string& key, RetryOp op, int64_t generation);
  void Clear(const std::string& key, RetryOp op);

  // Actor keys that may hold a worker they should not: a resume started from a stale cache
  // claimed one before its refused first write, or the release after a PAUSED/SUSPENDED write
  // failed. Settled (the worker freed if the actor is at rest) by the next quorum read.
  bool Unsettled(const std::string& key);
  void SetUnsettled(const std::string& key, bool unsettled);

 private:
  struct Retry {
    int64_t generation = 0;
    int failures = 0;
    int host_failures = 0;  // consecutive
    bool gave_up = false;
    Clock::TimePoint not_before;
  };
  static std::string RetryKey(RetryOp op, const std::string& key);

  const std::chrono::milliseconds base_;
  const std::chrono::milliseconds max_;
  Clock& clock_;
  std::mutex mu_;
  std::unordered_map<std::string, Retry> retries_;  // by RetryKey
  std::set<std::string> unsettled_workers_;
};

}  // namespace stasis
