#include "reconcilers/node/snapshot_metrics.h"

#include "api/conditions.h"

namespace stasis {
namespace {

// 64 KiB … 256 GiB in powers of 4: a CPU counter is a few hundred KiB, an 80 GiB GPU's memory
// image lands in the top buckets.
prometheus::Histogram::BucketBoundaries SizeBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 64 * 1024; v <= 256.0 * (1ull << 30); v *= 4) b.push_back(v);
  return b;
}

// 64 KiB/s … 64 GiB/s in powers of 2: a small CPU image, whose checkpoint time is mostly fixed
// cost, lands between a few hundred KiB/s (a loaded machine) and a few MiB/s; a GPU image moved
// to host memory at GB/s.
prometheus::Histogram::BucketBoundaries ThroughputBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 64 * 1024; v <= 64.0 * (1ull << 30); v *= 2) b.push_back(v);
  return b;
}

const char* Bool(bool b) { return b ? "true" : "false"; }

// Every `reason` label is the metric spelling of the condition reason the actor gets for the
// failure (api::MetricReason; docs/metrics.md). The failure classes a runtime driver names
// (runtime_driver.h's table): a failed checkpoint or restore, or a checkpoint that left a dead
// or suspect sandbox to clean up, says them CamelCased.
constexpr const char* kDriverReasons[] = {api::kReasonNvproxyLiveClients, api::kReasonContainerStopped,
                                          api::kReasonVersionMismatch,    api::kReasonTimeout,
                                          api::kReasonNotFound,           api::kReasonBadBundle,
                                          api::kReasonRuntimeError};
// Errors of the node itself (host_errors.h), whatever the operation.
constexpr const char* kHostReasons[] = {api::kReasonHostPathTooLong, api::kReasonHostPathNotWritable,
                                        api::kReasonHostDiskFull};
// A commit's CommitFailed reasons (CommitFailedReason): named refusals, else StoreUnavailable.
constexpr const char* kCommitReasons[] = {api::kReasonStoreUnavailable, api::kReasonStoreAuthFailed,
                                          api::kReasonStoreBucketMissing};

// The operations S3Client names (s3_client.cc, s3_multipart.cc), each retry counter at zero.
constexpr const char* kStoreOperations[] = {"put",           "get",
                                            "head",          "delete",
                                            "list",          "create-multipart",
                                            "upload-part",   "complete-multipart",
                                            "abort-multipart", "list-multipart"};

// The download cache's (snapshots/snapshot_cache.h): its size after each pass, its evictions.
prometheus::Family<prometheus::Gauge>& CacheBytesFamily(prometheus::Registry& registry) {
  return prometheus::BuildGauge()
      .Name("stasis_snapshot_cache_bytes")
      .Help("Bytes on disk of the object store's download cache after its last pass")
      .Register(registry);
}

prometheus::Family<prometheus::Counter>& CacheEvictionsFamily(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("stasis_snapshot_cache_evictions_total")
      .Help("Cached snapshot copies evicted, least recently used first, to keep the bound")
      .Register(registry);
}

prometheus::Family<prometheus::Histogram>& StartsFamily(prometheus::Registry& registry) {
  return prometheus::BuildHistogram()
      .Name("stasis_actor_start_seconds")
      .Help("First start of an actor on this node, decision to RUNNING, by kind of start")
      .Register(registry);
}

}  // namespace

// 10 ms … 30 min, six bounds a decade (1, 1.5, 2, 3, 5, 7): no bucket is wider than 5/3 of
// its lower bound, so histogram_quantile lands within ~1.7x of the truth where the measured
// distributions lie (CPU pauses 40–200 ms, GPU checkpoints 1–15 s, large GPU suspends
// minutes) instead of reporting bucket edges. Written out: decimal literals print as such in
// `le` labels, products of a loop would not.
prometheus::Histogram::BucketBoundaries DurationBuckets() {
  return {0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5,  0.7,  1,   1.5,  2,   3,   5,
          7,    10,    15,   20,   30,   50,   70,  100,  150, 200, 300, 500, 700, 1000, 1500, 1800};
}

SnapshotMetrics::SnapshotMetrics(prometheus::Registry& registry)
    : size_(prometheus::BuildHistogram()
                .Name("stasis_snapshot_size_bytes")
                .Help("Size of complete snapshots: the sum of the image's regular files")
                .Register(registry)),
      throughput_(prometheus::BuildHistogram()
                      .Name("stasis_checkpoint_throughput_bytes_per_second")
                      .Help("Bytes of a complete snapshot per second of the checkpoint that wrote it")
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
                   .Register(registry)),
      starts_(StartsFamily(registry)),
      store_bytes_(prometheus::BuildCounter()
                       .Name("stasis_object_store_bytes_total")
                       .Help("Bytes of objects put to and got from the object store")
                       .Register(registry)),
      store_seconds_(prometheus::BuildHistogram()
                         .Name("stasis_object_store_transfer_seconds")
                         .Help("Duration of one snapshot's transfer to or from the object store")
                         .Register(registry)),
      store_throughput_(prometheus::BuildHistogram()
                            .Name("stasis_object_store_throughput_bytes_per_second")
                            .Help("Bytes of a snapshot per second of its successful transfer")
                            .Register(registry)),
      store_retries_(prometheus::BuildCounter()
                         .Name("stasis_object_store_retries_total")
                         .Help("Object-store requests sent again after a retryable failure")
                         .Register(registry)),
      store_compressed_(prometheus::BuildCounter()
                            .Name("stasis_object_store_compressed_bytes_total")
                            .Help("Chunk bytes of compressed uploads before (plain) and as stored (stored)")
                            .Register(registry)),
      cache_bytes_(CacheBytesFamily(registry)),
      cache_evictions_(CacheEvictionsFamily(registry)) {
  AddStoreSeries();
  // Series that dashboards and alerts take rate() of exist from the start, at zero (header).
  for (const char* op : {"checkpoint", "restore", "commit"}) {
    operations_.Add({{"operation", op}, {"result", "success"}, {"reason", ""}});
  }
  auto error = [this](const char* op, const char* condition_reason) {
    operations_.Add({{"operation", op}, {"result", "error"}, {"reason", api::MetricReason(condition_reason)}});
  };
  for (const char* op : {"checkpoint", "restore", "commit"}) {
    for (const char* r : kHostReasons) error(op, r);
  }
  for (const char* op : {"checkpoint", "restore"}) {
    for (const char* r : kDriverReasons) error(op, r);
  }
  // Data snapshots (data_dirs.h): refused, archive or restore failures, a bad image.
  for (const char* r : {api::kReasonDataDirUnusable, api::kReasonDataArchiveFailed}) error("checkpoint", r);
  for (const char* r : {api::kReasonDataDirUnusable, api::kReasonDataRestoreFailed, api::kReasonSnapshotCorrupt,
                        api::kReasonSnapshotNotFound}) {
    error("restore", r);
  }
  for (const char* r : kCommitReasons) error("commit", r);
  // A sandbox found dead, a snapshot that could not be completed after a Direct checkpoint, a
  // checkpoint whose failure left the sandbox dead or suspect; and the one label that is no
  // condition: an actor deleted mid-transition.
  for (const char* r : {api::kReasonSandboxDied, api::kReasonSnapshotIncomplete}) {
    forced_cleanups_.Add({{"reason", api::MetricReason(r)}});
  }
  for (const char* r : kDriverReasons) forced_cleanups_.Add({{"reason", api::MetricReason(r)}});
  for (const char* r : kHostReasons) forced_cleanups_.Add({{"reason", api::MetricReason(r)}});
  forced_cleanups_.Add({{"reason", api::kMetricReasonDeleted}});
  AddSuccessSeries();
}

// Successful operations' histograms (commits are always of a Suspend), and first starts'.
void SnapshotMetrics::AddSuccessSeries() {
  for (const char* kind : {"boot", "golden", "warm", "clone", "refill"}) starts_.Add({{"kind", kind}}, DurationBuckets());
  for (bool gpu : {false, true}) {
    for (const char* trigger : {"Pause", "Suspend"}) {
      for (const char* scope : {"Full", "Data"}) {
        size_.Add({{"trigger", trigger}, {"scope", scope}, {"gpu", Bool(gpu)}}, SizeBuckets());
      }
      throughput_.Add({{"trigger", trigger}, {"gpu", Bool(gpu)}}, ThroughputBuckets());
      for (const char* op : {"checkpoint", "restore", "restore_usable"}) {
        duration_.Add({{"operation", op}, {"trigger", trigger}, {"gpu", Bool(gpu)}, {"result", "success"}},
                      DurationBuckets());
      }
    }
    duration_.Add({{"operation", "commit"}, {"trigger", "Suspend"}, {"gpu", Bool(gpu)}, {"result", "success"}},
                  DurationBuckets());
  }
}

void SnapshotMetrics::AddStoreSeries() {
  for (const char* d : {"upload", "download"}) {
    store_bytes_.Add({{"direction", d}});
    store_throughput_.Add({{"direction", d}}, ThroughputBuckets());
    for (const char* r : {"success", "error"}) store_seconds_.Add({{"direction", d}, {"result", r}}, DurationBuckets());
  }
  for (const char* op : kStoreOperations) store_retries_.Add({{"operation", op}});
  for (const char* form : {"plain", "stored"}) store_compressed_.Add({{"form", form}});
  cache_bytes_.Add({});
  cache_evictions_.Add({});
}

void SnapshotMetrics::ObjectBytes(TransferDirection direction, uint64_t bytes) {
  store_bytes_.Add({{"direction", DirectionName(direction)}}).Increment(static_cast<double>(bytes));
}

void SnapshotMetrics::SnapshotTransfer(TransferDirection direction, uint64_t bytes, double seconds, bool ok) {
  const char* d = DirectionName(direction);
  store_seconds_.Add({{"direction", d}, {"result", ok ? "success" : "error"}}, DurationBuckets()).Observe(seconds);
  if (ok && seconds > 0) {
    store_throughput_.Add({{"direction", d}}, ThroughputBuckets()).Observe(static_cast<double>(bytes) / seconds);
  }
}

void SnapshotMetrics::Retry(std::string_view op) {
  store_retries_.Add({{"operation", std::string(op)}}).Increment();
}

void SnapshotMetrics::Compressed(uint64_t plain_bytes, uint64_t stored_bytes) {
  store_compressed_.Add({{"form", "plain"}}).Increment(static_cast<double>(plain_bytes));
  store_compressed_.Add({{"form", "stored"}}).Increment(static_cast<double>(stored_bytes));
}
void SnapshotMetrics::CacheBytes(uint64_t bytes) { cache_bytes_.Add({}).Set(static_cast<double>(bytes)); }

void SnapshotMetrics::CacheEviction(uint64_t /*bytes*/) { cache_evictions_.Add({}).Increment(); }

void SnapshotMetrics::ObserveSnapshot(const std::string& trigger, const std::string& scope, bool gpu,
                                      double bytes, double checkpoint_seconds) {
  size_.Add({{"trigger", trigger}, {"scope", scope}, {"gpu", Bool(gpu)}}, SizeBuckets()).Observe(bytes);
  if (checkpoint_seconds > 0) {
    throughput_.Add({{"trigger", trigger}, {"gpu", Bool(gpu)}}, ThroughputBuckets())
        .Observe(bytes / checkpoint_seconds);
  }
}

void SnapshotMetrics::ObserveDuration(const std::string& operation, const std::string& trigger,
                                      bool gpu, const std::string& result, double seconds) {
  duration_
      .Add({{"operation", operation}, {"trigger", trigger}, {"gpu", Bool(gpu)}, {"result", result}},
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

void SnapshotMetrics::ObserveStart(const std::string& kind, double seconds) {
  starts_.Add({{"kind", kind}}, DurationBuckets()).Observe(seconds);
}

}  // namespace stasis
