#include "reconcilers/node/node_workers.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "api/json_mapping.h"
#include "reconcilers/api_resources.h"

namespace stasis {

NodeWorkers::NodeWorkers(KubeClient& client, std::string node,
                         std::vector<std::vector<std::string>> devices, SnapshotMetrics* metrics,
                         std::map<std::string, api::GpuIdentity> gpus)
    : client_(client),
      node_(std::move(node)),
      devices_(std::move(devices)),
      gpus_(std::move(gpus)),
      metrics_(metrics) {}

namespace {
std::string WorkerName(const std::string& node, size_t i, bool gpu) {
  return node + (gpu ? "-gpu" : "-slot") + std::to_string(i);
}
}  // namespace

api::GpuIdentity NodeWorkers::IdentityOf(const std::vector<std::string>& devices) const {
  // A worker of several GPUs has one identity only when they all share it (a checkpoint of its
  // actor needs every one of them again).
  std::optional<api::GpuIdentity> common;
  for (const auto& uuid : devices) {
    auto it = gpus_.find(uuid);
    const api::GpuIdentity g = it == gpus_.end() ? api::GpuIdentity{} : it->second;
    if (common && *common != g) return {};
    common = g;
  }
  return common.value_or(api::GpuIdentity{});
}

api::GpuIdentity NodeWorkers::GpuOf(const std::string& worker_name) const {
  const std::vector<std::string>* devices = LocalDevices(worker_name);
  return devices ? IdentityOf(*devices) : api::GpuIdentity{};
}

json NodeWorkers::SpecOf(const std::vector<std::string>& devices) const {
  api::Worker w;
  w.spec.node_name = node_;
  w.spec.devices = devices;
  w.spec.gpu = IdentityOf(devices);
  json spec = api::WorkerTypedJson(w)["spec"];
  // A merge patch keeps what it does not name: an identity no longer discovered is removed.
  if (!spec.contains("gpu")) spec["gpu"] = nullptr;
  if (!spec.contains("devices")) spec["devices"] = json::array();
  return spec;
}

Status NodeWorkers::Register() {
  // One LIST, then creates only for the workers missing from it: an agent restarting on a node
  // with 1,000 workers makes one request, not 1,000 creates answered AlreadyExists.
  // A LIST is served from the API server's watch cache, which answers 429 "storage is
  // (re)initializing" for a while after the CRD is installed or the server restarts: wait
  // that out (~10 s) rather than fail the agent's start.
  auto existing = List();
  for (int attempt = 0; !existing.ok() && existing.status().code() == Code::kUnavailable && attempt < 40;
       ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    existing = List();
  }
  if (!existing.ok()) return existing.status();
  std::map<std::string, api::Worker> present;
  for (const auto& w : *existing) present.emplace(w.metadata.name, w);
  bool changed_any = false;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const std::string name = WorkerName(node_, i, !devices_[i].empty());
    auto found = present.find(name);
    if (found != present.end() && found->second.spec.devices == devices_[i] &&
        found->second.spec.gpu == IdentityOf(devices_[i])) {
      continue;
    }
    changed_any = true;
    // Present with other devices (written by someone else), or named for this node but not
    // labelled or specced for it (AlreadyExists below): the node's own discovery wins.
    Status s = found != present.end() ? Repair(name) : CreateWorker(name, devices_[i]);
    if (s.code() == Code::kAlreadyExists) s = Repair(name);
    if (s.code() == Code::kPermissionDenied || s.code() == Code::kInvalidArgument) {
      // The Worker of that name belongs to another node (the admission policy refuses the
      // write, or the CRD the change of its immutable nodeName). It is never claimed here:
      // List keeps this node's, Pick only names of the local table.
      spdlog::error("worker not repaired worker={} node={} error=\"{}\"", name, node_, s.message());
      continue;
    }
    if (!s.ok()) return s;
  }
  for (const auto& [name, w] : present) {
    if (!LocalDevices(name)) {
      spdlog::warn("worker not of this node's discovery ignored worker={} node={}", name, node_);
    }
  }
  if (!changed_any) return OkStatus();
  auto all = List();  // the gauge, and the cache of Claim's first look, with the new ones
  return all.ok() ? OkStatus() : all.status();
}

Status NodeWorkers::CreateWorker(const std::string& name, const std::vector<std::string>& devices) {
  json w = {{"apiVersion", api::kApiVersion},
            {"kind", api::kWorkerKind},
            {"metadata", {{"name", name}, {"labels", {{api::kNodeLabel, node_}}}}},
            {"spec", SpecOf(devices)}};
  if (w["spec"]["gpu"].is_null()) w["spec"].erase("gpu");  // null means "remove" only in a patch
  auto created = client_.Create(kWorkerType, "", w);
  if (!created.ok()) return created.status();
  // A new worker starts Free; status is only writable through /status.
  json status = {{"status", {{"phase", "Free"}}}};
  auto patched = client_.Patch(kWorkerType, "", name, PatchType::kMerge, status, "status");
  if (!patched.ok()) return patched.status();
  spdlog::info("worker registered worker={} node={} devices={} gpu=\"{}\"", name, node_, devices.size(),
               api::Describe(IdentityOf(devices)));
  return OkStatus();
}

Status NodeWorkers::Repair(const std::string& name) {
  const std::vector<std::string>* devices = LocalDevices(name);
  if (!devices) return Status(Code::kInternal, "worker " + name + " is not in this node's table");
  // spec.nodeName is immutable (the CRD): one of another node's stays refused.
  json patch = {{"metadata", {{"labels", {{api::kNodeLabel, node_}}}}},
                {"spec", SpecOf(*devices)}};
  auto r = client_.Patch(kWorkerType, "", name, PatchType::kMerge, patch);
  if (!r.ok()) return r.status();
  spdlog::warn("worker repaired to this node's discovery worker={} node={} devices={}", name, node_,
               devices->size());
  return OkStatus();
}

const std::vector<std::string>* NodeWorkers::LocalDevices(const std::string& worker_name) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (WorkerName(node_, i, !devices_[i].empty()) == worker_name) return &devices_[i];
  }
  return nullptr;
}

Result<std::vector<api::Worker>> NodeWorkers::List() {
  ListOptions lo;
  lo.label_selector = std::string(api::kNodeLabel) + "=" + node_;
  auto list = client_.List(kWorkerType, "", lo);
  if (!list.ok()) return list.status();
  std::vector<api::Worker> out;
  for (const auto& item : (*list)["items"]) {
    auto w = api::WorkerFromJson(item);
    if (w.ok() && w->spec.node_name == node_) out.push_back(*w);
  }
  std::sort(out.begin(), out.end(),
            [](const api::Worker& a, const api::Worker& b) { return a.metadata.name < b.metadata.name; });
  std::lock_guard lock(known_mu_);
  known_.clear();
  for (const auto& w : out) known_.emplace(w.metadata.name, w);
  known_valid_ = true;
  UpdateGaugeLocked();
  return out;
}

Result<std::vector<api::Worker>> NodeWorkers::Snapshot(bool cached) {
  if (cached) {
    std::lock_guard lock(known_mu_);
    if (known_valid_) {
      std::vector<api::Worker> out;
      for (const auto& [name, w] : known_) out.push_back(w);
      return out;
    }
  }
  return List();
}

void NodeWorkers::UpdateGaugeLocked() {
  if (!metrics_ || !known_valid_) return;
  int free = 0, held = 0;
  for (const auto& [name, w] : known_) (w.IsFree() ? free : held)++;
  metrics_->SetWorkers(free, held);
}

Status NodeWorkers::SetHolder(const api::Worker& worker, const std::optional<api::ActorRef>& holder) {
  api::Worker after = worker;
  after.status.phase = holder ? api::WorkerPhase::kHeld : api::WorkerPhase::kFree;
  after.status.actor_ref = holder;
  json patch = api::WorkerStatusMergePatch(worker, after).value_or(json::object());
  if (!holder) patch["status"]["actorRef"] = nullptr;
  // The resourceVersion turns the merge patch into a compare-and-swap: 409 if it changed.
  patch["metadata"]["resourceVersion"] = worker.metadata.resource_version;
  auto r = client_.Patch(kWorkerType, "", worker.metadata.name, PatchType::kMerge, patch, "status");
  if (!r.ok()) {
    // Someone else changed it (409) or it is gone: what this agent knows is stale; list again.
    if (r.status().code() == Code::kAborted || r.status().code() == Code::kNotFound) {
      std::lock_guard lock(known_mu_);
      known_valid_ = false;
    }
    return r.status();
  }
  Remember(*r);
  return OkStatus();
}

void NodeWorkers::Remember(const json& written) {
  std::lock_guard lock(known_mu_);
  if (auto w = api::WorkerFromJson(written); w.ok()) {
    known_[w->metadata.name] = *w;  // with the resourceVersion of this write
    UpdateGaugeLocked();
  } else {
    known_valid_ = false;
  }
}

std::optional<api::Worker> NodeWorkers::HeldBy(const api::ActorRef& actor) {
  auto all = List();
  if (!all.ok()) return std::nullopt;
  for (const auto& w : *all) {
    if (w.IsHeldBy(actor)) return w;
  }
  return std::nullopt;
}

Result<api::Worker> NodeWorkers::Claim(const api::ActorRef& actor, size_t gpus) {
  // The first look is at the workers as this agent last saw them (no LIST): a claim from it
  // is a compare-and-swap on the resourceVersion seen, so a stale entry costs a 409 and a
  // LIST, never a double booking. Anything the cache cannot settle safely — the actor already
  // holding a worker (the controller may have freed it since), no suitable free worker — is
  // decided on a LIST. Claims of this agent's own workers running at once each reserve the
  // worker they try (claiming_), so they try different ones: without that, every concurrent
  // claim raced for the first free worker, all but one lost with a 409, and each loss cost a
  // LIST of the node's workers.
  for (int attempt = 0; attempt < 6; ++attempt) {
    const bool cached = attempt == 0;  // no cache yet: Pick asks for the LIST of attempt 1
    if (!cached) {
      if (auto listed = List(); !listed.ok()) return listed.status();
    }
    auto pick = Pick(actor, gpus, cached);
    if (!pick.ok()) return pick.status();
    if (pick->outcome == PickOutcome::kHeld) return pick->worker;
    if (pick->outcome == PickOutcome::kAskServer) continue;
    if (pick->outcome == PickOutcome::kNone) break;
    const api::Worker& w = pick->worker;
    Status s = SetHolder(w, actor);
    {
      std::lock_guard lock(known_mu_);
      claiming_.erase(w.metadata.name);
    }
    if (s.ok()) {
      spdlog::info("worker claimed worker={} actor={}", w.metadata.name, actor.Key());
      api::Worker held = w;
      held.status.phase = api::WorkerPhase::kHeld;
      held.status.actor_ref = actor;
      return held;
    }
    if (s.code() != Code::kAborted) return s;
    // Someone else (the cluster controller) changed it: look again on a LIST.
  }
  return Status(Code::kUnavailable, "no free worker on node " + node_, "no_free_worker");
}

std::optional<api::Worker> NodeWorkers::Reserve(const api::ActorRef& actor, size_t gpus) {
  auto pick = Pick(actor, gpus, /*cached=*/true);
  if (!pick.ok() || pick->outcome != PickOutcome::kTry) return std::nullopt;
  api::Worker held = pick->worker;
  held.status.phase = api::WorkerPhase::kHeld;
  held.status.actor_ref = actor;
  return held;
}

void NodeWorkers::Unreserve(const std::string& worker_name) {
  std::lock_guard lock(known_mu_);
  claiming_.erase(worker_name);
}

Status NodeWorkers::ClaimReserved(const api::Worker& reserved, const api::ActorRef& actor) {
  api::Worker seen = reserved;  // as last seen: free, at the version the cache had
  seen.status.phase = api::WorkerPhase::kFree;
  seen.status.actor_ref.reset();
  Status s = SetHolder(seen, actor);
  Unreserve(reserved.metadata.name);
  if (s.ok()) {
    spdlog::info("worker claimed worker={} actor={}", reserved.metadata.name, actor.Key());
    return s;
  }
  if (s.code() != Code::kAborted && s.code() != Code::kNotFound) return s;
  return ClaimNamed(reserved.metadata.name, actor);
}

Status NodeWorkers::ClaimNamed(const std::string& worker_name, const api::ActorRef& actor) {
  for (int attempt = 0; attempt < 6; ++attempt) {
    auto all = List();
    if (!all.ok()) return all.status();
    auto it = std::find_if(all->begin(), all->end(),
                           [&](const api::Worker& w) { return w.metadata.name == worker_name; });
    if (it == all->end()) return Status(Code::kNotFound, "worker " + worker_name + " does not exist", "worker_taken");
    if (it->IsHeldBy(actor)) return OkStatus();
    if (!it->IsFree()) {
      return Status(Code::kAborted, "worker " + worker_name + " is held by another actor", "worker_taken");
    }
    Status s = SetHolder(*it, actor);
    if (s.ok()) {
      spdlog::info("worker claimed worker={} actor={}", worker_name, actor.Key());
      return s;
    }
    if (s.code() != Code::kAborted) return s;
  }
  return Status(Code::kAborted, "worker " + worker_name + " kept changing while claiming it", "worker_taken");
}

Result<NodeWorkers::Picked> NodeWorkers::Pick(const api::ActorRef& actor, size_t gpus, bool cached) {
  std::lock_guard lock(known_mu_);
  if (!known_valid_) return Picked{PickOutcome::kAskServer, {}};
  for (const auto& [name, w] : known_) {
    // Held already: from a LIST that is the answer; from the cache it may be stale.
    if (w.IsHeldBy(actor)) return Picked{cached ? PickOutcome::kAskServer : PickOutcome::kHeld, w};
  }
  // What a worker offers is this node's own discovery, never the Worker's spec in the API
  // (anyone who could write it would hand an actor every GPU); a worker not in the local
  // table offers nothing and is never claimed.
  auto suits = [&](const api::Worker& w) {
    const std::vector<std::string>* local = LocalDevices(w.metadata.name);
    return local && local->size() >= gpus;
  };
  auto gpu_count = [&](const api::Worker& w) {
    const std::vector<std::string>* local = LocalDevices(w.metadata.name);
    return local ? local->size() : 0;
  };
  if (gpus > 0 && std::none_of(known_.begin(), known_.end(), [&](const auto& kv) { return suits(kv.second); })) {
    return Status(Code::kInvalidArgument,
                  "the actor asks for " + std::to_string(gpus) + " GPU(s); no worker of node " +
                      node_ + " has that many (one worker per GPU)",
                  "gpu_count_unavailable");
  }
  // A CPU actor takes a CPU slot before a GPU another actor could use.
  const api::Worker* best = nullptr;
  for (const auto& [name, w] : known_) {
    if (!w.IsFree() || !suits(w) || claiming_.count(name)) continue;
    if (!best || (gpu_count(*best) > 0 && gpu_count(w) == 0)) best = &w;
  }
  if (!best) return Picked{cached ? PickOutcome::kAskServer : PickOutcome::kNone, {}};
  claiming_.insert(best->metadata.name);
  return Picked{PickOutcome::kTry, *best};
}

Status NodeWorkers::Free(const api::ActorRef& actor) {
  return FreeUnless([&](const api::ActorRef& ref) { return !(ref == actor); }, /*try_cache=*/true);
}

Status NodeWorkers::FreeUnless(const std::function<bool(const api::ActorRef&)>& keeps, bool try_cache) {
  for (int attempt = 0; attempt < 6; ++attempt) {
    // With try_cache, the first look is at the workers as last seen (see Claim): used only
    // when it shows a worker to free (a CAS on it); "nothing to free" is confirmed by a LIST.
    const bool cached = try_cache && attempt == 0;
    auto all = Snapshot(cached);
    if (!all.ok()) return all.status();
    if (cached && std::none_of(all->begin(), all->end(), [&](const api::Worker& w) {
          return !w.IsFree() && w.status.actor_ref && !keeps(*w.status.actor_ref);
        })) {
      continue;
    }
    bool conflict = false;
    for (auto& w : *all) {
      if (w.IsFree() || !w.status.actor_ref || keeps(*w.status.actor_ref)) continue;
      Status s = SetHolder(w, std::nullopt);
      if (s.code() == Code::kAborted) {
        conflict = true;
        continue;
      }
      if (!s.ok()) return s;
      spdlog::info("worker freed worker={} actor={}", w.metadata.name, w.status.actor_ref->Key());
    }
    if (!conflict) return OkStatus();
  }
  return Status(Code::kAborted, "workers of node " + node_ + " kept changing while freeing");
}

Status NodeWorkers::Release(const std::string& worker_name, const api::ActorRef& actor) {
  if (worker_name.empty()) return Free(actor);
  const json patch = json::array({
      {{"op", "test"}, {"path", "/status/phase"}, {"value", "Held"}},
      {{"op", "test"}, {"path", "/status/actorRef/namespace"}, {"value", actor.namespace_}},
      {{"op", "test"}, {"path", "/status/actorRef/name"}, {"value", actor.name}},
      {{"op", "replace"}, {"path", "/status/phase"}, {"value", "Free"}},
      {{"op", "remove"}, {"path", "/status/actorRef"}},
  });
  auto r = client_.Patch(kWorkerType, "", worker_name, PatchType::kJson, patch, "status");
  if (r.ok()) {
    Remember(*r);  // the next Claim's first look sees it free
    spdlog::info("worker freed worker={} actor={}", worker_name, actor.Key());
    return OkStatus();
  }
  // Not held by this actor (any more), gone, or a transient error: the careful path decides.
  spdlog::debug("worker release fell back worker={} actor={} error=\"{}\"", worker_name, actor.Key(),
                r.status().message());
  return Free(actor);
}

void NodeWorkers::RefreshGauge() { (void)List(); }

std::vector<std::string> NodeWorkers::DevicesOf(const std::string& worker_name) const {
  const std::vector<std::string>* local = LocalDevices(worker_name);
  return local ? *local : std::vector<std::string>{};
}

}  // namespace stasis
