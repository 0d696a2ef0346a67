#include "reconcilers/node/transition_retries.h"

#include <algorithm>

namespace stasis {

const char* ToString(RetryOp op) {
  switch (op) {
    case RetryOp::kCheckpoint: return "checkpoint";
    case RetryOp::kResume: return "resume";
    case RetryOp::kCommit: return "commit";
  }
  return "unknown";
}

std::string TransitionRetries::RetryKey(RetryOp op, const std::string& key) {
  return std::to_string(static_cast<int>(op)) + " " + key;
}

std::chrono::milliseconds TransitionRetries::Wait(const std::string& key, RetryOp op, int64_t generation) {
  std::lock_guard lock(mu_);
  auto it = retries_.find(RetryKey(op, key));
  if (it == retries_.end()) return std::chrono::milliseconds(0);
  if (it->second.generation != generation) {
    retries_.erase(it);  // the spec changed since: try at once
    return std::chrono::milliseconds(0);
  }
  const auto left = it->second.not_before - clock_.Now();
  if (left <= Clock::TimePoint::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

int TransitionRetries::NoteFailure(const std::string& key, RetryOp op, int64_t generation, bool host_error) {
  std::lock_guard lock(mu_);
  Retry& r = retries_[RetryKey(op, key)];
  if (r.generation != generation) r = Retry{generation, 0, 0, false, {}};
  auto delay = base_ * (1LL << std::min(r.failures, 20));
  if (delay > max_) delay = max_;
  ++r.failures;
  r.host_failures = host_error ? r.host_failures + 1 : 0;
  r.not_before = clock_.Now() + delay;
  return r.host_failures;
}

void TransitionRetries::GiveUp(const std::string& key, RetryOp op, int64_t generation) {
  std::lock_guard lock(mu_);
  Retry& r = retries_[RetryKey(op, key)];
  if (r.generation != generation) r = Retry{generation, 0, 0, false, {}};
  r.gave_up = true;
  r.not_before = clock_.Now();  // nothing to wait for: nothing will be tried
}

bool TransitionRetries::GaveUp(const std::string& key, RetryOp op, int64_t generation) {
  std::lock_guard lock(mu_);
  auto it = retries_.find(RetryKey(op, key));
  return it != retries_.end() && it->second.generation == generation && it->second.gave_up;
}

void TransitionRetries::Clear(const std::string& key, RetryOp op) {
  std::lock_guard lock(mu_);
  retries_.erase(RetryKey(op, key));
}

bool TransitionRetries::Unsettled(const std::string& key) {
  std::lock_guard lock(mu_);
  return unsettled_workers_.count(key) > 0;
}

void TransitionRetries::SetUnsettled(const std::string& key, bool unsettled) {
  std::lock_guard lock(mu_);
  if (unsettled) {
    unsettled_workers_.insert(key);
  } else {
    unsettled_workers_.erase(key);
  }
}

}  // namespace stasis
