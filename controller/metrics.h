// The process's Prometheus registry and the controller-runtime metric families on it, with
// the names, labels and buckets Go controllers use (DESIGN.md §7; reference §6), so that
// existing dashboards and alerts work on stasis unchanged.
//
// Invariants: one registry per process (Metrics::Global(); tests may build their own); the
// series of a controller exist, at 0, from RegisterController on (controller-runtime
// pre-creates all four reconcile results); no label carries a per-object value (cardinality).
// Other components add their own families to registry(). The registry also collects the
// process_* families (process_metrics.h).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "controller/kube_client.h"
#include "controller/work_queue.h"

namespace stasis {

// controller_runtime_reconcile_total's `result` label.
enum class ReconcileResult { kSuccess, kError, kRequeue, kRequeueAfter };
const char* ReconcileResultLabel(ReconcileResult result);

class Metrics final : public WorkQueueMetricsProvider {
 public:
  Metrics();
  // The process-wide instance, served on /metrics.
  static Metrics& Global();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Creates the controller's reconcile series at 0 (all four results, errors, the histogram).
  void RegisterController(const std::string& controller);
  // One reconcile: controller_runtime_reconcile_total{result}, …_errors_total on kError,
  // controller_runtime_reconcile_time_seconds.
  void ObserveReconcile(const std::string& controller, ReconcileResult result, double seconds);

  // workqueue_* for the queue called `name` (labels name=controller=name, as
  // controller-runtime sets both).
  std::unique_ptr<WorkQueueMetrics> NewWorkQueueMetrics(const std::string& name) override;

  // An observer for KubeClient: rest_client_requests_total{code,method,host=`host`}.
  KubeClient::Observer RestClientObserver(const std::string& host);

  // leader_election_master_status{name}: 1 while leading, 0 on standby.
  void SetLeaderStatus(const std::string& name, bool leading);

  // stasis_build_info{version,revision}: 1, the build this process runs (set once at start).
  void SetBuildInfo(const std::string& version, const std::string& revision);

 private:
  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>& reconcile_total_;
  prometheus::Family<prometheus::Counter>& reconcile_errors_total_;
  prometheus::Family<prometheus::Histogram>& reconcile_time_seconds_;

  prometheus::Family<prometheus::Gauge>& workqueue_depth_;
  prometheus::Family<prometheus::Counter>& workqueue_adds_total_;
  prometheus::Family<prometheus::Histogram>& workqueue_queue_duration_seconds_;
  prometheus::Family<prometheus::Histogram>& workqueue_work_duration_seconds_;
  prometheus::Family<prometheus::Gauge>& workqueue_unfinished_work_seconds_;
  prometheus::Family<prometheus::Gauge>& workqueue_longest_running_processor_seconds_;
  prometheus::Family<prometheus::Counter>& workqueue_retries_total_;

  prometheus::Family<prometheus::Counter>& rest_client_requests_total_;
  prometheus::Family<prometheus::Gauge>& leader_election_master_status_;
  prometheus::Family<prometheus::Gauge>& build_info_;
};

}  // namespace stasis
