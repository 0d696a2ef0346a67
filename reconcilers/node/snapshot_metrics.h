// The snapshot-health metrics of DESIGN.md §7, exported by the node agent. Label values are
// small fixed sets (trigger, scope, gpu, operation, result, reason); never an actor name.
//
// Series that dashboards and alerts take rate() of exist from construction on, at zero: a
// counter or histogram series that first appears already at 1 hides its first increment from
// rate() and increase(), so the first failure after an agent start would never reach the
// failure-ratio alert. Pre-created are the success series of every operation, the error series
// of every failure reason the runtime drivers, the host and the snapshot store name, and every
// forced-cleanup reason. Every `reason` label is the metric spelling of a condition reason
// (api::MetricReason), so that an alert leads to the actors' conditions. docs/metrics.md is the reference (tests/unit/metrics_reference_test.cc keeps
// it equal to what is registered here).
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "snapshots/transfer_observer.h"

namespace stasis {

// Also the object store's TransferObserver: stasis_object_store_bytes_total{direction},
// stasis_object_store_transfer_seconds{direction,result},
// stasis_object_store_throughput_bytes_per_second{direction},
// stasis_object_store_retries_total{operation} and
// stasis_object_store_compressed_bytes_total{form}; and of the download cache:
// stasis_snapshot_cache_bytes and stasis_snapshot_cache_evictions_total.
// docs/metrics.md's `duration` bucket set: snapshot operations, object-store transfers, pulls.
prometheus::Histogram::BucketBoundaries DurationBuckets();

class SnapshotMetrics final : public TransferObserver {
 public:
  explicit SnapshotMetrics(prometheus::Registry& registry);

  // A complete snapshot: its size (stasis_snapshot_size_bytes) and, when the checkpoint that
  // wrote it took checkpoint_seconds > 0, the checkpoint's throughput
  // (stasis_checkpoint_throughput_bytes_per_second = bytes / checkpoint_seconds), observed
  // together so that a panel never divides a size by a duration observed in another scrape.
  // trigger: "Pause"|"Suspend"; scope: "Full"|"Data"; gpu: true → "true".
  void ObserveSnapshot(const std::string& trigger, const std::string& scope, bool gpu, double bytes,
                       double checkpoint_seconds);
  // operation: "checkpoint"|"restore"|"restore_usable"|"commit"; result: "success"|"error".
  void ObserveDuration(const std::string& operation, const std::string& trigger, bool gpu,
                       const std::string& result, double seconds);
  // reason: "" on success, else api::MetricReason of the condition reason the failure gets
  // (a runtime driver's failure class, a Host* reason, a commit's CommitFailed reason).
  void CountOperation(const std::string& operation, const std::string& result,
                      const std::string& reason);
  // reason: api::MetricReason of the condition reason the cleanup sets, or "deleted".
  void CountForcedCleanup(const std::string& reason);
  void SetWorkers(int free, int held);
  // An actor's first start on this node, from the agent's decision to start it to the RUNNING
  // write (stasis_actor_start_seconds). kind: clone_source.h's StartKind.
  void ObserveStart(const std::string& kind, double seconds);

  void ObjectBytes(TransferDirection direction, uint64_t bytes) override;
  void SnapshotTransfer(TransferDirection direction, uint64_t bytes, double seconds, bool ok) override;
  void Retry(std::string_view op) override;
  void Compressed(uint64_t plain_bytes, uint64_t stored_bytes) override;
  void CacheBytes(uint64_t bytes) override;
  void CacheEviction(uint64_t bytes) override;

 private:
  void AddSuccessSeries();  // successful operations' histograms, empty
  void AddStoreSeries();    // the object-store series, at zero

  prometheus::Family<prometheus::Histogram>& size_;
  prometheus::Family<prometheus::Histogram>& throughput_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Counter>& operations_;
  prometheus::Family<prometheus::Counter>& forced_cleanups_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Histogram>& starts_;
  prometheus::Family<prometheus::Counter>& store_bytes_;
  prometheus::Family<prometheus::Histogram>& store_seconds_;
  prometheus::Family<prometheus::Histogram>& store_throughput_;
  prometheus::Family<prometheus::Counter>& store_retries_;
  prometheus::Family<prometheus::Counter>& store_compressed_;
  prometheus::Family<prometheus::Gauge>& cache_bytes_;
  prometheus::Family<prometheus::Counter>& cache_evictions_;
};

}  // namespace stasis
