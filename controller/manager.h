// What every controller process shares, owned in one place (controller-runtime's
// pkg/manager): the rest config, the transport and KubeClient, the metrics registry, the event
// recorder, the informers, the /metrics /healthz /readyz endpoint, optional leader election,
// and the controllers. A role adds its informers, controllers and hooks, then calls Run.
//
// Invariants, in the order Run keeps them:
//   - Start: runnables (in the order added), the endpoint, the informers, the elector. No
//     controller works before every informer has synced and, with leader election, before this
//     process leads; /readyz answers 503 until the informers have synced (a standby is ready).
//   - Stop (stop flag, or the lease lost): controllers drain within the grace while the caches
//     and the Lease are still live; then the elector releases the Lease (guarded work has
//     stopped, so the lease goes last); then informers stop, runnables stop in reverse, the
//     event recorder flushes, the endpoint closes.
//   - Run returns OK on a requested stop (also one during the sync), kAborted when the lease
//     was lost, and the reason when the endpoint or a runnable could not start.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "controller/controller.h"
#include "controller/event_recorder.h"
#include "controller/http_endpoints.h"
#include "controller/informer.h"
#include "controller/kube_client.h"
#include "controller/leader_election.h"
#include "controller/metrics.h"
#include "controller/metrics_authorizer.h"
#include "controller/secure_metrics.h"
#include "controller/reconciler.h"

namespace stasis {

struct ManagerOptions {
  // How this process appears in its log lines ("node agent", "controller").
  std::string name = "manager";
  std::string kubeconfig;  // "" = $KUBECONFIG, then in-cluster (LoadRestConfig)
  std::string user_agent = "stasis";
  Metrics* metrics = nullptr;  // not owned; nullptr = Metrics::Global()
  // Loopback unless told otherwise: the manifests bind the pod's own IP (probes, Prometheus).
  std::string metrics_addr = "127.0.0.1:8080";
  // /healthz and /readyz on an address of their own, plain HTTP; "" = on metrics_addr (not
  // allowed with secure_metrics: the kubelet's probes do not authenticate).
  std::string probe_addr;
  SecureMetricsOptions secure_metrics;
  double kube_api_qps = 50;  // client-side rate limit (client-go's default 5/10 is too low for an agent)
  int kube_api_burst = 100;
  // The /readyz body while some informer has not synced.
  std::string not_synced_message = "caches not synced";
  KubeEventRecorderOptions events;
  // Set: controllers run only while this process holds the Lease. The manager sets metrics,
  // observe, and wraps on_started_leading/on_stopped_leading (those given are still called).
  std::optional<LeaderElectionConfig> leader_election;
  // How long in-flight reconciles get to finish on stop, all controllers together.
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(30)};
  // How long queued Events get to reach the API server on stop.
  std::chrono::milliseconds events_grace{std::chrono::seconds(2)};
};

// When Run next wakes by itself: the earliest ticker due (once the controllers run), else the
// next look at what cannot notify it (the caches' sync until they have synced, then the stop
// flag). A lease won or lost wakes it sooner.
std::chrono::steady_clock::time_point NextRunWake(
    std::chrono::steady_clock::time_point now, bool synced, bool started,
    const std::vector<std::chrono::steady_clock::time_point>& tickers_due);

class Manager {
 public:
  // Loads the rest config and builds the client, the event recorder and the elector:
  // their errors (a missing kubeconfig, an invalid leader-election config) come back here.
  static Result<std::unique_ptr<Manager>> New(ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  KubeClient& client() { return *client_; }
  Metrics& metrics() { return *metrics_; }
  KubeEventRecorder& events() { return *events_; }
  // The leader-election identity; "" without leader election.
  std::string identity() const { return elector_ ? elector_->identity() : ""; }

  // Setup: before Run, from one thread. What they return lives as long as the manager.
  Informer& AddInformer(InformerOptions options);
  Controller& AddController(std::string name, Reconciler& reconciler, int workers);
  // Beyond the informers' sync. Called on the endpoint's thread: fast, non-blocking.
  void AddReadyzCheck(std::function<Status()> check);
  // Started before the informers (an error ends Run before anything else starts); stopped
  // after them, in reverse order. For work the role owns, such as a heartbeat.
  void AddRunnable(std::string name, std::function<Status()> start, std::function<void()> stop);
  // Once the caches have synced (and this process leads), before the controllers start.
  void OnCachesSynced(std::function<void()> hook);
  // Right after the controllers have started; started() is already true.
  void OnControllersStarted(std::function<void()> hook);
  // When a stop begins, before the controllers drain.
  void OnStopping(std::function<void()> hook);
  // `tick` every `period` while the controllers run, on Run's thread; the first one right at
  // the start when first_at_start, else one period later.
  void Every(std::chrono::milliseconds period, std::function<void()> tick,
             bool first_at_start = false);

  // Blocks until *stop becomes true or the lease is lost; see the invariants above. Once.
  Status Run(const std::atomic<bool>* stop);

  // Thread-safe.
  bool started() const { return started_.load(); }  // the controllers run
  Status Ready() const;                              // what /readyz answers
  int port() const { return port_.load(); }          // the /metrics port; 0 until it serves
  int probe_port() const { return probe_port_.load(); }  // the probes' port (= port() if shared)
  bool drained() const { return drained_.load(); }   // after Run: every reconcile finished

 private:
  struct Runnable {
    std::string name;
    std::function<Status()> start;
    std::function<void()> stop;
  };
  struct Ticker {
    std::chrono::milliseconds period;
    std::function<void()> tick;
    bool first_at_start;
    std::chrono::steady_clock::time_point next{};
  };

  explicit Manager(ManagerOptions options);
  Status BuildElector();
  Status Start();
  Status StartEndpoints();
  bool Synced() const;
  void StartControllers();
  void RunDueTickers();
  void SleepUntilNextWake();
  void Wake();  // from the elector's callbacks
  void Shutdown();
  bool StopControllers();
  void StopRunnables(size_t started);

  ManagerOptions options_;
  Metrics* metrics_;
  // Declared before what uses them: members are destroyed in reverse order.
  std::unique_ptr<KubeClient> client_;           // informers and controllers
  std::unique_ptr<KubeClient> events_client_;    // the event recorder's
  std::unique_ptr<KubeEventRecorder> events_;
  std::unique_ptr<LeaderElector> elector_;
  std::vector<std::unique_ptr<Informer>> informers_;
  std::vector<std::unique_ptr<Controller>> controllers_;
  std::unique_ptr<MetricsAuthorizer> authorizer_;
  std::unique_ptr<HttpEndpoints> endpoints_;
  std::unique_ptr<HttpEndpoints> probe_endpoints_;  // only with a probe_addr of their own

  std::vector<Runnable> runnables_;
  std::vector<std::function<Status()>> readyz_checks_;
  std::vector<std::function<void()>> on_caches_synced_, on_controllers_started_, on_stopping_;
  std::vector<Ticker> tickers_;

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool woken_ = false;  // guarded by wake_mu_

  std::atomic<bool> informers_stop_{false};
  std::vector<std::thread> informer_threads_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> lost_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> drained_{true};
  std::atomic<int> port_{0};
  std::atomic<int> probe_port_{0};
};

}  // namespace stasis
