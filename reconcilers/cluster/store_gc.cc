#include "reconcilers/cluster/store_gc.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "reconcilers/api_resources.h"

namespace stasis {

Result<LiveActors> ListLiveActors(KubeClient& client) {
  auto list = client.List(kActorType, "");
  if (!list.ok()) return list.status();
  LiveActors live;
  for (const auto& item : list->value("items", json::array())) {
    const json meta = item.value("metadata", json::object());
    live[{meta.value("namespace", ""), meta.value("name", "")}] = meta.value("uid", "");
  }
  return live;
}

std::chrono::milliseconds StoreGcPeriod(std::chrono::seconds grace) {
  return std::clamp<std::chrono::milliseconds>(grace / 4, std::chrono::seconds(10), std::chrono::minutes(10));
}

StoreGcLoop::StoreGcLoop(ObjectStoreGc& gc, KubeClient& client, ClusterMetrics& metrics, Clock& clock)
    : gc_(gc), client_(client), metrics_(metrics), clock_(clock) {}

StoreGcLoop::~StoreGcLoop() {
  std::lock_guard lock(mu_);
  if (worker_.joinable()) worker_.join();
}

void StoreGcLoop::Kick() {
  if (running_.exchange(true)) return;
  std::lock_guard lock(mu_);
  if (worker_.joinable()) worker_.join();  // the last pass has ended (running_ was false)
  worker_ = std::thread([this] {
    Pass();
    running_ = false;
  });
}

void StoreGcLoop::Pass() {
  const auto start = clock_.Now();
  auto report = gc_.RunOnce([this] { return ListLiveActors(client_); },
                            std::chrono::floor<std::chrono::seconds>(clock_.WallNow()));
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - start).count();
  if (!report.ok()) {
    spdlog::warn("component=gc op=pass result=error duration_ms={} error=\"{}\"", ms, report.status().message());
    return;
  }
  int deleted = 0;
  for (const auto& [reason, n] : report->deleted) {
    metrics_.CountSnapshotDeletions(reason, n);
    deleted += n;
  }
  spdlog::info("component=gc op=pass result={} snapshots={} deleted={} kept={} failed={} duration_ms={}",
               report->failed ? "partial" : "ok", report->snapshots_seen, deleted, report->kept, report->failed, ms);
}

}  // namespace stasis
