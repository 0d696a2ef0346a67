#include "controller/informer.h"

#include <spdlog/spdlog.h>

namespace stasis {

using nlohmann::json;

Informer::Informer(KubeClient& client, InformerOptions options, Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock), rng_(options_.seed) {}

void Informer::AddEventHandler(EventHandler handler) { handlers_.push_back(std::move(handler)); }

std::string Informer::last_resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

namespace {

// metadata.managedFields is the API server's field-ownership bookkeeping (server-side apply):
// nothing here reads it, and it is ~40 % of an Actor's JSON. Dropped before caching, as
// controller-runtime's TransformStripManagedFields does; writes never send cached copies of it
// (a PUT without managedFields keeps the server's).
void StripForCache(json& object) {
  if (auto meta = object.find("metadata"); meta != object.end() && meta->is_object()) {
    meta->erase("managedFields");
  }
}

}  // namespace

ObjectPtr Informer::ForCache(json object) const {
  StripForCache(object);
  return std::make_shared<const json>(std::move(object));
}

Status Informer::ListAndReplace() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  lo.drop_managed_fields = true;  // never cached (StripForCache)
  // Page by page: each page's objects go into `fresh` as it arrives, so the
  // peak is the cache plus one page, not the cache plus the whole list as one document (two
  // whole lists at once in the node agent, whose two informers list together).
  std::string rv;
  std::vector<ObjectPtr> fresh;
  while (true) {
    auto page = client_.ListPage(options_.type, options_.ns, lo);
    if (!page.ok()) return page.status();
    // A continued list is the first page's snapshot (the API server's guarantee).
    if (rv.empty()) rv = (*page)["metadata"].value("resourceVersion", "");
    if (rv.empty()) return Status(Code::kInternal, "list returned no resourceVersion");
    if (auto items = page->find("items"); items != page->end() && items->is_array()) {
      for (auto& item : *items) fresh.push_back(ForCache(std::move(item)));
    }
    const std::string next = page->value("/metadata/continue"_json_pointer, "");
    if (next.empty()) break;
    lo.continue_token = next;
  }
  // Compute add/update notifications against the old cache before replacing it.
  std::vector<std::pair<ObjectPtr, ObjectPtr>> changes;  // (old, new); old null = add
  for (const auto& obj : fresh) {
    ObjectPtr old = store_.Get(ObjectKey(*obj));
    if (!old || old->at("metadata").value("resourceVersion", "") !=
                    obj->at("metadata").value("resourceVersion", "")) {
      changes.emplace_back(old, obj);
    }
  }
  auto vanished = store_.Replace(fresh);
  {
    std::lock_guard<std::mutex> lock(mu_);
    resource_version_ = rv;
  }
  for (const auto& [old, obj] : changes) {
    for (auto& h : handlers_) {
      if (!old && h.on_add) h.on_add(obj);
      if (old && h.on_update) h.on_update(old, obj);
    }
  }
  for (const auto& obj : vanished) {
    for (auto& h : handlers_) {
      if (h.on_delete) h.on_delete(obj);
    }
  }
  list_count_++;
  synced_ = true;
  cv_.notify_all();
  spdlog::debug("informer listed resource={} objects={} rv={} vanished={}", options_.type.plural,
                fresh.size(), rv, vanished.size());
  return OkStatus();
}

void Informer::Apply(const std::string& type, const json& object) {
  const std::string rv = object.at("metadata").value("resourceVersion", "");
  if (type == "BOOKMARK") {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    return;
  }
  ObjectPtr obj = ForCache(object);
  // One line per event, so that a transition can be timed from its watch event on (the
  // node agent's steps in docs/benchmarks.md); the key is only built when it is logged.
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("component=informer op=event resource={} type={} key={} rv={}", options_.type.plural, type,
                  ObjectKey(*obj), rv);
  }
  if (type == "ADDED" || type == "MODIFIED") {
    ObjectPtr old = store_.Upsert(obj);
    for (auto& h : handlers_) {
      if (!old && h.on_add) h.on_add(obj);
      if (old && h.on_update) h.on_update(old, obj);
    }
  } else if (type == "DELETED") {
    ObjectPtr old = store_.Remove(ObjectKey(*obj));
    for (auto& h : handlers_) {
      if (h.on_delete) h.on_delete(old ? old : obj);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!rv.empty()) resource_version_ = rv;
}

Status Informer::WatchOnce(const std::atomic<bool>* stop) {
  std::uniform_int_distribution<int> timeout(options_.min_watch_timeout_seconds,
                                             options_.max_watch_timeout_seconds);
  WatchOptions wo;
  wo.resource_version = last_resource_version();
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.timeout_seconds = timeout(rng_);
  wo.allow_bookmarks = true;
  wo.drop_managed_fields = true;
  return client_.Watch(
      options_.type, options_.ns, wo,
      [&](const json& event) {
        events_seen_++;
        Apply(event.value("type", ""), event.at("object"));
        MaybeResync();
        return !stop->load();
      },
      stop);
}

void Informer::MaybeResync() {
  if (options_.resync_period.count() == 0) return;
  auto now = clock_.Now();
  if (next_resync_ == Clock::TimePoint{}) next_resync_ = now + options_.resync_period;
  if (now < next_resync_) return;
  next_resync_ = now + options_.resync_period;
  for (const auto& obj : store_.List()) {
    for (auto& h : handlers_) {
      if (h.on_update) h.on_update(obj, obj);
    }
  }
}

void Informer::Sleep(std::chrono::milliseconds d, const std::atomic<bool>* stop) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = clock_.Now() + d;
  // The stop flag is not under mu_; poll it in short slices.
  while (!stop->load() && clock_.Now() < deadline) {
    clock_.WaitUntil(cv_, lock, std::min(deadline, clock_.Now() + std::chrono::milliseconds(100)),
                     [&] { return stop->load(); });
  }
}

void Informer::Run(const std::atomic<bool>* stop) {
  Backoff backoff(options_.backoff, options_.seed);
  Clock::TimePoint last_failure{};
  // A second Run (after a stop) resumes from where the first left off, as a reconnect would.
  bool need_list = last_resource_version().empty();
  auto fail = [&](const Status& s, const char* what) {
    auto now = clock_.Now();
    if (last_failure != Clock::TimePoint{} && now - last_failure > options_.backoff_reset_after) {
      backoff.Reset();
    }
    last_failure = now;
    const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(backoff.Next());
    spdlog::warn("informer {} failed resource={} error=\"{}\" retry_in_ms={}", what,
                 options_.type.plural, s.ToString(), delay.count());
    Sleep(delay, stop);
  };
  while (!stop->load()) {
    if (need_list) {
      if (auto s = ListAndReplace(); !s.ok()) {
        fail(s, "list");
        continue;
      }
      need_list = false;
    }
    const auto watch_start = clock_.Now();
    const int events_before = events_seen_;
    Status s = WatchOnce(stop);
    if (stop->load()) break;
    if (s.ok() && events_seen_ == events_before &&
        clock_.Now() - watch_start < std::chrono::seconds(1)) {
      // A watch the server ends at once, with nothing in it, must not become a busy loop.
      s = Status(Code::kUnavailable, "watch closed immediately");
    }
    if (s.code() == Code::kGone) {
      spdlog::info("informer watch expired resource={} rv={} action=relist", options_.type.plural,
                   last_resource_version());
      need_list = true;
      continue;
    }
    if (!s.ok()) fail(s, "watch");
    // OK: the server closed the watch at its timeout; resume from the last resourceVersion.
  }
}

bool Informer::WaitForSync(const std::atomic<bool>* stop, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = clock_.Now() + timeout;
  while (!synced_.load() && !stop->load() && clock_.Now() < deadline) {
    clock_.WaitUntil(cv_, lock, std::min(deadline, clock_.Now() + std::chrono::milliseconds(100)),
                     [&] { return synced_.load(); });
  }
  return synced_.load();
}

}  // namespace stasis
