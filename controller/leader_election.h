// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package
// does it (reference §3): every retry period a standby reads the Lease and takes it over when
// it is expired or released; the leader renews it with an optimistic-concurrency PUT (the
// Lease's resourceVersion: a concurrent writer gets 409 and loses that round); a leader that
// cannot renew within the renew deadline stops leading; on a planned Stop the leader releases
// the Lease (holderIdentity "", leaseDurationSeconds 1: ReleaseOnCancel) so that a standby
// takes over at its next retry instead of after the lease expires.
//
// Invariant: validity is judged by the *locally observed* time at which the Lease record last
// changed plus its leaseDurationSeconds, never by the timestamps in the record, so clock skew
// between machines does not matter (clock *rate* differences do). There is no fencing: two
// processes may both believe they lead for a moment, so guarded work must be idempotent.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "base/clock.h"
#include "controller/kube_client.h"
#include "controller/metrics.h"
#include "base/status.h"

namespace stasis {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;  // also the `name` label of leader_election_master_status
  std::string identity;    // empty = DefaultLeaderIdentity()

  // client-go's and controller-runtime's defaults. Validation (as client-go's):
  // lease_duration > renew_deadline > 1.2 × retry_period; lease_duration ≥ 1 s.
  std::chrono::milliseconds lease_duration{std::chrono::seconds(15)};
  std::chrono::milliseconds renew_deadline{std::chrono::seconds(10)};
  std::chrono::milliseconds retry_period{std::chrono::seconds(2)};
  // Release the Lease on Stop() while leading. Off only to simulate a crashed leader.
  bool release_on_cancel = true;

  Clock* clock = &RealClock::Get();  // not owned
  Metrics* metrics = nullptr;        // not owned; leader_election_master_status
  KubeClient::Observer observe;      // rest-client metrics for the elector's own requests

  // Called on the elector's thread. on_started_leading when this process acquires the Lease;
  // on_stopped_leading when it *loses* it (renewal failed until the renew deadline): the
  // process should then stop its guarded work and exit, as controller-runtime does. A planned
  // Stop() does not call it; one that lands while the Lease is being acquired hands it back
  // without calling on_started_leading (the guarded work never starts). on_new_leader
  // whenever the observed holder changes ("" when the Lease was released).
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;
};

// controller-runtime's identity: "<hostname>_<random uuid>".
std::string DefaultLeaderIdentity();

class LeaderElector {
 public:
  // kInvalidArgument when the config breaks the rules above. `client` must outlive the
  // elector; the elector sends through client.transport() with its own per-request timeout
  // of max(renew_deadline / 2, 1 s), so that one hung request cannot cost the leadership.
  static Result<std::unique_ptr<LeaderElector>> New(KubeClient& client,
                                                    LeaderElectionConfig config);
  ~LeaderElector();  // Stop()
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Starts contending on a thread of its own. Once leadership is lost the thread ends (as
  // client-go's Run returns); a new elector is needed to contend again.
  void Start();
  // Stops contending; when leading (and release_on_cancel), releases the Lease first, within
  // the renew deadline. Joins the thread. Call it after the guarded work has stopped.
  void Stop();

  bool IsLeader() const { return leading_.load(); }
  const std::string& identity() const { return config_.identity; }
  // The holder this elector last observed ("" when released or not yet read).
  std::string ObservedLeader() const;

 private:
  struct Record {
    std::string holder;
    int lease_duration_seconds = 0;
    std::string acquire_time;
    std::string renew_time;
    int64_t transitions = 0;
  };

  LeaderElector(KubeClient& client, LeaderElectionConfig config);
  void Loop();
  bool TryAcquireOrRenew();
  // The steps of TryAcquireOrRenew.
  Record OurRecord() const;  // this candidate as holder, now
  bool Wrote(const json& lease, const Record& record);  // true, after noting what we wrote
  bool RenewHeld(Record& record);  // PUT over the Lease we last wrote
  bool CreateLease(const Status& get_status, const Record& record);  // when Get found none
  static Record ParseRecord(const json& spec);
  void ObserveLease(const json& lease, Clock::TimePoint now);
  bool TakeLease(Record record);  // expired, released or ours: an RV-guarded PUT
  void Release();
  // Waits on the clock until `deadline` or Stop(); true when stopping.
  bool WaitOrStop(Clock::TimePoint deadline);
  bool Stopping();
  bool ObservedIsUs() const { return observed_.holder == config_.identity; }
  bool ObservedValid(Clock::TimePoint now) const;
  void SetObserved(const Record& record, Clock::TimePoint now);
  json LeaseWith(const Record& record) const;
  void SetLeading(bool leading);

  LeaderElectionConfig config_;
  Clock& clock_;
  std::unique_ptr<KubeClient> client_;  // over a deadline-bounded view of the caller's transport

  // Owned by the elector thread.
  std::optional<json> lease_;  // the Lease as last read or written (its RV guards the PUT)
  Record observed_;
  std::string observed_raw_;  // spec as last read, to notice changes
  Clock::TimePoint observed_time_{};
  std::mt19937_64 rng_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string observed_leader_;  // for ObservedLeader(), under mu_
  std::atomic<bool> leading_{false};
  std::thread thread_;
};

}  // namespace stasis
