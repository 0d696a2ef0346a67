#include "reconcilers/node/node_agent.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>

#include "api/names.h"
#include "api/node_drain.h"
#include "controller/manager.h"
#include "reconcilers/api_resources.h"
#include "images/image_store.h"
#include "images/registry_client.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/image_metrics.h"
#include "reconcilers/node/node_heartbeat.h"
#include "reconcilers/node/node_workers.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "runtimes/qemu_microvm_driver.h"
#include "runtimes/runsc_driver.h"
#include "runtimes/sandbox_cgroup.h"
#include "snapshots/filesystem_backend.h"
#include "snapshots/object_store_backend.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/snapshot_store.h"

namespace stasis {
namespace {

ManagerOptions ManagerOptionsFor(const NodeAgentOptions& o) {
  ManagerOptions mo;
  mo.name = "node agent";
  mo.kubeconfig = o.kubeconfig;
  mo.user_agent = "stasis-node/" + o.node;
  mo.metrics_addr = o.metrics_addr;
  mo.probe_addr = o.probe_addr;
  mo.secure_metrics = o.secure_metrics;
  mo.kube_api_qps = o.kube_api_qps;
  mo.kube_api_burst = o.kube_api_burst;
  mo.not_synced_message = "actor caches not synced";
  mo.events.component = "stasis-node";
  mo.events.host = o.node;
  mo.shutdown_grace = std::chrono::seconds(o.shutdown_grace_seconds);
  return mo;
}

// <root>/{run,logs,snapshots} and the store's directory on this node (a directory store's
// root, or an object store's download cache <root>/store-cache) in *store_root.
Status MakeDirectories(const NodeAgentOptions& o, std::string* store_root) {
  std::error_code ec;
  for (const char* d : {"run", "logs", "snapshots"}) {
    std::filesystem::create_directories(o.root + "/" + d, ec);
    if (ec) return Status(Code::kFailedPrecondition, "cannot create " + o.root + "/" + d + ": " + ec.message());
  }
  *store_root = IsS3Url(o.snapshot_store) ? o.root + "/store-cache"
                : o.snapshot_store.empty()      ? o.root + "/store"
                                                : o.snapshot_store;
  std::filesystem::create_directories(*store_root, ec);
  return OkStatus();
}

// How this agent writes an object store's chunks: --snapshot-store-compression and the key of
// --snapshot-store-encryption-key, each checked strictly (and refused with a directory store,
// as --snapshot-cache-bytes is: a directory store has no download cache to bound).
Result<ChunkCodec> ChunkCodecFor(const NodeAgentOptions& o) {
  if (!IsS3Url(o.snapshot_store)) {
    if (o.snapshot_store_compression != "none" || !o.snapshot_store_encryption_key.empty()) {
      return Status(Code::kInvalidArgument,
                    "--snapshot-store-compression and --snapshot-store-encryption-key apply only to an s3:// "
                    "--snapshot-store; a directory store keeps snapshots as they are",
                    snapshot_reason::kStoreConfigInvalid);
    }
    if (o.snapshot_cache_bytes != 0) {
      return Status(Code::kInvalidArgument,
                    "--snapshot-cache-bytes applies only to an s3:// --snapshot-store; a directory store is the "
                    "store itself, never evicted",
                    snapshot_reason::kStoreConfigInvalid);
    }
    return ChunkCodec();
  }
  auto compression = ParseCompressionSetting(o.snapshot_store_compression);
  if (!compression.ok()) return compression.status();
  std::shared_ptr<const EncryptionKey> key;
  if (!o.snapshot_store_encryption_key.empty()) {
    auto loaded = LoadEncryptionKeyFile(o.snapshot_store_encryption_key);
    if (!loaded.ok()) return loaded.status();
    key = std::make_shared<const EncryptionKey>(std::move(*loaded));
  }
  spdlog::info("snapshot store codec compression={} level={} encryption={} key_id={}",
               CompressionName(compression->compression), compression->level,
               EncryptionName(key ? Encryption::kAes256Gcm : Encryption::kNone), key ? key->id() : "");
  return ChunkCodec(*compression, std::move(key));
}

// The committed snapshots' backend: an object store for --snapshot-store s3://bucket/prefix
// (endpoint, region and credentials from --snapshot-store-credentials' files, else the AWS_*
// environment; its transfers reported to `observer`), else the directory `store_root`.
Result<std::unique_ptr<CommittedBackend>> CommittedBackendFor(const NodeAgentOptions& o, const std::string& store_root,
                                                              ChunkCodec codec, TransferObserver* observer) {
  if (!IsS3Url(o.snapshot_store)) return std::unique_ptr<CommittedBackend>(std::make_unique<FilesystemBackend>(store_root, true));
  auto location = ParseS3Location(o.snapshot_store);
  if (!location.ok()) return location.status();
  auto endpoint = S3EndpointFor(o.snapshot_store_credentials);
  if (!endpoint.ok()) return endpoint.status();
  S3ClientOptions client_options;
  client_options.observer = observer;
  auto client = std::make_unique<S3Client>(std::move(*endpoint), location->bucket, std::move(client_options));
  auto backend =
      std::make_unique<ObjectStoreBackend>(std::move(client), std::move(*location), store_root, 0, std::move(codec));
  backend->SetCacheBound(o.snapshot_cache_bytes);
  spdlog::info("snapshot cache root={} bound_bytes={}", store_root, o.snapshot_cache_bytes);
  return std::unique_ptr<CommittedBackend>(std::move(backend));
}

// --bundle-root, defaulted and checked against the agent's own directories.
Result<BundleRoots> BundleRootsFor(const NodeAgentOptions& o, const std::string& store_root) {
  BundleRoots roots = o.bundle_roots;
  if (roots.roots.empty()) {
    const std::string dflt = o.root + "/bundles";
    std::error_code ec;
    std::filesystem::create_directories(dflt, ec);
    roots.roots = {dflt};
  }
  AgentDirs own;
  own.state_root = o.root;
  for (const char* d : {"run", "logs", "snapshots", kGpuBundlesDir}) own.private_dirs.push_back(o.root + "/" + d);
  own.private_dirs.push_back(store_root);
  for (const char* token : {"/var/run/secrets/kubernetes.io/serviceaccount", "/run/secrets/kubernetes.io/serviceaccount"}) {
    own.private_dirs.push_back(token);
  }
  if (Status s = ValidateBundleRoots(roots, own); !s.ok()) return s;
  for (const auto& r : roots.roots) spdlog::info("bundle root root={} per_namespace={}", r, roots.per_namespace);
  return roots;
}

// runsc must run; QEMU may be missing (gVisor actors do not need it; a micro-VM actor's start
// fails with the reason).
Status CheckRuntimes(const NodeAgentOptions& o, RuntimeDriver& driver, QemuMicrovmDriver& microvm,
                     const std::string& store_root) {
  auto v = driver.Version();
  if (!v.ok()) {
    return Status(Code::kFailedPrecondition, "runsc at " + o.runsc + " does not run: " + v.status().message());
  }
  spdlog::info("node agent starting node={} runsc={} runsc_version={} workers={} root={} store={}",
               o.node, o.runsc, *v, o.workers.size(), o.root, store_root);
  if (auto q = microvm.Version(); !q.ok()) {
    spdlog::warn("micro-VM runtime unavailable qemu={} error=\"{}\"", o.qemu, q.status().message());
  } else {
    spdlog::info("micro-VM runtime qemu={} qemu_version={} accel={}", o.qemu, *q, o.microvm_accel);
  }
  return OkStatus();
}

// This node's actors: pinned here (spec.nodeName) or bound here (status.nodeName) and not
// pinned here. The two caches are disjoint: an actor pinned and bound here (every pinned
// actor once it runs) would otherwise come down both watches, every write of it sent,
// parsed and cached twice.
ActorLookup AddActorInformers(Manager& m, const std::string& node, Informer** pinned,
                              Informer** bound) {
  InformerOptions pinned_opts;
  pinned_opts.type = kActorType;
  pinned_opts.field_selector = api::PinnedActorsSelector(node);
  InformerOptions bound_opts = pinned_opts;
  bound_opts.field_selector = api::BoundUnpinnedActorsSelector(node);
  *pinned = &m.AddInformer(pinned_opts);
  *bound = &m.AddInformer(bound_opts);
  return [p = *pinned, b = *bound](const std::string& key) {
    if (auto obj = p->store().Get(key)) return obj;
    return b->store().Get(key);
  };
}

// This node's Node object (none where no kubelet registered it: then it never drains). A change
// of its drain requeues every actor here, which is then decided again (transitions.h).
void WatchNodeDrain(Manager& m, const std::string& node, ActorReconciler& reconciler, Controller& controller,
                    std::vector<Informer*> actor_informers) {
  InformerOptions io;
  io.type = kNodeType;
  io.field_selector = "metadata.name=" + node;
  Informer& nodes = m.AddInformer(io);
  auto seen = [&reconciler, &controller, node, actor_informers](const ObjectPtr& obj, bool gone) {
    const bool draining = !gone && obj && api::NodeDrainOf(*obj).drain;
    if (reconciler.SetNodeDraining(draining) == draining) return;
    spdlog::info("node drain changed node={} draining={}", node, draining);
    for (Informer* i : actor_informers) {
      for (const auto& key : i->store().Keys()) controller.queue().Add(key);
    }
  };
  nodes.AddEventHandler({[seen](const ObjectPtr& n) { seen(n, false); },
                         [seen](const ObjectPtr&, const ObjectPtr& n) { seen(n, false); },
                         [seen](const ObjectPtr& n) { seen(n, true); }});
}

// The node's image cache (docs/images.md), its registry client and what it reports.
struct NodeImages {
  NodeImages(const NodeAgentOptions& o, prometheus::Registry& registry)
      : metrics(registry),
        client(images::RegistryClientOptions{.ca_file = o.registry_ca_file, .insecure_hosts = o.insecure_registries}),
        store({.root = o.root, .unpack = {.allow_devices = o.image_allow_devices}, .budget_bytes = o.image_cache_bytes},
              client, &metrics) {}
  ImageMetrics metrics;
  images::RegistryClient client;
  images::ImageStore store;
};

// The digests the node's actors run on or have snapshots of (status.imageDigest,
// status.latestSnapshot.imageDigest): what the image cache never evicts.
std::function<std::set<std::string>()> ImagesInUse(std::vector<Informer*> actor_informers) {
  return [actor_informers] {
    std::set<std::string> in_use;
    for (Informer* i : actor_informers) {
      for (const auto& key : i->store().Keys()) {
        ObjectPtr obj = i->store().Get(key);
        if (!obj) continue;
        const auto status = obj->value("status", nlohmann::json::object());
        if (auto d = status.value("imageDigest", ""); !d.empty()) in_use.insert(d);
        const auto snap = status.value("latestSnapshot", nlohmann::json::object());
        if (auto d = snap.value("imageDigest", ""); !d.empty()) in_use.insert(d);
      }
    }
    return in_use;
  };
}

ActorReconcilerOptions ReconcilerOptionsFor(const NodeAgentOptions& o) {
  ActorReconcilerOptions ro;
  ro.node = o.node;
  ro.root = o.root;
  ro.cdi_spec_dirs = o.cdi_spec_dirs;
  ro.gpu_cdi_kind = o.gpu_cdi_kind;
  ro.pause_durability = o.pause_durability;
  ro.overlap_resume_writes = o.overlap_resume_writes;
  ro.host_error_attempts = o.host_error_attempts;
  return ro;
}

// With --sandbox-cgroup-root, runsc starts the sandboxes in the host's stasis-sandboxes cgroups,
// so that they outlive the agent's container (docs/node-agent.md).
Status StartSandboxesOutsideTheAgent(const NodeAgentOptions& o, RunscDriver& runsc) {
  if (o.sandbox_cgroup_root.empty()) return OkStatus();
  auto cgroups = PrepareSandboxCgroups(o.sandbox_cgroup_root);
  if (!cgroups.ok()) return cgroups.status();
  spdlog::info("sandboxes start outside the agent's cgroup root={} cgroup={} hierarchies={}", o.sandbox_cgroup_root,
               kSandboxCgroupName, cgroups->size());
  runsc.JoinCgroups(std::move(*cgroups));
  return OkStatus();
}

}  // namespace

Status RunNodeAgent(const NodeAgentOptions& o, const std::atomic<bool>* stop) {
  if (o.node.empty()) return Status(Code::kInvalidArgument, "--node-name is required");
  if (o.workers.empty()) return Status(Code::kInvalidArgument, "--workers or --gpus must give at least one worker");
  // Before anything connects: a mistyped level or an unreadable key fails at once.
  auto codec = ChunkCodecFor(o);
  if (!codec.ok()) return codec.status();
  auto manager = Manager::New(ManagerOptionsFor(o));
  if (!manager.ok()) return manager.status();
  Manager& m = **manager;
  SnapshotMetrics snapshot_metrics(*m.metrics().registry());

  std::string store_root;
  if (Status s = MakeDirectories(o, &store_root); !s.ok()) return s;
  auto bundle_roots = BundleRootsFor(o, store_root);
  if (!bundle_roots.ok()) return bundle_roots.status();
  auto backend = CommittedBackendFor(o, store_root, std::move(*codec), &snapshot_metrics);
  if (!backend.ok()) return backend.status();
  SnapshotStore snapshots(o.root + "/snapshots", std::move(*backend));
  snapshots.set_digest_threads(o.snapshot_digest_threads);
  if (Status s = snapshots.CheckStoreWritable(); !s.ok()) {
    // Not fatal: pauses still work; suspends report CommitFailed until the store is back.
    spdlog::warn("snapshot store not writable store={} error=\"{}\"", store_root, s.message());
  }
  RunscDriver runsc_driver(o.runsc, o.runsc_flags);
  if (Status s = StartSandboxesOutsideTheAgent(o, runsc_driver); !s.ok()) return s;
  RuntimeDriver& driver = o.driver ? *o.driver : runsc_driver;
  QemuMicrovmDriver microvm(QemuMicrovmOptions{.qemu = o.qemu, .accel = o.microvm_accel});
  if (Status s = CheckRuntimes(o, driver, microvm, store_root); !s.ok()) return s;

  // The node's Workers exist and its heartbeat is renewed before its actors are watched.
  NodeWorkers workers(m.client(), o.node, o.workers, &snapshot_metrics, o.gpu_identities);
  if (Status s = workers.Register(); !s.ok()) return s;
  NodeHeartbeat heartbeat(m.client(),
                          NodeHeartbeatOptions{o.node, o.lease_namespace,
                                               std::chrono::seconds(o.heartbeat_period_seconds),
                                               std::chrono::seconds(o.heartbeat_lease_seconds)});
  m.AddRunnable("heartbeat", [&] {
    if (Status s = heartbeat.Start(); !s.ok()) {
      spdlog::warn("heartbeat lease unavailable node={} namespace={} error=\"{}\" action=retry_every_period", o.node,
                   o.lease_namespace, s.ToString());
    }
    return OkStatus();  // not fatal: the agent runs its actors, and the renewals go on
  }, [&] { heartbeat.Stop(); });

  NodeImages images(o, *m.metrics().registry());
  if (Status s = images.store.Open(); !s.ok()) return s;

  Informer *pinned, *bound;
  ActorLookup lookup = AddActorInformers(m, o.node, &pinned, &bound);
  ActorReconcilerOptions ro = ReconcilerOptionsFor(o);
  ro.bundle_roots = *bundle_roots;
  ro.image_store = &images.store;
  ro.images_in_use = ImagesInUse({pinned, bound});
  ActorReconciler reconciler(std::move(ro), m.client(), lookup,
                             RuntimeDrivers{&driver, &microvm}, snapshots, workers,
                             snapshot_metrics, &m.events());
  Controller& controller = m.AddController("actor", reconciler, o.concurrency);
  pinned->AddEventHandler(controller.EnqueueHandler());
  bound->AddEventHandler(controller.EnqueueHandler());
  WatchNodeDrain(m, o.node, reconciler, controller, {pinned, bound});

  m.OnCachesSynced([&] {
    if (Status s = reconciler.RecoverAtStartup(); !s.ok()) {
      spdlog::warn("startup recovery incomplete node={} error=\"{}\"", o.node, s.ToString());
    }
    images.store.Collect(ImagesInUse({pinned, bound})());
  });
  m.OnControllersStarted([&] { spdlog::info("node agent ready node={}", o.node); });
  // The workers gauge follows this agent's own claims and frees as it writes them; a LIST now
  // and then picks up what others changed (the cluster controller freeing a worker).
  m.Every(std::chrono::seconds(60), [&] { workers.RefreshGauge(); });
  m.OnStopping([&] {
    spdlog::info("node agent stopping node={} grace_s={}", o.node, o.shutdown_grace_seconds);
  });
  Status result = m.Run(stop);
  spdlog::info("node agent stopped node={} drained={}", o.node, m.drained());
  return result;
}

}  // namespace stasis
