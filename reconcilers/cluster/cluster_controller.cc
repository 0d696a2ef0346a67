#include "reconcilers/cluster/cluster_controller.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "api/node_drain.h"
#include "controller/manager.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "reconcilers/cluster/cluster_reconciler.h"
#include "reconcilers/cluster/store_gc.h"
#include "reconcilers/cluster/template_reconciler.h"
#include "snapshots/encryption_key.h"
#include "snapshots/object_store_backend.h"
#include "snapshots/snapshot_store.h"

namespace stasis {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long>(seconds * 1000));
}

Status Validate(const ClusterControllerOptions& o) {
  if (o.retain && o.snapshot_store.empty()) {
    return Status(Code::kInvalidArgument,
                  "--retain needs --snapshot-store: retention deletes from the snapshot store, so "
                  "the controller must reach it (the node agents' --snapshot-store: a directory mounted here, or s3://)");
  }
  if (o.gc_grace && !IsS3Url(o.snapshot_store)) {
    return Status(Code::kInvalidArgument, "--snapshot-gc-grace needs an object store: --snapshot-store s3://bucket/prefix");
  }
  if (o.retain && *o.retain < 1) {
    return Status(Code::kInvalidArgument, "--retain must be at least 1 (latestSnapshot is always kept)");
  }
  if (!o.snapshot_store_encryption_key.empty() && !IsS3Url(o.snapshot_store)) {
    return Status(Code::kInvalidArgument,
                  "--snapshot-store-encryption-key applies only to an s3:// --snapshot-store (a directory store is not encrypted)");
  }
  if (IsS3Url(o.snapshot_store)) return OkStatus();  // its location, endpoint and key are checked by OpenStore
  std::error_code ec;
  if (!o.snapshot_store.empty() && !std::filesystem::is_directory(o.snapshot_store, ec)) {
    return Status(Code::kInvalidArgument, "--snapshot-store " + o.snapshot_store + " is not a directory" +
                                              (ec ? ": " + ec.message() : ""));
  }
  return OkStatus();
}

ManagerOptions ManagerOptionsFor(const ClusterControllerOptions& o) {
  ManagerOptions mo;
  mo.name = "controller";
  mo.kubeconfig = o.kubeconfig;
  mo.user_agent = "stasis-controller";
  mo.metrics_addr = o.metrics_addr;
  mo.probe_addr = o.probe_addr;
  mo.secure_metrics = o.secure_metrics;
  mo.kube_api_qps = o.kube_api_qps;
  mo.kube_api_burst = o.kube_api_burst;
  mo.events.component = "stasis-controller";
  mo.shutdown_grace = std::chrono::seconds(10);
  if (o.leader_elect) {
    LeaderElectionConfig lc;
    lc.lease_namespace = o.namespace_;
    lc.lease_name = "stasis-controller";
    lc.identity = o.identity;
    lc.lease_duration = Ms(o.lease_duration_s);
    lc.renew_deadline = Ms(o.renew_deadline_s);
    lc.retry_period = Ms(o.retry_period_s);
    mo.leader_election = std::move(lc);
  }
  return mo;
}

InformerOptions InformerFor(ResourceType type, std::string ns = "") {
  InformerOptions io;
  io.type = std::move(type);
  io.ns = std::move(ns);
  return io;
}

// The controller's view of the store: a directory, or an object store (no download cache:
// the controller only lists and removes); and, for an object store, its client and location.
struct ControllerStore {
  std::optional<SnapshotStore> snapshots;
  std::unique_ptr<S3Client> gc_client;  // garbage collection's own client (nullptr: none)
  S3Location location;
  std::shared_ptr<const EncryptionKey> key;  // opens sealed manifests (nullptr: none)
};

Status OpenStore(const ClusterControllerOptions& o, ControllerStore& out) {
  if (o.snapshot_store.empty()) return OkStatus();
  if (!IsS3Url(o.snapshot_store)) {
    out.snapshots.emplace("", o.snapshot_store);  // no node-local root here
    return OkStatus();
  }
  auto location = ParseS3Location(o.snapshot_store);
  if (!location.ok()) return location.status();
  auto endpoint = S3EndpointFor(o.snapshot_store_credentials);
  if (!endpoint.ok()) return endpoint.status();
  if (!o.snapshot_store_encryption_key.empty()) {
    auto key = LoadEncryptionKeyFile(o.snapshot_store_encryption_key);
    if (!key.ok()) return key.status();
    out.key = std::make_shared<const EncryptionKey>(std::move(*key));
    spdlog::info("snapshot store key key_id={}", out.key->id());
  }
  out.location = *location;
  out.gc_client = std::make_unique<S3Client>(*endpoint, location->bucket);
  // The controller writes no chunk: its codec only opens manifests.
  out.snapshots.emplace("", std::make_unique<ObjectStoreBackend>(std::make_unique<S3Client>(*endpoint, location->bucket),
                                                                 *location, /*cache_root=*/"", 0,
                                                                 ChunkCodec(CompressionSetting{}, out.key)));
  return OkStatus();
}

// ActorTemplates: golden snapshots, and actors filled in from their template
// (template_reconciler.h). An actor's event concerns the template it is golden for or made from.
std::unique_ptr<TemplateReconciler> AddTemplateController(Manager& m, Informer& actors, Informer& workers,
                                                          const SnapshotStore* store, ClusterMetrics& metrics) {
  Informer& templates = m.AddInformer(InformerFor(kActorTemplateType));
  actors.AddIndex(kActorsByNamespaceIndex, IndexByNamespace());
  auto reconciler = std::make_unique<TemplateReconciler>(TemplateReconcilerOptions{}, m.client(), templates.store(),
                                                         actors.store(), workers.store(), &m.events(), store, &metrics);
  Controller& c = m.AddController("templates", *reconciler, 2);
  templates.AddEventHandler(c.EnqueueHandler());
  auto enqueue = [&c](const ObjectPtr& o) {
    for (const auto& key : TemplateKeysOf(*o)) c.queue().Add(key);
  };
  actors.AddEventHandler({enqueue, [enqueue](const ObjectPtr&, const ObjectPtr& n) { enqueue(n); }, enqueue});
  m.OnControllersStarted([&templates, &c] {
    for (const auto& key : templates.store().Keys()) c.queue().Add(key);
  });
  return reconciler;
}

}  // namespace

Status RunClusterController(const ClusterControllerOptions& o, const std::atomic<bool>* stop) {
  if (Status s = Validate(o); !s.ok()) return s;
  ControllerStore store;
  if (Status s = OpenStore(o, store); !s.ok()) return s;
  auto manager = Manager::New(ManagerOptionsFor(o));
  if (!manager.ok()) return manager.status();
  Manager& m = **manager;
  ClusterMetrics cluster_metrics(*m.metrics().registry());

  Informer& actors = m.AddInformer(InformerFor(kActorType));
  Informer& workers = m.AddInformer(InformerFor(kWorkerType));
  Informer& leases = m.AddInformer(InformerFor(kLeaseType, o.namespace_));
  ClusterReconcilerOptions ro;
  ro.grace = std::chrono::seconds(o.grace_seconds);
  ro.lease_namespace = o.namespace_;
  ro.retain = o.retain;
  ro.retain_min_age = o.retain_min_age;
  ClusterReconciler reconciler(ro, m.client(), actors.store(), workers.store(), leases.store(), cluster_metrics,
                               &m.events(), RealClock::Get(), store.snapshots ? &*store.snapshots : nullptr);
  Controller& controller = m.AddController("cluster", reconciler, o.concurrency);
  auto templates =
      AddTemplateController(m, actors, workers, store.snapshots ? &*store.snapshots : nullptr, cluster_metrics);
  actors.AddEventHandler(controller.EnqueueHandler());
  for (auto& [name, index] : ClusterActorIndexes()) actors.AddIndex(name, std::move(index));
  // A worker freed or a node (dis)appearing can unblock an actor waiting to bind: requeue
  // those (the index), not the whole fleet — 1,000 workers listed at startup would otherwise
  // add every actor key 1,000 times. Before the start nothing is queued: the start adds every key.
  auto requeue_waiting = [&](const ObjectPtr&) {
    if (!m.started()) return;
    for (const auto& obj : actors.store().ByIndex(kBindCandidateIndex, kBindCandidate)) {
      controller.queue().Add(ObjectKey(*obj));
    }
  };
  auto requeue_if_unblocks = [&](const ObjectPtr& before, const ObjectPtr& after) {
    if (WorkerChangeMayUnblock(before.get(), after.get())) requeue_waiting(after);
  };
  workers.AddEventHandler({[=](const ObjectPtr& w) { requeue_if_unblocks(nullptr, w); }, requeue_if_unblocks,
                           [=](const ObjectPtr& w) { requeue_if_unblocks(w, nullptr); }});

  // Cordons and drains: only a change of what a Node means to stasis requeues the waiting
  // actors (a kubelet updates its Node often; the rest of it is not read here).
  Informer& nodes = m.AddInformer(InformerFor(kNodeType));
  reconciler.UseNodes(nodes.store());
  auto requeue_if_drain = [&](const ObjectPtr& before, const ObjectPtr& after) {
    const api::NodeDrain was = before ? api::NodeDrainOf(*before) : api::NodeDrain{};
    const api::NodeDrain now = after ? api::NodeDrainOf(*after) : api::NodeDrain{};
    if (was != now) requeue_waiting(after ? after : before);
  };
  nodes.AddEventHandler({[=](const ObjectPtr& n) { requeue_if_drain(nullptr, n); }, requeue_if_drain,
                         [=](const ObjectPtr& n) { requeue_if_drain(n, nullptr); }});

  // Every renewal observed as it arrives, on this replica's monotonic clock (lease_expiry.h).
  leases.AddEventHandler({[&](const ObjectPtr& l) { reconciler.LeaseSeen(l); },
                          [&](const ObjectPtr&, const ObjectPtr& n) { reconciler.LeaseSeen(n); },
                          [&](const ObjectPtr& l) { reconciler.LeaseGone(l); }});
  m.OnCachesSynced([&] { reconciler.StartedLeading(); });
  m.OnControllersStarted([&] {
    for (const auto& key : actors.store().Keys()) controller.queue().Add(key);
    spdlog::info("controller leading identity={}", o.leader_elect ? m.identity() : "-");
  });
  m.Every(std::chrono::seconds(5), [&] { reconciler.UpdateGauges(); }, /*first_at_start=*/true);
  std::optional<ObjectStoreGc> gc;
  std::optional<StoreGcLoop> gc_loop;  // declared after gc: its pass ends before gc goes
  if (o.gc_grace && store.gc_client) {
    gc.emplace(*store.gc_client, store.location, *o.gc_grace, store.key.get());
    gc_loop.emplace(*gc, m.client(), cluster_metrics);
    m.Every(StoreGcPeriod(*o.gc_grace), [&] { gc_loop->Kick(); }, /*first_at_start=*/true);
  }
  spdlog::info("controller started leader_elect={} namespace={} grace_s={} snapshot_store={} retain={} "
               "retain_min_age_s={} gc_grace_s={}",
               o.leader_elect, o.namespace_, o.grace_seconds, o.snapshot_store,
               o.retain ? std::to_string(*o.retain) : "all", o.retain_min_age.count(),
               o.gc_grace ? std::to_string(o.gc_grace->count()) : "off");
  Status result = m.Run(stop);
  spdlog::info("controller stopped");
  return result;
}

}  // namespace stasis
