#include "reconcilers/snapshot_metrics.h"

namespace stasis {
namespace {

// 64 KiB … 256 GiB in powers of 4: a CPU counter is a few hundred KiB, an 80 GiB GPU's memory
// image lands in the top buckets.
prometheus::Histogram::BucketBoundaries SizeBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 64 * 1024; v <= 256.0 * (1ull << 30); v *= 4) b.push_back(v);
  return b;
}

// 50 ms … ~30 min: a CPU pause takes well under a second, a large GPU suspend minutes.
prometheus::Histogram::BucketBoundaries DurationBuckets() {
  return {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800};
}

}  // namespace

SnapshotMetrics::SnapshotMetrics(prometheus::Registry& registry)
    : size_(prometheus::BuildHistogram()
                .Name("stasis_snapshot_size_bytes")
                .Help("Size of complete snapshots: the sum of the image's regular files")
                .Register(registry)),
      duration_(prometheus::BuildHistogram()
                    .Name("stasis_snapshot_duration_seconds")
                    .Help("Duration of snapshot operations: checkpoint, restore, commit")
                    .Register(registry)),
      operations_(prometheus::BuildCounter()
                      .Name("stasis_snapshot_operations_total")
                      .Help("Snapshot operations by result and failure reason")
                      .Register(registry)),
      forced_cleanups_(prometheus::BuildCounter()
                           .Name("stasis_forced_cleanups_total")
                           .Help("Actors cleaned up by force: sandbox removed, worker freed")
                           .Register(registry)),
      workers_(prometheus::BuildGauge()
                   .Name("stasis_workers")
                   .Help("Workers of this node by state")
                   .Register(registry)) {
  // Series that dashboards and alerts divide by exist from the start, at zero.
  for (const char* op : {"checkpoint", "restore", "commit"}) {
    operations_.Add({{"operation", op}, {"result", "success"}, {"reason", ""}});
  }
  for (const char* r : {"deadline", "sandbox_died", "node_lost", "deleted"}) {
    forced_cleanups_.Add({{"reason", r}});
  }
}

void SnapshotMetrics::ObserveSize(const std::string& trigger, const std::string& scope, bool gpu,
                                  double bytes) {
  size_.Add({{"trigger", trigger}, {"scope", scope}, {"gpu", gpu ? "true" : "false"}}, SizeBuckets())
      .Observe(bytes);
}

void SnapshotMetrics::ObserveDuration(const std::string& operation, const std::string& trigger,
                                      bool gpu, const std::string& result, double seconds) {
  duration_
      .Add({{"operation", operation}, {"trigger", trigger}, {"gpu", gpu ? "true" : "false"},
            {"result", result}},
           DurationBuckets())
      .Observe(seconds);
}

void SnapshotMetrics::CountOperation(const std::string& operation, const std::string& result,
                                     const std::string& reason) {
  operations_.Add({{"operation", operation}, {"result", result}, {"reason", reason}}).Increment();
}

void SnapshotMetrics::CountForcedCleanup(const std::string& reason) {
  forced_cleanups_.Add({{"reason", reason}}).Increment();
}

void SnapshotMetrics::SetWorkers(int free, int held) {
  workers_.Add({{"state", "free"}}).Set(free);
  workers_.Add({{"state", "held"}}).Set(held);
}

}  // namespace stasis
