// The controller's garbage collection of an object store (object_store_gc.h), run by the
// leader every period on a thread of its own: a pass lists the whole store and may read many
// manifests, and must not hold up the manager's loop (gauges, the leader's other ticks).
// A pass that is still running when the next period comes is not doubled.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "controller/kube_client.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "snapshots/object_store_gc.h"

namespace stasis {

// Every actor that exists, from a quorum list (never the informer's cache: a cache not yet
// synced, or lagging, would make live actors look gone).
Result<LiveActors> ListLiveActors(KubeClient& client);

// How often garbage collection runs for a grace period: a quarter of it, between 10 s and 10 min.
std::chrono::milliseconds StoreGcPeriod(std::chrono::seconds grace);

class StoreGcLoop {
 public:
  StoreGcLoop(ObjectStoreGc& gc, KubeClient& client, ClusterMetrics& metrics, Clock& clock = RealClock::Get());
  ~StoreGcLoop();  // waits for a pass under way
  StoreGcLoop(const StoreGcLoop&) = delete;
  StoreGcLoop& operator=(const StoreGcLoop&) = delete;

  // Starts a pass unless one is under way.
  void Kick();

 private:
  void Pass();

  ObjectStoreGc& gc_;
  KubeClient& client_;
  ClusterMetrics& metrics_;
  Clock& clock_;
  std::mutex mu_;  // worker_
  std::thread worker_;
  std::atomic<bool> running_{false};
};

}  // namespace stasis
