#include "controller/metrics.h"

#include <mutex>
#include <vector>

#include "controller/process_metrics.h"

namespace stasis {
namespace {

// controller-runtime's reconcile_time_seconds buckets (unchanged since v0.14).
const prometheus::Histogram::BucketBoundaries kReconcileBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
    0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5, 3.0,  3.5, 4.0,  4.5, 5,
    6,     7,    8,     9,    10,   15,   20,   25,   30,  40,   50,  60};

// ExponentialBuckets(10e-9, 10, 12) = 1e-8 … 1e3 s (controller-runtime v0.17+); prometheus-cpp
// has no exponential helper, so the list is written out.
const prometheus::Histogram::BucketBoundaries kWorkQueueBuckets = {
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1000};

// prometheus-cpp's Registry collects only the families it builds; this one also collects
// other Collectables (the process collector), so that /metrics and every reader of
// registry() see them.
class CollectingRegistry final : public prometheus::Registry {
 public:
  void Register(std::shared_ptr<const prometheus::Collectable> collectable) {
    std::lock_guard lock(mu_);
    collectables_.push_back(std::move(collectable));
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    auto out = prometheus::Registry::Collect();
    std::lock_guard lock(mu_);
    for (const auto& c : collectables_) {
      auto more = c->Collect();
      out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const prometheus::Collectable>> collectables_;
};

std::shared_ptr<prometheus::Registry> NewRegistry() {
  auto r = std::make_shared<CollectingRegistry>();
  r->Register(std::make_shared<ProcessCollector>());
  return r;
}

template <typename T>
prometheus::Family<T>& Build(prometheus::detail::Builder<T> builder, prometheus::Registry& r,
                             const std::string& name, const std::string& help) {
  return builder.Name(name).Help(help).Register(r);
}

class PrometheusWorkQueueMetrics final : public WorkQueueMetrics {
 public:
  PrometheusWorkQueueMetrics(prometheus::Gauge& depth, prometheus::Counter& adds,
                             prometheus::Histogram& queue_duration,
                             prometheus::Histogram& work_duration, prometheus::Gauge& unfinished,
                             prometheus::Gauge& longest, prometheus::Counter& retries)
      : depth_(depth),
        adds_(adds),
        queue_duration_(queue_duration),
        work_duration_(work_duration),
        unfinished_(unfinished),
        longest_(longest),
        retries_(retries) {}

  void SetDepth(int64_t depth) override { depth_.Set(static_cast<double>(depth)); }
  void Added() override { adds_.Increment(); }
  void ObserveQueueDuration(double seconds) override { queue_duration_.Observe(seconds); }
  void ObserveWorkDuration(double seconds) override { work_duration_.Observe(seconds); }
  void Retried() override { retries_.Increment(); }
  void SetUnfinishedWorkSeconds(double seconds) override { unfinished_.Set(seconds); }
  void SetLongestRunningProcessorSeconds(double seconds) override { longest_.Set(seconds); }

 private:
  prometheus::Gauge& depth_;
  prometheus::Counter& adds_;
  prometheus::Histogram& queue_duration_;
  prometheus::Histogram& work_duration_;
  prometheus::Gauge& unfinished_;
  prometheus::Gauge& longest_;
  prometheus::Counter& retries_;
};

}  // namespace

const char* ReconcileResultLabel(ReconcileResult result) {
  switch (result) {
    case ReconcileResult::kSuccess:
      return "success";
    case ReconcileResult::kError:
      return "error";
    case ReconcileResult::kRequeue:
      return "requeue";
    case ReconcileResult::kRequeueAfter:
      return "requeue_after";
  }
  return "unknown";
}

Metrics::Metrics()
    : registry_(NewRegistry()),
      reconcile_total_(Build(prometheus::BuildCounter(), *registry_,
                             "controller_runtime_reconcile_total",
                             "Total number of reconciliations per controller")),
      reconcile_errors_total_(Build(prometheus::BuildCounter(), *registry_,
                                    "controller_runtime_reconcile_errors_total",
                                    "Total number of reconciliation errors per controller")),
      reconcile_time_seconds_(Build(prometheus::BuildHistogram(), *registry_,
                                    "controller_runtime_reconcile_time_seconds",
                                    "Length of time per reconciliation per controller")),
      workqueue_depth_(Build(prometheus::BuildGauge(), *registry_, "workqueue_depth",
                             "Current depth of workqueue")),
      workqueue_adds_total_(Build(prometheus::BuildCounter(), *registry_, "workqueue_adds_total",
                                  "Total number of adds handled by workqueue")),
      workqueue_queue_duration_seconds_(
          Build(prometheus::BuildHistogram(), *registry_, "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested")),
      workqueue_work_duration_seconds_(
          Build(prometheus::BuildHistogram(), *registry_, "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes")),
      workqueue_unfinished_work_seconds_(Build(
          prometheus::BuildGauge(), *registry_, "workqueue_unfinished_work_seconds",
          "How many seconds of work has been done that is in progress and hasn't been observed "
          "by work_duration. Large values indicate stuck threads. One can deduce the number of "
          "stuck threads by observing the rate at which this increases.")),
      workqueue_longest_running_processor_seconds_(
          Build(prometheus::BuildGauge(), *registry_, "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running")),
      workqueue_retries_total_(Build(prometheus::BuildCounter(), *registry_,
                                     "workqueue_retries_total",
                                     "Total number of retries handled by workqueue")),
      rest_client_requests_total_(
          Build(prometheus::BuildCounter(), *registry_, "rest_client_requests_total",
                "Number of HTTP requests, partitioned by status code, method, and host.")),
      leader_election_master_status_(
          Build(prometheus::BuildGauge(), *registry_, "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
                "backup, 1 indicates master. 'name' is the string used to identify the lease. "
                "Please make sure to group by name.")),
      build_info_(Build(prometheus::BuildGauge(), *registry_, "stasis_build_info",
                        "A metric with a constant '1' value labeled by the version and the git revision stasis was built from")) {}

Metrics& Metrics::Global() {
  // Never destroyed: worker and endpoint threads may still touch it during exit.
  static Metrics* metrics = new Metrics();
  return *metrics;
}

void Metrics::RegisterController(const std::string& controller) {
  for (auto r : {ReconcileResult::kSuccess, ReconcileResult::kError, ReconcileResult::kRequeue,
                 ReconcileResult::kRequeueAfter}) {
    reconcile_total_.Add({{"controller", controller}, {"result", ReconcileResultLabel(r)}});
  }
  reconcile_errors_total_.Add({{"controller", controller}});
  reconcile_time_seconds_.Add({{"controller", controller}}, kReconcileBuckets);
}

void Metrics::ObserveReconcile(const std::string& controller, ReconcileResult result,
                               double seconds) {
  // Family::Add returns the existing series for known labels (a map lookup under a mutex).
  reconcile_total_.Add({{"controller", controller}, {"result", ReconcileResultLabel(result)}})
      .Increment();
  if (result == ReconcileResult::kError) {
    reconcile_errors_total_.Add({{"controller", controller}}).Increment();
  }
  reconcile_time_seconds_.Add({{"controller", controller}}, kReconcileBuckets).Observe(seconds);
}

std::unique_ptr<WorkQueueMetrics> Metrics::NewWorkQueueMetrics(const std::string& name) {
  prometheus::Labels labels = {{"name", name}, {"controller", name}};
  return std::make_unique<PrometheusWorkQueueMetrics>(
      workqueue_depth_.Add(labels), workqueue_adds_total_.Add(labels),
      workqueue_queue_duration_seconds_.Add(labels, kWorkQueueBuckets),
      workqueue_work_duration_seconds_.Add(labels, kWorkQueueBuckets),
      workqueue_unfinished_work_seconds_.Add(labels),
      workqueue_longest_running_processor_seconds_.Add(labels),
      workqueue_retries_total_.Add(labels));
}

KubeClient::Observer Metrics::RestClientObserver(const std::string& host) {
  auto* family = &rest_client_requests_total_;
  return [family, host](const std::string& method, const std::string& code) {
    family->Add({{"code", code}, {"method", method}, {"host", host}}).Increment();
  };
}

void Metrics::SetLeaderStatus(const std::string& name, bool leading) {
  leader_election_master_status_.Add({{"name", name}}).Set(leading ? 1 : 0);
}

void Metrics::SetBuildInfo(const std::string& version, const std::string& revision) {
  build_info_.Add({{"version", version}, {"revision", revision}}).Set(1);
}

}  // namespace stasis
