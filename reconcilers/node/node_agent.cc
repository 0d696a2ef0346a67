#include "reconcilers/node/node_agent.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <thread>

#include "api/names.h"
#include "controller/controller.h"
#include "controller/event_recorder.h"
#include "controller/http_endpoints.h"
#include "controller/informer.h"
#include "controller/metrics.h"
#include "controller/rest_config.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/node_heartbeat.h"
#include "reconcilers/node/node_workers.h"
#include "runtimes/qemu_microvm_driver.h"
#include "runtimes/runsc_driver.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

Status RunNodeAgent(const NodeAgentOptions& o, const std::atomic<bool>* stop) {
  if (o.node.empty()) return Status(Code::kInvalidArgument, "--node-name is required");
  if (o.workers.empty()) return Status(Code::kInvalidArgument, "--workers or --gpus must give at least one worker");
  auto config = LoadRestConfig(o.kubeconfig);
  if (!config.ok()) return config.status();
  config->user_agent = "stasis-node/" + o.node;

  Metrics& metrics = Metrics::Global();
  auto transport = NewCpprestTransport(*config);
  const std::string host = transport->Host();
  KubeClient client(std::move(transport), metrics.RestClientObserver(host));
  SnapshotMetrics snapshot_metrics(*metrics.registry());

  std::error_code ec;
  for (const char* d : {"run", "logs", "snapshots"}) {
    std::filesystem::create_directories(o.root + "/" + d, ec);
    if (ec) return Status(Code::kFailedPrecondition, "cannot create " + o.root + "/" + d + ": " + ec.message());
  }
  const std::string store_root = o.snapshot_store.empty() ? o.root + "/store" : o.snapshot_store;
  std::filesystem::create_directories(store_root, ec);
  SnapshotStore snapshots(o.root + "/snapshots", store_root);
  if (Status s = snapshots.CheckStoreWritable(); !s.ok()) {
    // Not fatal: pauses still work; suspends report CommitFailed until the store is back.
    spdlog::warn("snapshot store not writable store={} error=\"{}\"", store_root, s.message());
  }
  RunscDriver runsc_driver(o.runsc, o.runsc_flags);
  RuntimeDriver& driver = o.driver ? *o.driver : runsc_driver;
  if (auto v = driver.Version(); !v.ok()) {
    return Status(Code::kFailedPrecondition, "runsc at " + o.runsc + " does not run: " + v.status().message());
  } else {
    spdlog::info("node agent starting node={} runsc={} runsc_version={} workers={} root={} store={}",
                 o.node, o.runsc, *v, o.workers.size(), o.root, store_root);
  }

  QemuMicrovmOptions mo;
  mo.qemu = o.qemu;
  mo.accel = o.microvm_accel;
  QemuMicrovmDriver microvm(mo);
  // Not fatal: gVisor actors do not need QEMU; a micro-VM actor's start fails with the reason.
  if (auto v = microvm.Version(); !v.ok()) {
    spdlog::warn("micro-VM runtime unavailable qemu={} error=\"{}\"", o.qemu, v.status().message());
  } else {
    spdlog::info("micro-VM runtime qemu={} qemu_version={} accel={}", o.qemu, *v, o.microvm_accel);
  }

  NodeWorkers workers(client, o.node, o.workers, &snapshot_metrics);
  if (Status s = workers.Register(); !s.ok()) return s;
  NodeHeartbeat heartbeat(client, NodeHeartbeatOptions{o.node, o.lease_namespace,
                                                       std::chrono::seconds(o.heartbeat_period_seconds),
                                                       std::chrono::seconds(o.heartbeat_lease_seconds)});
  if (Status s = heartbeat.Start(); !s.ok()) {
    spdlog::warn("heartbeat lease unavailable node={} namespace={} error=\"{}\"", o.node,
                 o.lease_namespace, s.ToString());
  }

  KubeEventRecorderOptions eo;
  eo.component = "stasis-node";
  eo.host = o.node;
  KubeEventRecorder events(client, eo);

  // This node's actors: pinned here (spec.nodeName) or bound here (status.nodeName) and not
  // pinned here. The two caches are disjoint: an actor pinned and bound here (every pinned
  // actor once it runs) would otherwise come down both watches, every write of it sent,
  // parsed and cached twice.
  InformerOptions pinned_opts;
  pinned_opts.type = kActorType;
  pinned_opts.field_selector = api::PinnedActorsSelector(o.node);
  InformerOptions bound_opts = pinned_opts;
  bound_opts.field_selector = api::BoundUnpinnedActorsSelector(o.node);
  Informer pinned(client, pinned_opts);
  Informer bound(client, bound_opts);
  ActorLookup lookup = [&](const std::string& key) {
    if (auto obj = pinned.store().Get(key)) return obj;
    return bound.store().Get(key);
  };

  ActorReconcilerOptions ro;
  ro.node = o.node;
  ro.root = o.root;
  ro.cdi_spec_dirs = o.cdi_spec_dirs;
  ro.gpu_cdi_kind = o.gpu_cdi_kind;
  ro.pause_durability = o.pause_durability;
  ActorReconciler reconciler(ro, client, lookup, RuntimeDrivers{&driver, &microvm}, snapshots, workers, snapshot_metrics, &events);
  Controller controller("actor", reconciler, o.concurrency, &metrics);
  pinned.AddEventHandler(controller.EnqueueHandler());
  bound.AddEventHandler(controller.EnqueueHandler());

  HttpEndpointsOptions ho;
  ho.address = o.metrics_addr;
  ho.registry = metrics.registry();
  ho.readiness = [&]() -> Status {
    if (!pinned.HasSynced() || !bound.HasSynced()) return Status(Code::kUnavailable, "actor caches not synced");
    return OkStatus();
  };
  auto endpoints = HttpEndpoints::Start(ho);
  if (!endpoints.ok()) return endpoints.status();
  spdlog::info("serving metrics and health addr={} port={}", o.metrics_addr, (*endpoints)->port());

  std::atomic<bool> informers_stop{false};
  std::thread t1([&] { pinned.Run(&informers_stop); });
  std::thread t2([&] { bound.Run(&informers_stop); });
  auto shutdown = [&] {
    informers_stop = true;
    t1.join();
    t2.join();
  };
  while (!stop->load() && !(pinned.HasSynced() && bound.HasSynced())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (stop->load()) {
    shutdown();
    return OkStatus();
  }
  if (Status s = reconciler.RecoverAtStartup(); !s.ok()) {
    spdlog::warn("startup recovery incomplete node={} error=\"{}\"", o.node, s.ToString());
  }
  controller.Start();
  spdlog::info("node agent ready node={}", o.node);
  // The workers gauge follows this agent's own claims and frees as it writes them; a LIST now
  // and then picks up what others changed (the cluster controller freeing a worker).
  constexpr auto kWorkersGaugeRefresh = std::chrono::seconds(60);
  auto next_refresh = std::chrono::steady_clock::now() + kWorkersGaugeRefresh;
  while (!stop->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (std::chrono::steady_clock::now() >= next_refresh) {
      workers.RefreshGauge();
      next_refresh = std::chrono::steady_clock::now() + kWorkersGaugeRefresh;
    }
  }

  spdlog::info("node agent stopping node={} grace_s={}", o.node, o.shutdown_grace_seconds);
  informers_stop = true;
  const bool drained = controller.Stop(std::chrono::seconds(o.shutdown_grace_seconds));
  shutdown();
  heartbeat.Stop();
  events.Shutdown(std::chrono::seconds(2));
  (*endpoints)->Stop();
  spdlog::info("node agent stopped node={} drained={}", o.node, drained);
  return OkStatus();
}

}  // namespace stasis
