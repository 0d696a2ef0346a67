// `stasis node`, assembled on a controller Manager (controller/manager.h, which owns the
// client, the endpoints and the start/stop order): the Actor informers (this node's actors
// only), the actor reconciler and its controller, the node's Workers, the heartbeat Lease,
// restart recovery before the first reconcile. cmd/stasis parses flags into NodeAgentOptions
// and calls RunNodeAgent.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/gpu_identity.h"
#include "base/status.h"
#include "controller/secure_metrics.h"
#include "runtimes/bundle_confinement.h"
#include "runtimes/runtime_driver.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

struct NodeAgentOptions {
  std::string kubeconfig;  // "" = $KUBECONFIG or in-cluster
  std::string node;
  std::string runsc = "runsc";
  std::vector<std::string> runsc_flags = {"-network=none"};
  // The host's cgroup filesystem as the agent sees it (in a container: the host's
  // /sys/fs/cgroup mounted over the container's own): sandboxes start in cgroups of their own there (runtimes/sandbox_cgroup.h), so
  // that they outlive the agent's container. Empty: in the agent's own cgroup.
  std::string sandbox_cgroup_root;
  // runtime: microvm actors (docs/microvm.md): the QEMU binary and its accelerator (kvm|tcg).
  std::string qemu = "qemu-system-x86_64";
  std::string microvm_accel = "kvm";
  std::string root = "/var/lib/stasis";
  std::string snapshot_store;  // "" = <root>/store (a node-local store); s3://bucket/prefix: an object store
  // A directory of files named AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,
  // AWS_SECRET_ACCESS_KEY (a mounted Secret); "" = those environment variables.
  std::string snapshot_store_credentials;
  // How an s3:// store's chunks are written (docs/node-agent.md, "Compression and encryption"):
  // --snapshot-store-compression none|zstd[:LEVEL], and --snapshot-store-encryption-key, a file
  // of 32 raw bytes or 64 hex digits that only its owner may read ("" = no encryption). Either
  // set with a directory store is refused: a directory store keeps snapshots as they are.
  std::string snapshot_store_compression = "none";
  std::string snapshot_store_encryption_key;
  // --snapshot-cache-bytes: an s3:// store's download cache (<root>/store-cache) is kept at
  // most this big, least recently used copies evicted after each download; 0 = unbounded.
  // Set with a directory store is refused: that directory is the store, not a cache.
  int64_t snapshot_cache_bytes = 0;
  // Actors from images (docs/images.md): --image-cache-bytes bounds <root>/images (0 =
  // unbounded); --registry-ca-file adds CAs for registries; --insecure-registry names
  // registries reached over plain HTTP; --image-allow-devices lets layers hold device nodes and
  // FIFOs (images/layer_unpack.h).
  int64_t image_cache_bytes = 0;
  bool image_allow_devices = false;
  std::string registry_ca_file;
  std::vector<std::string> insecure_registries;
  // --bundle-root (repeatable) and --bundle-root-per-namespace: where actors' bundles may be
  // (bundle_confinement.h). No root given: <root>/bundles, created at startup (the DaemonSet's
  // /var/lib/stasis/bundles). Checked at startup: never a root that holds the agent's own
  // directories or its service-account token.
  BundleRoots bundle_roots;
  // One entry per worker: empty = a CPU slot, else the GPU UUIDs it holds.
  std::vector<std::vector<std::string>> workers;
  // What discovery (--gpus=auto) learned of each GPU, by UUID: the workers publish it and the
  // checkpoints record it (api/gpu_identity.h). Empty for GPUs named by --gpus.
  std::map<std::string, api::GpuIdentity> gpu_identities;
  // GPU actors' devices come from CDI specs in these directories (docs/gpu.md).
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string gpu_cdi_kind = "nvidia.com/gpu";
  // Loopback unless told otherwise: the manifests bind the pod's own IP (probes, Prometheus).
  std::string metrics_addr = "127.0.0.1:8080";
  std::string probe_addr;               // ManagerOptions::probe_addr: "" = on metrics_addr
  SecureMetricsOptions secure_metrics;  // /metrics over HTTPS, authenticated and authorized
  double kube_api_qps = 50;  // client-side rate limit (client-go's default 5/10 is too low for an agent)
  int kube_api_burst = 100;
  std::string lease_namespace = "stasis-system";
  int concurrency = 4;
  int heartbeat_period_seconds = 10;
  int heartbeat_lease_seconds = 40;
  int shutdown_grace_seconds = 30;
  Durability pause_durability = Durability::kDeferred;  // --pause-snapshot-sync
  bool overlap_resume_writes = true;  // --resume-writes (actor_reconciler.h)
  int snapshot_digest_threads = 0;  // --snapshot-digest-threads (0: every CPU in the affinity mask)
  int host_error_attempts = 5;  // --host-error-attempts (actor_reconciler.h)
  // The runtime driver; nullptr = runsc (RunscDriver with `runsc` and `runsc_flags`), the only
  // one `stasis node` uses. Benchmarks inject theirs here (tests/bench/noop_runtime_driver.h).
  RuntimeDriver* driver = nullptr;
};

// Runs until *stop becomes true (SIGTERM); returns the reason it could not start or run.
Status RunNodeAgent(const NodeAgentOptions& options, const std::atomic<bool>* stop);

}  // namespace stasis
