// stasis: one binary, two roles (DESIGN.md §4). This file only parses the command line and
// hands over to the role; everything it calls lives in a library that tests link.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cmd/stasis/flags.h"
#include "cmd/stasis/logging.h"
#include "controller/metrics.h"
#include "reconcilers/cluster/cluster_controller.h"
#include "runtimes/gpu/gpu_discovery.h"
#include "reconcilers/node/node_agent.h"
#include "snapshots/s3_location.h"

namespace {

constexpr const char* kUsage = R"(stasis — suspend and resume sandboxed GPU workloads, declaratively.

Usage:
  stasis node [flags]         the node agent: runs Actors bound to this node with runsc or QEMU
  stasis controller [flags]   the cluster controller: binds, detects stuck actors, retention
  stasis --version            print the version
  stasis --help               print this help

Run `stasis <role> --help` for a role's flags.
)";

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Fail(const std::string& role, const stasis::Status& s) {
  std::fprintf(stderr, "stasis %s: %s\n", role.c_str(), s.ToString().c_str());
  return s.code() == stasis::Code::kInvalidArgument ? 2 : 1;
}

// Both roles: where /metrics and the probes are served, and whether /metrics is protected.
void DefineMetricsFlags(stasis::Flags& f) {
  f.Define("metrics-addr", "127.0.0.1:8080",
           "address for /metrics, and /healthz and /readyz unless --health-probe-addr (\":8080\" = every interface)");
  f.Define("health-probe-addr", "",
           "address for /healthz and /readyz alone, plain HTTP (default: on --metrics-addr; required with --metrics-secure)");
  f.Define("metrics-secure", "false",
           "serve /metrics over HTTPS, only to clients the API server authenticates (TokenReview) and allows "
           "`get` on the non-resource URL /metrics (SubjectAccessReview); docs/security.md");
  f.Define("metrics-cert-dir", "",
           "with --metrics-secure: a directory of tls.crt and tls.key (a kubernetes.io/tls Secret); default a "
           "self-signed certificate generated at start");
}

// --metrics-addr, --health-probe-addr, --metrics-secure and --metrics-cert-dir.
stasis::Status MetricsServing(const stasis::Flags& f, std::string& metrics_addr,
                              std::string& probe_addr, stasis::SecureMetricsOptions& secure) {
  metrics_addr = f.Get("metrics-addr");
  probe_addr = f.Get("health-probe-addr");
  secure.enabled = f.GetBool("metrics-secure");
  secure.cert_dir = f.Get("metrics-cert-dir");
  if (secure.enabled && probe_addr.empty()) {
    return stasis::Status(stasis::Code::kInvalidArgument,
                          "--metrics-secure needs --health-probe-addr: the kubelet's probes do not authenticate");
  }
  if (!secure.enabled && !secure.cert_dir.empty()) {
    return stasis::Status(stasis::Code::kInvalidArgument, "--metrics-cert-dir needs --metrics-secure");
  }
  return stasis::OkStatus();
}

void DefineNodeFlags(stasis::Flags& f) {
  f.Define("kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then in-cluster");
  f.Define("node-name", "", "this node's name (required; in a DaemonSet, from spec.nodeName)");
  f.Define("runsc", "runsc", "the runsc binary");
  f.Define("runsc-flags", "-network=none", "global runsc flags, space-separated, before every subcommand");
  f.Define("sandbox-cgroup-root", "",
           "the host's cgroup filesystem (in a container: the host's /sys/fs/cgroup mounted over its own): sandboxes "
           "start in its stasis-sandboxes cgroups, outside the agent's, and outlive its container; default: the "
           "agent's own cgroup");
  f.Define("qemu", "qemu-system-x86_64", "the QEMU binary for runtime: microvm actors (docs/microvm.md)");
  f.Define("microvm-accel", "kvm", "QEMU accelerator for micro-VMs: kvm, or tcg (software emulation, no /dev/kvm)");
  f.Define("root", "/var/lib/stasis", "state, sandboxes' runtime roots, logs and node-local snapshots");
  f.Define("snapshot-store", "", "where suspended actors' snapshots are committed: a directory (default <root>/store), or s3://bucket/prefix");
  f.DefineRepeated("bundle-root", "a directory actors' bundles (spec.bundle) must lie under, with their root filesystems and bind-mount sources; repeatable (default <root>/bundles; docs/security.md)");
  f.Define("bundle-root-per-namespace", "false", "a bundle must lie under <bundle-root>/<actor's namespace>/");
  f.DefineRepeated("bundle-readonly-source", "a host directory (e.g. /usr) that bundles may bind-mount read-only (option ro) from outside their root; repeatable");
  f.Define("workers", "1", "number of CPU workers (slots) on this node; ignored with --gpus");
  f.Define("gpus", "", "comma-separated GPU UUIDs, or \"auto\" (NVML, else the driver's /proc files, else nvidia-smi): one worker per GPU");
  f.Define("nvml-library", "libnvidia-ml.so.1", "NVML, the NVIDIA driver's library that --gpus=auto asks first (a name the loader finds, or a path)");
  f.Define("gpu-proc-dir", "/proc/driver/nvidia", "the NVIDIA kernel module's /proc directory, --gpus=auto's second source");
  f.Define("gpus-per-worker", "1", "GPUs per worker: that many consecutive GPUs of --gpus form one worker, for actors of spec.gpu.count up to it");
  f.Define("cdi-spec-dirs", "/etc/cdi,/var/run/cdi", "CDI spec directories for GPU actors' devices (later wins)");
  f.Define("gpu-cdi-kind", "nvidia.com/gpu", "CDI kind of this node's GPUs; devices are named by UUID");
  DefineMetricsFlags(f);
  f.Define("kube-api-qps", "50", "requests a second to the API server (client-side limit)");
  f.Define("kube-api-burst", "100", "requests to the API server allowed at once before --kube-api-qps applies");
  f.Define("lease-namespace", "stasis-system", "namespace of the node heartbeat Lease");
  f.Define("concurrency", "4", "actors reconciled in parallel");
  f.Define("heartbeat-period", "10", "seconds between renewals of the node's heartbeat Lease");
  f.Define("heartbeat-lease-duration", "40", "seconds after the last renewal that the node counts as lost");
  f.Define("shutdown-grace", "30", "seconds in-flight reconciles get to finish on SIGTERM");
  f.Define("host-error-attempts", "5", "consecutive host errors (unwritable directory, full disk) after which a transition is retried only when its spec changes");
  f.Define("pause-snapshot-sync", "deferred",
           "when a Pause snapshot is fsynced (and a Full one hashed): deferred (after the PAUSED write; verified on resume after a reboot) or before-status");
  f.Define("resume-writes", "overlapped",
           "a resume's worker claim and RESUMING write: overlapped (beside the restore, an intent record on the node's disk "
           "first) or serial (both before runsc starts)");
  f.Define("snapshot-store-credentials", "",
           "for an s3:// store: a directory of files AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (a mounted Secret); default those environment variables");
  f.Define("snapshot-store-compression", "none",
           "an s3:// store only: none, zstd (level 3) or zstd:LEVEL (1-19), each chunk compressed before upload; worth it only "
           "on links slower than the CPU's zstd throughput (docs/benchmarks.md)");
  f.Define("snapshot-store-encryption-key", "",
           "an s3:// store only: a file of 32 raw bytes or 64 hex digits, mode 0400 or 0600 (a Secret volume with "
           "defaultMode: 0400); chunks and manifests are encrypted with AES-256-GCM before upload, and a snapshot "
           "encrypted with another key is refused by its key id");
  f.Define("snapshot-cache-bytes", "0",
           "an s3:// store only: the most bytes its download cache (<root>/store-cache) keeps, least recently used "
           "copies evicted after each download; K, M, G, T, Ki, Mi, Gi, Ti suffixes (\"50Gi\"); 0: unbounded");
  f.Define("image-cache-bytes", "0",
           "the most bytes of unpacked images (<root>/images) kept, least recently used images not in use removed "
           "after each pull; K, M, G, T, Ki, Mi, Gi, Ti suffixes; 0: unbounded");
  f.Define("registry-ca-file", "", "a PEM bundle of CAs trusted for image registries, besides the system's");
  f.Define("image-allow-devices", "false",
           "unpack device nodes and FIFOs that image layers hold (refused by default: the sandbox gets its devices from its spec, not its image)");
  f.DefineRepeated("insecure-registry", "a registry host[:port] reached over plain HTTP (a test registry on loopback); repeatable");
  f.Define("snapshot-digest-threads", "0",
           "threads that hash, copy and verify snapshot chunks (0: every CPU the agent may use)");
  f.Define("log-level", "info", "debug, info, warn or error");
  f.Define("log-format", "text", "text, or json: one JSON object per line (time, level, msg and the event's key=value fields)");
}

stasis::Status Invalid(const std::string& message) {
  return stasis::Status(stasis::Code::kInvalidArgument, message);
}

// --kube-api-qps and --kube-api-burst.
stasis::Status ApiRate(const stasis::Flags& f, double& qps, int& burst) {
  try {
    size_t used = 0;
    qps = std::stod(f.Get("kube-api-qps"), &used);
    if (used != f.Get("kube-api-qps").size() || !(qps > 0) || qps > 100000) throw std::invalid_argument("");
  } catch (const std::exception&) {
    return Invalid("--kube-api-qps must be a number of requests a second in (0, 100000], not \"" +
                   f.Get("kube-api-qps") + "\"");
  }
  auto b = f.GetInt("kube-api-burst", 1, 100000);
  if (!b.ok()) return b.status();
  burst = *b;
  return stasis::OkStatus();
}

// One worker per GPU (--gpus), else --workers CPU slots. --gpus=auto also learns each GPU's
// model and the driver's version, which the workers publish (api/gpu_identity.h).
stasis::Status WorkersFrom(const stasis::Flags& f, stasis::NodeAgentOptions& o) {
  std::vector<std::string> gpus;
  if (f.Get("gpus") == "auto") {
    stasis::GpuDiscoverySources sources;
    sources.nvml_library = f.Get("nvml-library");
    sources.proc_dir = f.Get("gpu-proc-dir");
    auto inv = stasis::DiscoverGpus(sources);
    if (!inv.ok()) return inv.status();
    for (const auto& gpu : inv->gpus) {
      gpus.push_back(gpu.uuid);
      o.gpu_identities[gpu.uuid] = {gpu.model, inv->driver_version, inv->cuda_version};
      spdlog::info("gpu discovered uuid={} model=\"{}\" driver={} cuda={} source={}", gpu.uuid, gpu.model,
                   inv->driver_version, inv->cuda_version, inv->source);
    }
  } else if (!f.Get("gpus").empty()) {
    gpus = Split(f.Get("gpus"), ',');
  } else {
    auto n = f.GetInt("workers", 1, 1024);
    if (!n.ok()) return n.status();
    o.workers.assign(static_cast<size_t>(*n), {});
    return stasis::OkStatus();
  }
  auto per_worker = f.GetInt("gpus-per-worker", 1, 16);
  if (!per_worker.ok()) return per_worker.status();
  auto grouped = stasis::GroupGpus(gpus, static_cast<int>(*per_worker));
  if (!grouped.ok()) return grouped.status();
  o.workers = std::move(*grouped);
  return stasis::OkStatus();
}

stasis::Result<stasis::NodeAgentOptions> NodeOptions(const stasis::Flags& f) {
  stasis::NodeAgentOptions o;
  o.kubeconfig = f.Get("kubeconfig");
  o.node = f.Get("node-name");
  o.runsc = f.Get("runsc");
  o.runsc_flags = Split(f.Get("runsc-flags"), ' ');
  o.sandbox_cgroup_root = f.Get("sandbox-cgroup-root");
  o.qemu = f.Get("qemu");
  o.microvm_accel = f.Get("microvm-accel");
  if (o.microvm_accel != "kvm" && o.microvm_accel != "tcg") {
    return Invalid("--microvm-accel must be kvm or tcg, not \"" + o.microvm_accel + "\"");
  }
  if (f.Get("pause-snapshot-sync") == "before-status") {
    o.pause_durability = stasis::Durability::kSynced;
  } else if (f.Get("pause-snapshot-sync") != "deferred") {
    return Invalid("--pause-snapshot-sync must be deferred or before-status, not \"" +
                   f.Get("pause-snapshot-sync") + "\"");
  }
  if (f.Get("resume-writes") == "serial") {
    o.overlap_resume_writes = false;
  } else if (f.Get("resume-writes") != "overlapped") {
    return Invalid("--resume-writes must be overlapped or serial, not \"" + f.Get("resume-writes") + "\"");
  }
  auto digest_threads = f.GetInt("snapshot-digest-threads", 0, 1024);
  if (!digest_threads.ok()) return digest_threads.status();
  o.snapshot_digest_threads = *digest_threads;
  o.root = f.Get("root");
  o.snapshot_store = f.Get("snapshot-store");
  o.snapshot_store_credentials = f.Get("snapshot-store-credentials");
  o.snapshot_store_compression = f.Get("snapshot-store-compression");
  o.snapshot_store_encryption_key = f.Get("snapshot-store-encryption-key");
  auto cache_bytes = f.GetBytes("snapshot-cache-bytes");
  if (!cache_bytes.ok()) return cache_bytes.status();
  o.snapshot_cache_bytes = *cache_bytes;
  auto image_cache_bytes = f.GetBytes("image-cache-bytes");
  if (!image_cache_bytes.ok()) return image_cache_bytes.status();
  o.image_cache_bytes = *image_cache_bytes;
  o.registry_ca_file = f.Get("registry-ca-file");
  o.image_allow_devices = f.GetBool("image-allow-devices");
  if (!f.Get("insecure-registry").empty()) o.insecure_registries = Split(f.Get("insecure-registry"), ',');
  if (!f.Get("bundle-root").empty()) o.bundle_roots.roots = Split(f.Get("bundle-root"), ',');
  o.bundle_roots.per_namespace = f.GetBool("bundle-root-per-namespace");
  if (!f.Get("bundle-readonly-source").empty()) {
    o.bundle_roots.readonly_sources = Split(f.Get("bundle-readonly-source"), ',');
  }
  if (auto s = MetricsServing(f, o.metrics_addr, o.probe_addr, o.secure_metrics); !s.ok()) return s;
  if (auto s = ApiRate(f, o.kube_api_qps, o.kube_api_burst); !s.ok()) return s;
  o.lease_namespace = f.Get("lease-namespace");
  for (auto [flag, out, min, max] : {std::tuple{"concurrency", &o.concurrency, 1, 256},
                                     std::tuple{"shutdown-grace", &o.shutdown_grace_seconds, 0, 3600},
                                     std::tuple{"heartbeat-period", &o.heartbeat_period_seconds, 1, 3600},
                                     std::tuple{"heartbeat-lease-duration", &o.heartbeat_lease_seconds, 2, 86400},
                                     std::tuple{"host-error-attempts", &o.host_error_attempts, 1, 1000}}) {
    auto v = f.GetInt(flag, min, max);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (o.heartbeat_lease_seconds <= o.heartbeat_period_seconds) {
    return Invalid("--heartbeat-lease-duration must exceed --heartbeat-period");
  }
  o.cdi_spec_dirs = Split(f.Get("cdi-spec-dirs"), ',');
  o.gpu_cdi_kind = f.Get("gpu-cdi-kind");
  if (stasis::Status s = WorkersFrom(f, o); !s.ok()) return s;
  return o;
}

// The build this process runs, in its first log line and as stasis_build_info on /metrics.
void AnnounceBuild(const char* role) {
  stasis::Metrics::Global().SetBuildInfo(STASIS_VERSION, STASIS_REVISION);
  spdlog::info("stasis starting role={} version={} revision={}", role, STASIS_VERSION, STASIS_REVISION);
}

int RunNode(const std::vector<std::string>& args) {
  stasis::Flags f;
  DefineNodeFlags(f);
  if (auto s = f.Parse(args); !s.ok()) return Fail("node", s);
  if (f.help_requested()) {
    std::printf("Usage: stasis node [flags]\n\n%s", f.Usage().c_str());
    return 0;
  }
  if (auto s = stasis::ConfigureLogging(f.Get("log-level"), f.Get("log-format")); !s.ok()) return Fail("node", s);
  AnnounceBuild("node");
  auto o = NodeOptions(f);
  if (!o.ok()) return Fail("node", o.status());
  InstallSignalHandlers();
  if (auto s = stasis::RunNodeAgent(*o, &g_stop); !s.ok()) return Fail("node", s);
  return 0;
}

void DefineControllerFlags(stasis::Flags& f) {
  f.Define("kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then in-cluster");
  DefineMetricsFlags(f);
  f.Define("kube-api-qps", "50", "requests a second to the API server (client-side limit)");
  f.Define("kube-api-burst", "100", "requests to the API server allowed at once before --kube-api-qps applies");
  f.Define("leader-elect", "true", "elect a leader among replicas through a Lease");
  f.Define("leader-elect-lease-duration", "15s", "how long a standby waits before taking an unrenewed lease");
  f.Define("leader-elect-renew-deadline", "10s", "how long the leader keeps trying to renew before giving up");
  f.Define("leader-elect-retry-period", "2s", "how often leader election is tried");
  f.Define("namespace", "stasis-system", "namespace of the controller's Lease and the nodes' heartbeat Leases");
  f.Define("grace", "30", "seconds past an actor's timeout before it counts as stuck");
  f.Define("concurrency", "4", "actors reconciled in parallel");
  f.Define("snapshot-store", "", "the node agents' --snapshot-store: a directory as mounted here, or s3://bucket/prefix; needed by --retain");
  f.Define("snapshot-store-credentials", "",
           "for an s3:// store: a directory of files AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (a mounted Secret); default those environment variables");
  f.Define("snapshot-store-encryption-key", "",
           "an s3:// store whose agents encrypt: the same key file (mode 0400 or 0600), so that retention and garbage "
           "collection can read the sealed manifests; without it they keep every sealed snapshot");
  f.Define("retain", "", "committed snapshots kept per actor (at least 1; unset keeps all); needs --snapshot-store");
  f.Define("retain-min-age", "0s", "a committed snapshot younger than this (e.g. 1h) is never deleted by --retain");
  f.Define("snapshot-gc-grace", "1h",
           "for an s3:// store: objects nothing has written for this long may be garbage-collected (no manifest, or an actor that no longer exists); 0 turns collection off");
  f.Define("log-level", "info", "debug, info, warn or error");
  f.Define("log-format", "text", "text, or json: one JSON object per line (time, level, msg and the event's key=value fields)");
}

// --retain-min-age and --snapshot-gc-grace (collection only for an object store, and not at 0).
stasis::Status StoreDurations(const stasis::Flags& f, stasis::ClusterControllerOptions& o) {
  auto min_age = f.GetSeconds("retain-min-age");
  if (!min_age.ok()) return min_age.status();
  o.retain_min_age = std::chrono::seconds(static_cast<long long>(*min_age));
  auto grace = f.GetSeconds("snapshot-gc-grace");
  if (!grace.ok()) return grace.status();
  if (*grace > 0 && o.snapshot_store.rfind(stasis::kS3Scheme, 0) == 0) {
    if (*grace < 300) return Invalid("--snapshot-gc-grace must be at least 5m: a put in progress must never look abandoned");
    o.gc_grace = std::chrono::seconds(static_cast<long long>(*grace));
  }
  return stasis::OkStatus();
}

stasis::Result<stasis::ClusterControllerOptions> ControllerOptions(const stasis::Flags& f) {
  stasis::ClusterControllerOptions o;
  o.kubeconfig = f.Get("kubeconfig");
  if (auto s = MetricsServing(f, o.metrics_addr, o.probe_addr, o.secure_metrics); !s.ok()) return s;
  if (auto s = ApiRate(f, o.kube_api_qps, o.kube_api_burst); !s.ok()) return s;
  o.leader_elect = f.GetBool("leader-elect");
  o.namespace_ = f.Get("namespace");
  for (auto [flag, out] : {std::pair{"leader-elect-lease-duration", &o.lease_duration_s},
                           std::pair{"leader-elect-renew-deadline", &o.renew_deadline_s},
                           std::pair{"leader-elect-retry-period", &o.retry_period_s}}) {
    auto v = f.GetSeconds(flag);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  auto grace = f.GetInt("grace", 0, 86400);
  if (!grace.ok()) return grace.status();
  o.grace_seconds = *grace;
  auto concurrency = f.GetInt("concurrency", 1, 256);
  if (!concurrency.ok()) return concurrency.status();
  o.concurrency = *concurrency;
  o.snapshot_store = f.Get("snapshot-store");
  o.snapshot_store_credentials = f.Get("snapshot-store-credentials");
  o.snapshot_store_encryption_key = f.Get("snapshot-store-encryption-key");
  if (auto s = StoreDurations(f, o); !s.ok()) return s;
  if (!f.Get("retain").empty()) {
    auto retain = f.GetInt("retain", 1, 1000000);
    if (!retain.ok()) {
      return Invalid(retain.status().message() +
                     " (latestSnapshot is always kept; leave --retain unset to keep every snapshot)");
    }
    o.retain = *retain;
  }
  return o;
}

int RunController(const std::vector<std::string>& args) {
  stasis::Flags f;
  DefineControllerFlags(f);
  if (auto s = f.Parse(args); !s.ok()) return Fail("controller", s);
  if (f.help_requested()) {
    std::printf("Usage: stasis controller [flags]\n\n%s", f.Usage().c_str());
    return 0;
  }
  if (auto s = stasis::ConfigureLogging(f.Get("log-level"), f.Get("log-format")); !s.ok()) return Fail("controller", s);
  AnnounceBuild("controller");
  auto o = ControllerOptions(f);
  if (!o.ok()) return Fail("controller", o.status());
  InstallSignalHandlers();
  if (auto s = stasis::RunClusterController(*o, &g_stop); !s.ok()) return Fail("controller", s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  if (cmd == "--version" || cmd == "version") {
    std::printf("stasis %s (revision %s)\n", STASIS_VERSION, STASIS_REVISION);
    return 0;
  }
  if (cmd == "node") return RunNode(rest);
  if (cmd == "controller") return RunController(rest);
  std::fprintf(stderr, "stasis: unknown command %s\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
