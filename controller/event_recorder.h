// Kubernetes Events for the objects stasis manages ("Checkpointed", "RestoreFailed"), as
// client-go's tools/record does it for core/v1 Events: involvedObject, reason, message,
// type, source, reporting controller and instance, first/last timestamps and a count.
//
// Invariants:
//   - Event() never waits on the network: it queues (at most max_queued, then drops and
//     logs) and one sender thread writes to the API. Recording is best effort; failures are
//     logged, never returned to reconcilers.
//   - Field limits hold for everything sent: reason ≤ 128 bytes, message ≤ 1024 bytes,
//     reportingInstance/Component ≤ 128 (cut on a UTF-8 boundary).
//   - Repeats aggregate (client-go's EventCorrelator): the same (object, type, reason,
//     message, source) seen again within the aggregation window PATCHes the existing Event's
//     count and lastTimestamp instead of creating another object.
//   - A spam filter per (source, object) bounds the write rate: a burst of 25, then one
//     event per 5 minutes (client-go's defaults); filtered events are dropped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "base/clock.h"
#include "controller/token_bucket.h"
#include "controller/kube_client.h"

namespace stasis {

// core/v1 ObjectReference: what an Event is about.
struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string namespace_;  // "" for cluster-scoped objects
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string field_path;

  // From an object as the API returns it (apiVersion, kind, metadata.*).
  static ObjectReference From(const json& object);
  json ToJson() const;
};

enum class EventType { kNormal, kWarning };
const char* EventTypeName(EventType type);

// What reconcilers see; tests substitute their own.
class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  // `reason`: short, unique, CamelCase ("Checkpointed"); `message`: for people.
  virtual void Event(const ObjectReference& object, EventType type, const std::string& reason,
                     const std::string& message) = 0;
  void Event(const json& object, EventType type, const std::string& reason,
             const std::string& message) {
    Event(ObjectReference::From(object), type, reason, message);
  }
};

struct KubeEventRecorderOptions {
  std::string component;             // source.component and reportingComponent: "stasis-controller"
  std::string instance;              // reportingInstance: pod or host name; "" = the hostname
  std::string host;                  // source.host: the node, for node agents; may be empty
  Clock* clock = &RealClock::Get();  // not owned

  size_t max_queued = 1000;  // client-go's broadcaster queue length
  int max_tries = 12;        // client-go's maxTriesPerEvent
  std::chrono::milliseconds retry_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds aggregation_window{std::chrono::minutes(10)};
  int spam_burst = 25;
  std::chrono::milliseconds spam_refill_period{std::chrono::minutes(5)};  // one token per
  size_t cache_size = 4096;  // client-go's LRU sizes for the correlator caches
};

class KubeEventRecorder final : public EventRecorder {
 public:
  // `client` must outlive the recorder.
  KubeEventRecorder(KubeClient& client, KubeEventRecorderOptions options);
  // Shutdown(0): what is still queued is dropped.
  ~KubeEventRecorder() override;
  KubeEventRecorder(const KubeEventRecorder&) = delete;
  KubeEventRecorder& operator=(const KubeEventRecorder&) = delete;

  using EventRecorder::Event;
  void Event(const ObjectReference& object, EventType type, const std::string& reason,
             const std::string& message) override;

  // Waits, in real time, until everything queued so far has been written (or given up on).
  // False on timeout. For tests, and for shutdown paths that want their last events out.
  bool Flush(std::chrono::milliseconds timeout);
  // Stops intake, keeps sending what is queued for at most `grace` (on the clock), then stops
  // the sender. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

  // Events dropped because the queue was full, the spam filter said so, or the API refused.
  uint64_t dropped() const;

 private:
  struct Pending {
    ObjectReference object;
    EventType type;
    std::string reason;
    std::string message;
    Clock::SystemTimePoint when;
  };
  struct Aggregate {  // an Event already written, for repeats
    std::string namespace_;
    std::string name;
    int64_t count = 0;
    std::string first_timestamp;
    Clock::TimePoint last_seen;
  };

  void SenderLoop();
  void Send(const Pending& event);
  bool AllowedBySpamFilter(const Pending& event, Clock::TimePoint now);
  // Runs `call` with client-go's retry policy (transient errors only); its last status.
  Status WithRetries(const std::function<Status()>& call);
  void PruneCaches(Clock::TimePoint now);
  std::string NewEventName(const std::string& object_name, Clock::SystemTimePoint when);
  std::string AggregationKey(const Pending& event) const;
  std::string SpamKey(const Pending& event) const;

  KubeClient& client_;
  KubeEventRecorderOptions options_;
  Clock& clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // the sender waits for work and for retry deadlines
  std::condition_variable idle_cv_;  // Flush waiters
  std::deque<Pending> queue_;
  bool in_flight_ = false;
  bool stopping_ = false;
  Clock::TimePoint stop_deadline_{};
  uint64_t dropped_ = 0;

  // Sender thread only.
  std::unordered_map<std::string, Aggregate> aggregates_;
  std::unordered_map<std::string, TokenBucket> buckets_;  // the spam filter, per (source, object)
  int64_t last_name_nanos_ = 0;

  std::thread sender_;
};

}  // namespace stasis
