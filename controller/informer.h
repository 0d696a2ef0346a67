// An informer for one resource type: list, then watch from the list's resourceVersion with
// bookmarks, keeping an ObjectStore current and calling handlers on every change — the
// client-go reflector + shared informer model.
//
// Invariants:
//  - Never watches from an empty resourceVersion.
//  - A watch that ends normally (server timeout, randomised 5–10 min) resumes from the last
//    resourceVersion seen (events or bookmarks) without relisting.
//  - 410 Gone relists; objects that vanished meanwhile get delete notifications, changed ones
//    update notifications.
//  - Failures reconnect with backoff 0.8 s doubling to 30 s, each delay stretched by up to
//    itself (the reflector's jitter 1.0), reset after 2 quiet minutes: agents that lost the
//    API server together do not come back in lockstep.
//  - Handlers run on the informer's thread and must only enqueue (watch I/O never waits on
//    work: STYLE.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "controller/backoff.h"
#include "controller/kube_client.h"
#include "controller/object_store.h"

namespace stasis {

struct EventHandler {
  std::function<void(const ObjectPtr& obj)> on_add;
  std::function<void(const ObjectPtr& old_obj, const ObjectPtr& new_obj)> on_update;
  std::function<void(const ObjectPtr& obj)> on_delete;
};

struct InformerOptions {
  ResourceType type;
  std::string ns;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  // Watch timeouts are drawn from [min, max] so a fleet of clients does not reconnect at once.
  int min_watch_timeout_seconds = 300;
  int max_watch_timeout_seconds = 600;
  BackoffPolicy backoff{std::chrono::milliseconds(800), std::chrono::seconds(30), 2.0, 1.0};
  std::chrono::milliseconds backoff_reset_after{120000};
  // Every period, on_update(obj, obj) for every cached object; 0 = never.
  std::chrono::milliseconds resync_period{0};
  uint64_t seed = std::random_device{}();
};

class Informer {
 public:
  Informer(KubeClient& client, InformerOptions options, Clock& clock = RealClock::Get());

  // Before Run.
  void AddEventHandler(EventHandler handler);
  void AddIndex(const std::string& name, IndexFunc func) { store_.AddIndex(name, std::move(func)); }

  // Blocks until *stop is true, keeping the cache current.
  void Run(const std::atomic<bool>* stop);
  // True once the first list has been delivered to the cache and the handlers.
  bool HasSynced() const { return synced_.load(); }
  // Waits until synced or *stop; returns HasSynced().
  bool WaitForSync(const std::atomic<bool>* stop, std::chrono::milliseconds timeout);

  const ObjectStore& store() const { return store_; }
  // The resourceVersion the next watch would start from.
  std::string last_resource_version() const;
  // How many times the informer listed (the first sync included): for tests of 410 handling.
  int list_count() const { return list_count_.load(); }

 private:
  Status ListAndReplace();
  // Returns kGone when a relist is needed, OK when the watch ended normally.
  Status WatchOnce(const std::atomic<bool>* stop);
  void Apply(const std::string& type, const nlohmann::json& object);
  ObjectPtr ForCache(nlohmann::json object) const;
  void Sleep(std::chrono::milliseconds d, const std::atomic<bool>* stop);
  void MaybeResync();

  KubeClient& client_;
  InformerOptions options_;
  Clock& clock_;
  ObjectStore store_;
  std::vector<EventHandler> handlers_;
  std::atomic<bool> synced_{false};
  std::atomic<int> list_count_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string resource_version_;
  std::mt19937_64 rng_;
  Clock::TimePoint next_resync_{};
  int events_seen_ = 0;  // informer thread only
};

}  // namespace stasis
