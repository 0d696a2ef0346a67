#include "reconcilers/cluster/cluster_controller.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <thread>

#include "controller/controller.h"
#include "controller/event_recorder.h"
#include "controller/http_endpoints.h"
#include "controller/informer.h"
#include "controller/leader_election.h"
#include "controller/metrics.h"
#include "controller/rest_config.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "reconcilers/cluster/cluster_reconciler.h"
#include "snapshots/snapshot_store.h"

namespace stasis {
namespace {
std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long>(seconds * 1000));
}
}  // namespace

Status RunClusterController(const ClusterControllerOptions& o, const std::atomic<bool>* stop) {
  if (o.retain && o.snapshot_store.empty()) {
    return Status(Code::kInvalidArgument,
                  "--retain needs --snapshot-store: retention deletes from the snapshot store, so "
                  "the controller must mount it (the directory the node agents' --snapshot-store names)");
  }
  if (o.retain && *o.retain < 1) {
    return Status(Code::kInvalidArgument, "--retain must be at least 1 (latestSnapshot is always kept)");
  }
  std::optional<SnapshotStore> store;
  if (!o.snapshot_store.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.snapshot_store, ec)) {
      return Status(Code::kInvalidArgument,
                    "--snapshot-store " + o.snapshot_store + " is not a directory" +
                        (ec ? ": " + ec.message() : ""));
    }
    store.emplace("", o.snapshot_store);  // no node-local root: the controller has none
  }
  auto config = LoadRestConfig(o.kubeconfig);
  if (!config.ok()) return config.status();
  config->user_agent = "stasis-controller";
  Metrics& metrics = Metrics::Global();
  auto transport = NewCpprestTransport(*config);
  const std::string host = transport->Host();
  KubeClient client(std::move(transport), metrics.RestClientObserver(host));
  ClusterMetrics cluster_metrics(*metrics.registry());
  KubeEventRecorderOptions eo;
  eo.component = "stasis-controller";
  KubeEventRecorder events(client, eo);

  InformerOptions ao;
  ao.type = kActorType;
  InformerOptions wo;
  wo.type = kWorkerType;
  InformerOptions lo;
  lo.type = kLeaseType;
  lo.ns = o.namespace_;
  Informer actors(client, ao), workers(client, wo), leases(client, lo);

  ClusterReconcilerOptions ro;
  ro.grace = std::chrono::seconds(o.grace_seconds);
  ro.lease_namespace = o.namespace_;
  ro.retain = o.retain;
  ClusterReconciler reconciler(ro, client, actors.store(), workers.store(), leases.store(),
                               cluster_metrics, &events, RealClock::Get(),
                               store ? &*store : nullptr);
  Controller controller("cluster", reconciler, o.concurrency, &metrics);
  actors.AddEventHandler(controller.EnqueueHandler());
  actors.AddIndex(kBindCandidateIndex, IndexBindCandidates());
  std::atomic<bool> started{false};
  // A worker freed or a node (dis)appearing can unblock an actor waiting to bind: requeue
  // those (the index), not the whole fleet — 1,000 workers listed at startup would otherwise
  // add every actor key 1,000 times. Before the start nothing is queued: the start adds every key.
  auto requeue_waiting = [&](const ObjectPtr&) {
    if (!started.load()) return;
    for (const auto& obj : actors.store().ByIndex(kBindCandidateIndex, kBindCandidate)) {
      controller.queue().Add(ObjectKey(*obj));
    }
  };
  workers.AddEventHandler({requeue_waiting,
                           [&](const ObjectPtr&, const ObjectPtr& n) { requeue_waiting(n); },
                           requeue_waiting});

  std::atomic<bool> informers_stop{false};
  std::thread ta([&] { actors.Run(&informers_stop); });
  std::thread tw([&] { workers.Run(&informers_stop); });
  std::thread tl([&] { leases.Run(&informers_stop); });
  auto synced = [&] { return actors.HasSynced() && workers.HasSynced() && leases.HasSynced(); };

  HttpEndpointsOptions ho;
  ho.address = o.metrics_addr;
  ho.registry = metrics.registry();
  ho.readiness = [&]() -> Status {
    return synced() ? OkStatus() : Status(Code::kUnavailable, "caches not synced");
  };
  auto endpoints = HttpEndpoints::Start(ho);
  if (!endpoints.ok()) {
    informers_stop = true;
    ta.join(), tw.join(), tl.join();
    return endpoints.status();
  }

  std::atomic<bool> leading{!o.leader_elect};
  std::atomic<bool> lost{false};
  std::unique_ptr<LeaderElector> elector;
  if (o.leader_elect) {
    LeaderElectionConfig lc;
    lc.lease_namespace = o.namespace_;
    lc.lease_name = "stasis-controller";
    lc.identity = o.identity;
    lc.lease_duration = Ms(o.lease_duration_s);
    lc.renew_deadline = Ms(o.renew_deadline_s);
    lc.retry_period = Ms(o.retry_period_s);
    lc.metrics = &metrics;
    lc.observe = metrics.RestClientObserver(host);
    lc.on_started_leading = [&] { leading = true; };
    lc.on_stopped_leading = [&] { lost = true; };
    auto e = LeaderElector::New(client, lc);
    if (!e.ok()) {
      informers_stop = true;
      ta.join(), tw.join(), tl.join();
      return e.status();
    }
    elector = std::move(*e);
    elector->Start();
  }
  spdlog::info("controller started leader_elect={} namespace={} grace_s={} snapshot_store={} retain={}",
               o.leader_elect, o.namespace_, o.grace_seconds, o.snapshot_store,
               o.retain ? std::to_string(*o.retain) : "all");

  auto last_gauges = std::chrono::steady_clock::now() - std::chrono::hours(1);
  while (!stop->load() && !lost.load()) {
    if (leading.load() && !started.load() && synced()) {
      reconciler.StartedLeading();
      controller.Start();
      started = true;  // before the adds: a worker event from now on requeues its waiters itself
      for (const auto& key : actors.store().Keys()) controller.queue().Add(key);
      spdlog::info("controller leading identity={}", elector ? elector->identity() : "-");
    }
    if (started.load() && std::chrono::steady_clock::now() - last_gauges > std::chrono::seconds(5)) {
      reconciler.UpdateGauges();
      last_gauges = std::chrono::steady_clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (lost.load()) spdlog::error("controller lost its leader lease; exiting so a standby takes over");
  informers_stop = true;
  controller.Stop(std::chrono::seconds(10));
  if (elector) elector->Stop();  // releases the lease after the guarded work has stopped
  ta.join(), tw.join(), tl.join();
  events.Shutdown(std::chrono::seconds(2));
  (*endpoints)->Stop();
  spdlog::info("controller stopped");
  return lost.load() ? Status(Code::kAborted, "leader lease lost") : OkStatus();
}

}  // namespace stasis
