// SnapshotMetrics: the series dashboards and alerts take rate() of exist at zero from the start
// (a series born at 1 hides its first increment from rate()), and a snapshot's throughput is its
// size over its checkpoint's duration, observed with the size.
#include "reconcilers/node/snapshot_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace stasis {
namespace {

using Labels = std::map<std::string, std::string>;

// The series of `family` with exactly `labels`, or nullptr.
const prometheus::ClientMetric* Find(const std::vector<prometheus::MetricFamily>& families,
                                     const std::string& family, const Labels& labels) {
  for (const auto& f : families) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      Labels have;
      for (const auto& l : m.label) have[l.name] = l.value;
      if (have == labels) return &m;
    }
  }
  return nullptr;
}

TEST(SnapshotMetricsTest, FailureAndSuccessSeriesExistAtZeroFromTheStart) {
  prometheus::Registry registry;
  SnapshotMetrics metrics(registry);
  const auto families = registry.Collect();
  for (const Labels& l : std::vector<Labels>{
           {{"operation", "checkpoint"}, {"result", "success"}, {"reason", ""}},
           {{"operation", "checkpoint"}, {"result", "error"}, {"reason", "container_stopped"}},
           {{"operation", "checkpoint"}, {"result", "error"}, {"reason", "nvproxy_live_clients"}},
           {{"operation", "checkpoint"}, {"result", "error"}, {"reason", "data_dir_unusable"}},
           {{"operation", "checkpoint"}, {"result", "error"}, {"reason", "data_archive_failed"}},
           {{"operation", "restore"}, {"result", "error"}, {"reason", "data_restore_failed"}},
           {{"operation", "restore"}, {"result", "error"}, {"reason", "version_mismatch"}},
           {{"operation", "checkpoint"}, {"result", "error"}, {"reason", "host_disk_full"}},
           {{"operation", "commit"}, {"result", "error"}, {"reason", "store_unavailable"}},
           {{"operation", "commit"}, {"result", "error"}, {"reason", "store_auth_failed"}},
           {{"operation", "commit"}, {"result", "error"}, {"reason", "store_bucket_missing"}}}) {
    const auto* m = Find(families, "stasis_snapshot_operations_total", l);
    ASSERT_NE(m, nullptr) << l.at("operation") << " " << l.at("reason");
    EXPECT_EQ(m->counter.value, 0);
  }
  for (const char* r : {"sandbox_died", "snapshot_incomplete", "timeout", "container_stopped", "deleted"}) {
    ASSERT_NE(Find(families, "stasis_forced_cleanups_total", {{"reason", r}}), nullptr) << r;
  }
  const auto* d = Find(families, "stasis_snapshot_duration_seconds",
                       {{"operation", "commit"}, {"trigger", "Suspend"}, {"gpu", "true"}, {"result", "success"}});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->histogram.sample_count, 0u);
  // A GPU restore's time until usable, beside its time until RUNNING.
  EXPECT_NE(Find(families, "stasis_snapshot_duration_seconds",
                 {{"operation", "restore_usable"}, {"trigger", "Suspend"}, {"gpu", "true"}, {"result", "success"}}),
            nullptr);
  EXPECT_NE(Find(families, "stasis_snapshot_size_bytes", {{"trigger", "Pause"}, {"scope", "Full"}, {"gpu", "false"}}),
            nullptr);
  EXPECT_NE(Find(families, "stasis_checkpoint_throughput_bytes_per_second", {{"trigger", "Suspend"}, {"gpu", "true"}}),
            nullptr);
}

TEST(SnapshotMetricsTest, ThroughputIsSizeOverCheckpointDuration) {
  prometheus::Registry registry;
  SnapshotMetrics metrics(registry);
  metrics.ObserveSnapshot("Suspend", "Full", true, 8.0 * (1 << 30), 2.0);  // 8 GiB in 2 s
  metrics.ObserveSnapshot("Suspend", "Full", true, 1 << 20, 0);            // no duration: size only
  const auto families = registry.Collect();
  const auto* size = Find(families, "stasis_snapshot_size_bytes", {{"trigger", "Suspend"}, {"scope", "Full"}, {"gpu", "true"}});
  ASSERT_NE(size, nullptr);
  EXPECT_EQ(size->histogram.sample_count, 2u);
  const auto* tp = Find(families, "stasis_checkpoint_throughput_bytes_per_second", {{"trigger", "Suspend"}, {"gpu", "true"}});
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->histogram.sample_count, 1u);
  EXPECT_DOUBLE_EQ(tp->histogram.sample_sum, 4.0 * (1 << 30));
  // 4 GiB/s lands in the 4 GiB/s bucket (le is inclusive), not the 2 GiB/s one.
  for (const auto& b : tp->histogram.bucket) {
    if (b.upper_bound == 2.0 * (1 << 30)) EXPECT_EQ(b.cumulative_count, 0u);
    if (b.upper_bound == 4.0 * (1 << 30)) EXPECT_EQ(b.cumulative_count, 1u);
  }
}

TEST(SnapshotMetricsTest, ObjectStoreTransfersBytesSecondsAndRetries) {
  prometheus::Registry registry;
  SnapshotMetrics metrics(registry);
  TransferObserver& observer = metrics;
  auto families = registry.Collect();
  ASSERT_NE(Find(families, "stasis_object_store_retries_total", {{"operation", "put"}}), nullptr);
  ASSERT_NE(Find(families, "stasis_object_store_bytes_total", {{"direction", "download"}}), nullptr);

  observer.ObjectBytes(TransferDirection::kUpload, 8 << 20);
  observer.ObjectBytes(TransferDirection::kUpload, 100);
  observer.SnapshotTransfer(TransferDirection::kUpload, 8 << 20, 2.0, true);
  observer.SnapshotTransfer(TransferDirection::kDownload, 8 << 20, 1.0, false);
  observer.Retry("get");
  ASSERT_NE(Find(families, "stasis_object_store_compressed_bytes_total", {{"form", "stored"}}), nullptr);
  observer.Compressed(8 << 20, 3 << 20);
  families = registry.Collect();
  EXPECT_EQ(Find(families, "stasis_object_store_compressed_bytes_total", {{"form", "plain"}})->counter.value, 8 << 20);
  EXPECT_EQ(Find(families, "stasis_object_store_compressed_bytes_total", {{"form", "stored"}})->counter.value, 3 << 20);
  EXPECT_EQ(Find(families, "stasis_object_store_bytes_total", {{"direction", "upload"}})->counter.value,
            (8 << 20) + 100);
  EXPECT_EQ(Find(families, "stasis_object_store_retries_total", {{"operation", "get"}})->counter.value, 1);
  const auto* up = Find(families, "stasis_object_store_transfer_seconds", {{"direction", "upload"}, {"result", "success"}});
  EXPECT_EQ(up->histogram.sample_count, 1u);
  EXPECT_EQ(up->histogram.sample_sum, 2.0);
  const auto* rate = Find(families, "stasis_object_store_throughput_bytes_per_second", {{"direction", "upload"}});
  EXPECT_EQ(rate->histogram.sample_sum, 4 << 20);
  // A failed transfer has a duration but no throughput.
  EXPECT_EQ(Find(families, "stasis_object_store_transfer_seconds", {{"direction", "download"}, {"result", "error"}})
                ->histogram.sample_count,
            1u);
  EXPECT_EQ(Find(families, "stasis_object_store_throughput_bytes_per_second", {{"direction", "download"}})
                ->histogram.sample_count,
            0u);
}

}  // namespace
}  // namespace stasis
