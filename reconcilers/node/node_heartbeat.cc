#include "reconcilers/node/node_heartbeat.h"

#include <spdlog/spdlog.h>

#include "base/time.h"
#include "reconcilers/api_resources.h"

namespace stasis {

NodeHeartbeat::NodeHeartbeat(KubeClient& client, NodeHeartbeatOptions options, Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock) {}

NodeHeartbeat::~NodeHeartbeat() { Stop(); }

Status NodeHeartbeat::RenewOnce() {
  const std::string name = NodeLeaseName(options_.node);
  const std::string now = FormatMicroTime(clock_.WallNow());
  json spec = {{"holderIdentity", options_.node},
               {"leaseDurationSeconds", options_.lease_duration.count()},
               {"renewTime", now}};
  auto patched = client_.Patch(kLeaseType, options_.lease_namespace, name, PatchType::kMerge,
                               {{"spec", spec}});
  if (patched.ok()) return OkStatus();
  if (patched.status().code() != Code::kNotFound) return patched.status();
  spec["acquireTime"] = now;
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", name}, {"labels", {{"stasis.dev/node", options_.node}}}}},
                {"spec", spec}};
  auto created = client_.Create(kLeaseType, options_.lease_namespace, lease);
  return created.ok() ? OkStatus() : created.status();
}

Status NodeHeartbeat::Start() {
  // The renewals go on whatever the first answered: a node whose first renewal failed (the
  // API server restarting, the namespace not there yet) must not be declared lost for good.
  Status first = RenewOnce();
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      clock_.WaitUntil(cv_, lock, clock_.Now() + options_.period, [&] { return stop_; });
      if (stop_) break;
      lock.unlock();
      if (Status s = RenewOnce(); !s.ok()) {
        spdlog::warn("heartbeat renew failed node={} error=\"{}\"", options_.node, s.ToString());
      }
      lock.lock();
    }
  });
  return first;
}

void NodeHeartbeat::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace stasis
