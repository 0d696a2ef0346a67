// The node agent's heartbeat: a coordination.k8s.io/v1 Lease "stasis-node-<node>" renewed
// every `period`. The cluster controller reads renewTime + leaseDurationSeconds to tell a
// live node agent from a dead one (node_lost).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "controller/kube_client.h"
#include "reconcilers/api_resources.h"

namespace stasis {

struct NodeHeartbeatOptions {
  std::string node;
  std::string lease_namespace = "stasis-system";
  std::chrono::seconds period{10};
  std::chrono::seconds lease_duration{40};  // kubelet's node lease default
};

class NodeHeartbeat {
 public:
  NodeHeartbeat(KubeClient& client, NodeHeartbeatOptions options, Clock& clock = RealClock::Get());
  ~NodeHeartbeat();
  // Renews once now (so the node is alive before it serves), then every period on its own
  // thread, also when the first renewal failed; returns the first renewal's result.
  Status Start();
  void Stop();
  Status RenewOnce();

 private:
  KubeClient& client_;
  NodeHeartbeatOptions options_;
  Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace stasis
