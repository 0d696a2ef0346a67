#include "controller/manager.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>

#include "controller/rest_config.h"
#include "controller/transport.h"

namespace stasis {
namespace {
// Run sleeps between the things it must do, woken early by a lease won or lost. What cannot
// wake it is looked at on a timer: the caches' sync, every kSyncPoll until they have synced
// (the controllers start within that delay of it), and the stop flag, a signal handler's atomic
// that cannot notify, every kStopPoll (a stop begins within that delay of the signal; the
// kubelet's grace is tens of seconds). An idle process wakes 4 times a second.
constexpr std::chrono::milliseconds kSyncPoll{50};
constexpr std::chrono::milliseconds kStopPoll{250};
}  // namespace

std::chrono::steady_clock::time_point NextRunWake(
    std::chrono::steady_clock::time_point now, bool synced, bool started,
    const std::vector<std::chrono::steady_clock::time_point>& tickers_due) {
  auto wake = now + (synced ? kStopPoll : kSyncPoll);
  if (!started) return wake;
  for (auto due : tickers_due) wake = std::min(wake, due);
  return wake;
}

Manager::Manager(ManagerOptions options)
    : options_(std::move(options)),
      metrics_(options_.metrics ? options_.metrics : &Metrics::Global()) {}

Manager::~Manager() {
  // Run stopped everything it started; without Run only the recorder's thread runs, and its
  // destructor drops what is queued.
  informers_stop_ = true;
  for (auto& t : informer_threads_) {
    if (t.joinable()) t.join();
  }
}

Result<std::unique_ptr<Manager>> Manager::New(ManagerOptions options) {
  auto config = LoadRestConfig(options.kubeconfig);
  if (!config.ok()) return config.status();
  config->user_agent = options.user_agent;
  std::unique_ptr<Manager> m(new Manager(std::move(options)));
  ClientOptions co;
  co.qps = m->options_.kube_api_qps;
  co.burst = m->options_.kube_api_burst;
  // The event recorder has a client of its own (its own connections and --kube-api-qps
  // budget), as controller-runtime builds it: an Event (one per bind) must not take a third of
  // the binder's rate. (The leader elector paces nothing: LeaderElector wraps the transport.)
  auto new_client = [&] {
    auto transport = NewCpprestTransport(*config);
    const std::string host = transport->Host();
    return std::make_unique<KubeClient>(std::move(transport), m->metrics_->RestClientObserver(host), co);
  };
  m->client_ = new_client();
  m->events_client_ = new_client();
  m->events_ = std::make_unique<KubeEventRecorder>(*m->events_client_, m->options_.events);
  if (m->options_.leader_election) {
    m->options_.leader_election->observe = m->metrics_->RestClientObserver(m->client_->transport().Host());
    if (Status s = m->BuildElector(); !s.ok()) return s;
  } else {
    m->leading_ = true;  // nobody to defer to
  }
  return m;
}

Status Manager::BuildElector() {
  LeaderElectionConfig lc = *options_.leader_election;
  lc.metrics = metrics_;
  lc.on_started_leading = [this, then = lc.on_started_leading] {
    leading_ = true;
    if (then) then();
    Wake();
  };
  lc.on_stopped_leading = [this, then = lc.on_stopped_leading] {
    lost_ = true;
    if (then) then();
    Wake();
  };
  auto e = LeaderElector::New(*client_, std::move(lc));
  if (!e.ok()) return e.status();
  elector_ = std::move(*e);
  return OkStatus();
}

Informer& Manager::AddInformer(InformerOptions options) {
  informers_.push_back(std::make_unique<Informer>(*client_, std::move(options)));
  return *informers_.back();
}

Controller& Manager::AddController(std::string name, Reconciler& reconciler, int workers) {
  controllers_.push_back(
      std::make_unique<Controller>(std::move(name), reconciler, workers, metrics_));
  return *controllers_.back();
}

void Manager::AddReadyzCheck(std::function<Status()> check) {
  readyz_checks_.push_back(std::move(check));
}

void Manager::AddRunnable(std::string name, std::function<Status()> start,
                          std::function<void()> stop) {
  runnables_.push_back({std::move(name), std::move(start), std::move(stop)});
}

void Manager::OnCachesSynced(std::function<void()> hook) {
  on_caches_synced_.push_back(std::move(hook));
}
void Manager::OnControllersStarted(std::function<void()> hook) {
  on_controllers_started_.push_back(std::move(hook));
}
void Manager::OnStopping(std::function<void()> hook) { on_stopping_.push_back(std::move(hook)); }

void Manager::Every(std::chrono::milliseconds period, std::function<void()> tick,
                    bool first_at_start) {
  tickers_.push_back({period, std::move(tick), first_at_start});
}

bool Manager::Synced() const {
  return std::all_of(informers_.begin(), informers_.end(),
                     [](const auto& i) { return i->HasSynced(); });
}

Status Manager::Ready() const {
  if (!Synced()) return Status(Code::kUnavailable, options_.not_synced_message);
  for (const auto& check : readyz_checks_) {
    if (Status s = check(); !s.ok()) return s;
  }
  return OkStatus();
}

Status Manager::Run(const std::atomic<bool>* stop) {
  if (Status s = Start(); !s.ok()) return s;
  while (!stop->load() && !lost_.load()) {
    if (!started_.load() && leading_.load() && Synced()) StartControllers();
    if (started_.load()) RunDueTickers();
    SleepUntilNextWake();
  }
  Shutdown();
  return lost_.load() ? Status(Code::kAborted, "leader lease lost") : OkStatus();
}

Status Manager::Start() {
  for (size_t i = 0; i < runnables_.size(); ++i) {
    if (Status s = runnables_[i].start(); !s.ok()) {
      StopRunnables(i);
      return Status(s.code(), runnables_[i].name + ": " + s.message());
    }
  }
  if (Status s = StartEndpoints(); !s.ok()) {
    StopRunnables(runnables_.size());
    return s;
  }
  for (auto& informer : informers_) {
    informer_threads_.emplace_back([this, i = informer.get()] { i->Run(&informers_stop_); });
  }
  if (elector_) elector_->Start();
  return OkStatus();
}

namespace {
// The names a self-signed metrics certificate carries: the bound host (the pod's IP in the
// manifests), this host's name, localhost.
std::vector<std::string> CertificateHosts(const std::string& address) {
  std::vector<std::string> hosts = {"localhost"};
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (!host.empty()) hosts.push_back(host);
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0 && name[0] != 0) hosts.emplace_back(name);
  return hosts;
}
}  // namespace

// /metrics (HTTPS with the authorizer, or plain) and the probes, on one address or two.
Status Manager::StartEndpoints() {
  const SecureMetricsOptions& secure = options_.secure_metrics;
  const bool separate_probes = !options_.probe_addr.empty();
  if (secure.enabled && !separate_probes) {
    return Status(Code::kInvalidArgument,
                  "secure metrics need a probe address of their own (the kubelet's probes do not "
                  "authenticate)");
  }
  HttpEndpointsOptions ho;
  ho.address = options_.metrics_addr;
  ho.registry = metrics_->registry();
  ho.readiness = [this] { return Ready(); };
  ho.serve_probes = !separate_probes;
  if (secure.enabled) {
    auto tls = secure.cert_dir.empty() ? TlsServerContext::SelfSigned(CertificateHosts(ho.address))
                                       : TlsServerContext::FromDir(secure.cert_dir);
    if (!tls.ok()) return tls.status();
    ho.tls = *tls;
    MetricsAuthorizerOptions ao;
    ao.allow_ttl = secure.allow_ttl;
    ao.deny_ttl = secure.deny_ttl;
    authorizer_ = std::make_unique<MetricsAuthorizer>(&client_->transport(), ao);
    ho.metrics_filter = [a = authorizer_.get()](const std::string& h) { return a->Admit(h); };
  }
  if (separate_probes) {
    HttpEndpointsOptions po;
    po.address = options_.probe_addr;
    po.readiness = ho.readiness;
    auto probes = HttpEndpoints::Start(po);
    if (!probes.ok()) return probes.status();
    probe_endpoints_ = std::move(*probes);
  }
  auto endpoints = HttpEndpoints::Start(ho);
  if (!endpoints.ok()) {
    if (probe_endpoints_) probe_endpoints_->Stop();
    return endpoints.status();
  }
  endpoints_ = std::move(*endpoints);
  port_ = endpoints_->port();
  probe_port_ = probe_endpoints_ ? probe_endpoints_->port() : port_.load();
  spdlog::info("serving metrics addr={} port={} secure={} cert={} probes_port={}",
               options_.metrics_addr, port_.load(), secure.enabled,
               !secure.enabled ? "none" : secure.cert_dir.empty() ? "self-signed" : secure.cert_dir, probe_port_.load());
  return OkStatus();
}

void Manager::StartControllers() {
  for (const auto& hook : on_caches_synced_) hook();
  for (auto& c : controllers_) c->Start();
  started_ = true;  // before the hooks: what they enqueue, an event handler may enqueue too
  const auto now = std::chrono::steady_clock::now();
  for (auto& t : tickers_) t.next = t.first_at_start ? now : now + t.period;
  for (const auto& hook : on_controllers_started_) hook();
}

void Manager::RunDueTickers() {
  for (auto& t : tickers_) {
    if (std::chrono::steady_clock::now() < t.next) continue;
    t.tick();
    t.next = std::chrono::steady_clock::now() + t.period;
  }
}

void Manager::SleepUntilNextWake() {
  std::vector<std::chrono::steady_clock::time_point> due;
  due.reserve(tickers_.size());
  for (const auto& t : tickers_) due.push_back(t.next);
  const auto wake = NextRunWake(std::chrono::steady_clock::now(), Synced(), started_.load(), due);
  std::unique_lock lock(wake_mu_);
  wake_cv_.wait_until(lock, wake, [this] { return woken_; });
  woken_ = false;
}

void Manager::Wake() {
  {
    std::lock_guard lock(wake_mu_);
    woken_ = true;
  }
  wake_cv_.notify_one();
}

void Manager::Shutdown() {
  if (lost_.load()) {
    spdlog::error("{} lost its leader lease; exiting so a standby takes over", options_.name);
  }
  for (const auto& hook : on_stopping_) hook();
  drained_ = StopControllers();
  // The Lease goes after the guarded work has stopped, so no two leaders ever work at once.
  if (elector_) elector_->Stop();
  // The caches stay live until the reconciles that read them have finished.
  informers_stop_ = true;
  for (auto& t : informer_threads_) t.join();
  informer_threads_.clear();
  StopRunnables(runnables_.size());
  events_->Shutdown(options_.events_grace);
  endpoints_->Stop();
  if (probe_endpoints_) probe_endpoints_->Stop();
}

bool Manager::StopControllers() {
  const auto deadline = std::chrono::steady_clock::now() + options_.shutdown_grace;
  bool drained = true;
  for (auto& c : controllers_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    drained = c->Stop(std::max(left, std::chrono::milliseconds(0))) && drained;
  }
  return drained;
}

void Manager::StopRunnables(size_t started) {
  for (size_t i = started; i-- > 0;) {
    if (runnables_[i].stop) runnables_[i].stop();
  }
}

}  // namespace stasis
