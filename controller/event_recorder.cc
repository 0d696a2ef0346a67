#include "controller/event_recorder.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/time.h"

namespace stasis {
namespace {

const ResourceType kEvents{"", "v1", "events", true};

// The API's limits (pkg/apis/core/validation/events.go).
constexpr size_t kReasonLimit = 128;
constexpr size_t kMessageLimit = 1024;
constexpr size_t kReportingLimit = 128;

// Cuts `s` to at most `limit` bytes without splitting a UTF-8 sequence.
std::string Truncate(const std::string& s, size_t limit) {
  if (s.size() <= limit) return s;
  size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

std::string Hostname() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

std::string JoinKey(std::initializer_list<std::string_view> parts) {
  std::string key;
  for (auto p : parts) {
    key.append(p);
    key.push_back('\x1f');  // a separator no name or reason contains
  }
  return key;
}

bool Retryable(Code code) {
  // Transport failures and 429/5xx are worth another try; a refusal (Invalid, Forbidden,
  // AlreadyExists, NotFound namespace) will not change by waiting.
  return code == Code::kUnavailable || code == Code::kDeadlineExceeded;
}

}  // namespace

ObjectReference ObjectReference::From(const json& object) {
  auto str = [](const json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  ObjectReference ref;
  ref.api_version = str(object, "apiVersion");
  ref.kind = str(object, "kind");
  if (auto m = object.find("metadata"); m != object.end() && m->is_object()) {
    ref.namespace_ = str(*m, "namespace");
    ref.name = str(*m, "name");
    ref.uid = str(*m, "uid");
    ref.resource_version = str(*m, "resourceVersion");
  }
  return ref;
}

json ObjectReference::ToJson() const {
  json j = json::object();
  auto set = [&](const char* k, const std::string& v) {
    if (!v.empty()) j[k] = v;
  };
  set("apiVersion", api_version);
  set("kind", kind);
  set("namespace", namespace_);
  set("name", name);
  set("uid", uid);
  set("resourceVersion", resource_version);
  set("fieldPath", field_path);
  return j;
}

const char* EventTypeName(EventType type) {
  return type == EventType::kWarning ? "Warning" : "Normal";
}

KubeEventRecorder::KubeEventRecorder(KubeClient& client, KubeEventRecorderOptions options)
    : client_(client), options_(std::move(options)), clock_(*options_.clock) {
  if (options_.instance.empty()) options_.instance = Hostname();
  options_.component = Truncate(options_.component, kReportingLimit);
  options_.instance = Truncate(options_.instance, kReportingLimit);
  sender_ = std::thread([this] { SenderLoop(); });
}

KubeEventRecorder::~KubeEventRecorder() { Shutdown(std::chrono::milliseconds(0)); }

void KubeEventRecorder::Event(const ObjectReference& object, EventType type,
                              const std::string& reason, const std::string& message) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  if (queue_.size() >= options_.max_queued) {
    ++dropped_;
    spdlog::warn("component=event_recorder op=drop object={}/{} reason={} cause=queue_full",
                 object.namespace_, object.name, reason);
    return;
  }
  queue_.push_back(Pending{object, type, Truncate(reason, kReasonLimit),
                           Truncate(message, kMessageLimit), clock_.WallNow()});
  cv_.notify_all();
}

bool KubeEventRecorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !in_flight_; });
}

void KubeEventRecorder::Shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_deadline_ = clock_.Now() + grace;
    }
  }
  cv_.notify_all();
  if (sender_.joinable()) sender_.join();
}

uint64_t KubeEventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void KubeEventRecorder::SenderLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty() || (stopping_ && clock_.Now() >= stop_deadline_)) break;
    Pending event = std::move(queue_.front());
    queue_.pop_front();
    in_flight_ = true;
    lock.unlock();
    Send(event);
    lock.lock();
    in_flight_ = false;
    idle_cv_.notify_all();
  }
  dropped_ += queue_.size();
  queue_.clear();
  idle_cv_.notify_all();
}

std::string KubeEventRecorder::AggregationKey(const Pending& e) const {
  const auto& o = e.object;
  return JoinKey({options_.component, options_.host, o.api_version, o.kind, o.namespace_, o.name,
                  o.uid, o.field_path, EventTypeName(e.type), e.reason, e.message});
}

std::string KubeEventRecorder::SpamKey(const Pending& e) const {
  const auto& o = e.object;
  return JoinKey(
      {options_.component, options_.host, o.api_version, o.kind, o.namespace_, o.name, o.uid});
}

bool KubeEventRecorder::AllowedBySpamFilter(const Pending& event, Clock::TimePoint now) {
  const double rate = 1.0 / std::chrono::duration<double>(options_.spam_refill_period).count();
  auto [it, inserted] = buckets_.try_emplace(SpamKey(event), rate, options_.spam_burst, now);
  return it->second.TryTake(now);
}

void KubeEventRecorder::PruneCaches(Clock::TimePoint now) {
  if (aggregates_.size() > options_.cache_size) {
    std::erase_if(aggregates_, [&](const auto& kv) {
      return now - kv.second.last_seen > options_.aggregation_window;
    });
    // Still full of live entries: forget the oldest, as an LRU would.
    while (aggregates_.size() > options_.cache_size) {
      auto oldest = std::min_element(
          aggregates_.begin(), aggregates_.end(),
          [](const auto& a, const auto& b) { return a.second.last_seen < b.second.last_seen; });
      aggregates_.erase(oldest);
    }
  }
  if (buckets_.size() > options_.cache_size) {
    // A bucket that has refilled completely is the same as no bucket.
    std::erase_if(buckets_, [&](const auto& kv) { return kv.second.Full(now); });
    while (buckets_.size() > options_.cache_size) buckets_.erase(buckets_.begin());
  }
}

std::string KubeEventRecorder::NewEventName(const std::string& object_name,
                                            Clock::SystemTimePoint when) {
  // client-go: "<name>.<hex unix nanos>". Kept strictly increasing here, so that two events
  // in the same nanosecond (or under a fake clock) never collide.
  int64_t nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  nanos = std::max(nanos, last_name_nanos_ + 1);
  last_name_nanos_ = nanos;
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(nanos));
  // Names are DNS subdomains of at most 253 characters.
  return Truncate(object_name, 253 - 1 - std::string(hex).size()) + "." + hex;
}

Status KubeEventRecorder::WithRetries(const std::function<Status()>& call) {
  for (int attempt = 1;; ++attempt) {
    Status s = call();
    if (s.ok() || !Retryable(s.code()) || attempt >= options_.max_tries) return s;
    std::unique_lock lock(mu_);
    // No retry waits once shutting down.
    if (stopping_ || clock_.WaitUntil(cv_, lock, clock_.Now() + options_.retry_interval,
                                      [&] { return stopping_; })) {
      return s;
    }
  }
}

void KubeEventRecorder::Send(const Pending& event) {
  auto now = clock_.Now();
  PruneCaches(now);
  const ObjectReference& obj = event.object;
  auto drop = [&](const char* cause, const Status& status) {
    std::lock_guard lock(mu_);
    ++dropped_;
    spdlog::warn("component=event_recorder op=drop object={}/{} reason={} cause={} error=\"{}\"",
                 obj.namespace_, obj.name, event.reason, cause, status.ToString());
  };
  // Like client-go's correlator, the filter sees repeats too: a PATCH is a write as well.
  if (!AllowedBySpamFilter(event, now)) {
    std::lock_guard lock(mu_);
    ++dropped_;
    spdlog::debug("component=event_recorder op=drop object={}/{} reason={} cause=spam_filter",
                  obj.namespace_, obj.name, event.reason);
    return;
  }

  std::string key = AggregationKey(event);
  std::string timestamp = FormatTime(event.when);

  // A repeat within the window: count it on the Event already written.
  if (auto it = aggregates_.find(key);
      it != aggregates_.end() && now - it->second.last_seen <= options_.aggregation_window) {
    Aggregate& agg = it->second;
    json patch = {{"count", agg.count + 1}, {"lastTimestamp", timestamp}};
    Status s = WithRetries([&] {
      return client_.Patch(kEvents, agg.namespace_, agg.name, PatchType::kMerge, patch).status();
    });
    if (s.ok()) {
      agg.count += 1;
      agg.last_seen = now;
      spdlog::debug("component=event_recorder op=aggregate event={}/{} count={}", agg.namespace_,
                    agg.name, agg.count);
      return;
    }
    aggregates_.erase(it);
    // NotFound: the Event expired (the API server's event TTL) or was deleted: write a new
    // one, as client-go does.
    if (s.code() != Code::kNotFound) return drop("patch_failed", s);
  }

  // Cluster-scoped objects' events live in "default", as client-go puts them.
  std::string ns = obj.namespace_.empty() ? "default" : obj.namespace_;
  std::string name = NewEventName(obj.name.empty() ? "event" : obj.name, event.when);
  json source = {{"component", options_.component}};
  if (!options_.host.empty()) source["host"] = options_.host;
  json body = {{"apiVersion", "v1"},
               {"kind", "Event"},
               {"metadata", {{"name", name}, {"namespace", ns}}},
               {"involvedObject", obj.ToJson()},
               {"reason", event.reason},
               {"message", event.message},
               {"type", EventTypeName(event.type)},
               {"source", source},
               {"firstTimestamp", timestamp},
               {"lastTimestamp", timestamp},
               {"count", 1},
               {"reportingComponent", options_.component},
               {"reportingInstance", options_.instance}};
  Status s = WithRetries([&] { return client_.Create(kEvents, ns, body).status(); });
  if (!s.ok()) return drop("create_failed", s);
  aggregates_[key] = Aggregate{ns, name, 1, timestamp, now};
  spdlog::debug("component=event_recorder op=create event={}/{} object={}/{} reason={} type={}", ns,
                name, obj.namespace_, obj.name, event.reason, EventTypeName(event.type));
}

}  // namespace stasis
