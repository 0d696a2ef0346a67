// `stasis controller`, assembled on a leader-elected controller Manager
// (controller/manager.h): informers on Actors, Workers and the node heartbeat Leases; the
// cluster reconciler, which only the leader runs (a standby keeps its caches warm); the
// cluster gauges. Losing the Lease ends RunClusterController with kAborted.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "base/status.h"
#include "controller/secure_metrics.h"

namespace stasis {

struct ClusterControllerOptions {
  std::string kubeconfig;
  // Loopback unless told otherwise: the manifests bind the pod's own IP (probes, Prometheus).
  std::string metrics_addr = "127.0.0.1:8080";
  std::string probe_addr;               // ManagerOptions::probe_addr: "" = on metrics_addr
  SecureMetricsOptions secure_metrics;  // /metrics over HTTPS, authenticated and authorized
  double kube_api_qps = 50;  // client-side rate limit (client-go's default 5/10 is too low for an agent)
  int kube_api_burst = 100;
  bool leader_elect = true;
  std::string namespace_ = "stasis-system";  // its Lease, and the nodes' heartbeat Leases
  double lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;
  int grace_seconds = 30;
  int concurrency = 4;
  std::string identity;  // "" = hostname_uuid
  // The snapshot store the node agents' --snapshot-store names ("" = none here): a directory
  // as mounted here (it must exist), or an object store s3://bucket/prefix reached with
  // snapshot_store_credentials (a Secret directory; "" = the AWS_* environment). Retention and
  // the removal of deleted actors' committed snapshots need it.
  std::string snapshot_store;
  std::string snapshot_store_credentials;
  // The agents' --snapshot-store-encryption-key ("" = none): retention and garbage collection
  // read an encrypted snapshot's sealed manifest with it, and keep what they cannot read.
  std::string snapshot_store_encryption_key;
  std::optional<int> retain;  // committed snapshots kept per actor; nullopt = all. Needs the store.
  std::chrono::seconds retain_min_age{0};  // a younger committed snapshot is never deleted by retention
  // Garbage collection of an object store (object_store_gc.h): what nothing has written for
  // this long may be collected; nullopt = no garbage collection.
  std::optional<std::chrono::seconds> gc_grace;
};

Status RunClusterController(const ClusterControllerOptions& options, const std::atomic<bool>* stop);

}  // namespace stasis
