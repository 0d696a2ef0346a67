#include "controller/leader_election.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/time.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;

const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", true};

// client-go's JitterFactor for the acquire loop: a standby retries every
// retry_period × [1, 2.2), so standbys do not hit the API server in lockstep.
constexpr double kJitterFactor = 1.2;

// Bounds every request of the elector: the cpprest default of 30 s would let one hung PUT
// outlast the renew deadline. Does not own the wrapped transport.
class DeadlineTransport final : public Transport {
 public:
  DeadlineTransport(Transport& inner, std::chrono::milliseconds timeout)
      : inner_(inner), timeout_(timeout) {}
  Result<HttpResponse> Do(const HttpRequest& request) override {
    HttpRequest r = request;
    r.timeout = std::min(r.timeout, timeout_);
    return inner_.Do(r);
  }
  Result<HttpResponse> Stream(const HttpRequest& request,
                              const std::function<bool(std::string_view)>& on_line,
                              const std::atomic<bool>* cancel) override {
    return inner_.Stream(request, on_line, cancel);
  }
  std::string Host() const override { return inner_.Host(); }

 private:
  Transport& inner_;
  std::chrono::milliseconds timeout_;
};

std::string RandomUuid() {
  std::random_device rd;
  std::uniform_int_distribution<int> nibble(0, 15);
  const char* hex = "0123456789abcdef";
  std::string s = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx";
  for (char& c : s) {
    if (c == 'x') c = hex[nibble(rd)];
    if (c == 'y') c = hex[8 + nibble(rd) % 4];
  }
  return s;
}

}  // namespace

std::string DefaultLeaderIdentity() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  return std::string(host) + "_" + RandomUuid();
}

Result<std::unique_ptr<LeaderElector>> LeaderElector::New(KubeClient& client,
                                                          LeaderElectionConfig config) {
  auto invalid = [](const std::string& m) {
    return Status(Code::kInvalidArgument, "leader election: " + m);
  };
  if (config.lease_name.empty() || config.lease_namespace.empty()) {
    return invalid("lease namespace and name are required");
  }
  if (config.identity.empty()) config.identity = DefaultLeaderIdentity();
  if (config.lease_duration < 1s) return invalid("lease duration must be at least 1s");
  if (config.lease_duration <= config.renew_deadline) {
    return invalid("lease duration must be greater than the renew deadline");
  }
  if (config.retry_period <= 0ms) return invalid("retry period must be positive");
  if (config.renew_deadline.count() <= kJitterFactor * config.retry_period.count()) {
    return invalid("renew deadline must be greater than 1.2 × the retry period");
  }
  if (config.clock == nullptr) return invalid("clock is required");
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(config)));
}

LeaderElector::LeaderElector(KubeClient& client, LeaderElectionConfig config)
    : config_(std::move(config)), clock_(*config_.clock), rng_(std::random_device{}()) {
  auto timeout = std::max<std::chrono::milliseconds>(config_.renew_deadline / 2, 1s);
  client_ = std::make_unique<KubeClient>(
      std::make_unique<DeadlineTransport>(client.transport(), timeout), config_.observe);
  if (config_.metrics) config_.metrics->SetLeaderStatus(config_.lease_name, false);
}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  if (thread_.joinable()) return;
  spdlog::info("component=leader_election op=start lease={}/{} identity={}",
               config_.lease_namespace, config_.lease_name, config_.identity);
  thread_ = std::thread([this] { Loop(); });
}

void LeaderElector::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string LeaderElector::ObservedLeader() const {
  std::lock_guard lock(mu_);
  return observed_leader_;
}

bool LeaderElector::Stopping() {
  std::lock_guard lock(mu_);
  return stop_;
}

bool LeaderElector::WaitOrStop(Clock::TimePoint deadline) {
  std::unique_lock lock(mu_);
  return clock_.WaitUntil(cv_, lock, deadline, [&] { return stop_; });
}

void LeaderElector::SetLeading(bool leading) {
  leading_.store(leading);
  if (config_.metrics) config_.metrics->SetLeaderStatus(config_.lease_name, leading);
}

void LeaderElector::Loop() {
  // Acquire: retry with jitter until we hold the Lease or are stopped.
  std::uniform_real_distribution<double> jitter(0.0, kJitterFactor);
  while (!TryAcquireOrRenew()) {
    auto wait = std::chrono::duration_cast<Clock::TimePoint::duration>(config_.retry_period *
                                                                       (1.0 + jitter(rng_)));
    if (WaitOrStop(clock_.Now() + wait)) return;  // stopped before ever leading
  }
  if (Stopping()) {
    // Acquired in the same instant as Stop(): hand it straight back.
    if (config_.release_on_cancel) Release();
    return;
  }
  SetLeading(true);
  spdlog::info("component=leader_election op=acquired lease={}/{} identity={} transitions={}",
               config_.lease_namespace, config_.lease_name, config_.identity,
               observed_.transitions);
  if (config_.on_started_leading) config_.on_started_leading();

  // Renew every retry period; each renewal may retry until the renew deadline.
  bool lost = false;
  while (true) {
    auto deadline = clock_.Now() + config_.renew_deadline;
    bool renewed = false;
    while (!Stopping()) {
      if (TryAcquireOrRenew()) {
        renewed = true;
        break;
      }
      auto now = clock_.Now();
      if (now >= deadline) break;
      WaitOrStop(std::min(deadline, now + config_.retry_period));
    }
    if (Stopping()) break;
    if (!renewed) {
      lost = true;
      break;
    }
    if (WaitOrStop(clock_.Now() + config_.retry_period)) break;
  }

  if (lost) {
    SetLeading(false);
    spdlog::error("component=leader_election op=lost lease={}/{} identity={} reason=renew_deadline",
                  config_.lease_namespace, config_.lease_name, config_.identity);
    if (config_.on_stopped_leading) config_.on_stopped_leading();
    return;
  }
  // Planned stop. Release before reporting standby: the guarded work has already stopped.
  if (config_.release_on_cancel) Release();
  SetLeading(false);
}

bool LeaderElector::ObservedValid(Clock::TimePoint now) const {
  return observed_time_ + std::chrono::seconds(observed_.lease_duration_seconds) > now;
}

void LeaderElector::SetObserved(const Record& record, Clock::TimePoint now) {
  bool changed_holder = record.holder != observed_.holder || observed_raw_.empty();
  observed_ = record;
  observed_time_ = now;
  if (changed_holder) {
    {
      std::lock_guard lock(mu_);
      observed_leader_ = record.holder;
    }
    spdlog::info("component=leader_election op=observed_leader lease={}/{} holder=\"{}\"",
                 config_.lease_namespace, config_.lease_name, record.holder);
    if (config_.on_new_leader) config_.on_new_leader(record.holder);
  }
}

json LeaderElector::LeaseWith(const Record& r) const {
  json lease = lease_.value_or(
      json{{"apiVersion", "coordination.k8s.io/v1"},
           {"kind", "Lease"},
           {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}}});
  json& spec = lease["spec"];
  if (!spec.is_object()) spec = json::object();
  spec["holderIdentity"] = r.holder;
  spec["leaseDurationSeconds"] = r.lease_duration_seconds;
  spec["acquireTime"] = r.acquire_time;
  spec["renewTime"] = r.renew_time;
  spec["leaseTransitions"] = r.transitions;
  return lease;
}

LeaderElector::Record LeaderElector::OurRecord() const {
  std::string wall = FormatMicroTime(clock_.WallNow());
  Record record;
  record.holder = config_.identity;
  record.lease_duration_seconds = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count());
  record.acquire_time = wall;
  record.renew_time = wall;
  return record;
}

bool LeaderElector::Wrote(const json& lease, const Record& record) {
  lease_ = lease;
  observed_raw_ = lease.value("spec", json::object()).dump();
  SetObserved(record, clock_.Now());
  return true;
}

bool LeaderElector::RenewHeld(Record& record) {
  record.acquire_time = observed_.acquire_time;
  record.transitions = observed_.transitions;
  auto updated = client_->Update(kLeases, LeaseWith(record));
  if (updated.ok()) return Wrote(*updated, record);
  spdlog::warn("component=leader_election op=renew lease={}/{} result=error error=\"{}\"",
               config_.lease_namespace, config_.lease_name, updated.status().ToString());
  return false;
}

bool LeaderElector::CreateLease(const Status& get_status, const Record& record) {
  if (get_status.code() != Code::kNotFound) {
    spdlog::warn("component=leader_election op=get lease={}/{} result=error error=\"{}\"",
                 config_.lease_namespace, config_.lease_name, get_status.ToString());
    return false;
  }
  lease_.reset();
  auto created = client_->Create(kLeases, config_.lease_namespace, LeaseWith(record));
  if (!created.ok()) {
    // AlreadyExists: another candidate created it first; it won this round.
    spdlog::info("component=leader_election op=create lease={}/{} result=error error=\"{}\"",
                 config_.lease_namespace, config_.lease_name, created.status().ToString());
    return false;
  }
  return Wrote(*created, record);
}

LeaderElector::Record LeaderElector::ParseRecord(const json& spec) {
  // Any field may be absent or null (another client's Lease): read each defensively.
  auto str = [&](const char* k) {
    auto it = spec.find(k);
    return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto num = [&](const char* k) {
    auto it = spec.find(k);
    return it != spec.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{0};
  };
  Record seen;
  seen.holder = str("holderIdentity");
  seen.lease_duration_seconds = static_cast<int>(num("leaseDurationSeconds"));
  seen.acquire_time = str("acquireTime");
  seen.renew_time = str("renewTime");
  seen.transitions = num("leaseTransitions");
  return seen;
}

void LeaderElector::ObserveLease(const json& lease, Clock::TimePoint now) {
  lease_ = lease;
  const json spec = lease.value("spec", json::object());
  std::string raw = spec.dump();
  if (raw == observed_raw_) return;
  observed_raw_ = raw;
  SetObserved(ParseRecord(spec), now);
}

bool LeaderElector::TakeLease(Record record) {
  if (ObservedIsUs()) {
    record.acquire_time = observed_.acquire_time;
    record.transitions = observed_.transitions;
  } else {
    record.transitions = observed_.transitions + 1;
  }
  auto updated = client_->Update(kLeases, LeaseWith(record));
  if (!updated.ok()) {
    // 409: another candidate took it in the same round.
    spdlog::info("component=leader_election op=acquire lease={}/{} result=error error=\"{}\"",
                 config_.lease_namespace, config_.lease_name, updated.status().ToString());
    return false;
  }
  if (!ObservedIsUs()) {
    spdlog::info("component=leader_election op=takeover lease={}/{} previous=\"{}\" transitions={}",
                 config_.lease_namespace, config_.lease_name, observed_.holder, record.transitions);
  }
  return Wrote(*updated, record);
}

bool LeaderElector::TryAcquireOrRenew() {
  auto now = clock_.Now();
  // Steps 1 and 4 carry the acquire time and transitions over into `record` (a failed step 1
  // leaves them there for the later steps).
  Record record = OurRecord();
  // 1. Fast path: we hold a still-valid Lease; PUT over the copy we last wrote. A 409 means
  //    someone else wrote it meanwhile: fall back to reading it.
  if (lease_ && ObservedIsUs() && ObservedValid(now) && RenewHeld(record)) return true;
  // 2. Read the Lease; create it when absent.
  auto got = client_->Get(kLeases, config_.lease_namespace, config_.lease_name);
  if (!got.ok()) return CreateLease(got.status(), record);
  // 3. The Lease exists: refresh what we observed (and when) only if its spec changed, so
  //    that an unrenewed Lease ages in our own clock.
  ObserveLease(*got, now);
  if (!observed_.holder.empty() && ObservedValid(now) && !ObservedIsUs()) {
    return false;  // held by someone else and not expired
  }
  // 4. Expired, released, or ours: take it (or renew it) with an RV-guarded PUT.
  return TakeLease(record);
}

void LeaderElector::Release() {
  if (!lease_ || !ObservedIsUs()) return;
  std::string wall = FormatMicroTime(clock_.WallNow());
  Record record;
  record.holder = "";
  record.lease_duration_seconds = 1;  // client-go: the Lease is free again almost at once
  record.acquire_time = wall;
  record.renew_time = wall;
  record.transitions = observed_.transitions;
  auto updated = client_->Update(kLeases, LeaseWith(record));
  if (!updated.ok()) {
    spdlog::warn("component=leader_election op=release lease={}/{} result=error error=\"{}\"",
                 config_.lease_namespace, config_.lease_name, updated.status().ToString());
    return;
  }
  lease_ = *updated;
  observed_raw_ = updated->value("spec", json::object()).dump();
  SetObserved(record, clock_.Now());
  spdlog::info("component=leader_election op=released lease={}/{} identity={}",
               config_.lease_namespace, config_.lease_name, config_.identity);
}

}  // namespace stasis
