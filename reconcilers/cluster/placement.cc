#include "reconcilers/cluster/placement.h"

#include <algorithm>
#include <map>

#include "api/actor_template.h"
#include "api/conditions.h"

namespace stasis {

namespace {

const api::GpuIdentity* CudaIdentity(const std::optional<api::Snapshot>& snap) {
  return snap && snap->cuda_checkpointed && snap->gpu.Known() ? &snap->gpu : nullptr;
}

}  // namespace

const api::GpuIdentity* RestoresOnto(const api::Actor& a, const std::vector<api::Actor>& actors) {
  if (a.status.latest_snapshot) return CudaIdentity(a.status.latest_snapshot);
  if (!a.spec.source) return nullptr;
  for (const auto& source : actors) {
    if (source.metadata.namespace_ != a.metadata.namespace_ || source.metadata.name != a.spec.source->actor_name) {
      continue;
    }
    // A clone of an older snapshot than the source's latest: its identity is not in the cache
    // (the node agent checks it from the manifest).
    const auto& snap = source.status.latest_snapshot;
    const std::string& wanted = a.spec.source->snapshot_id;
    return snap && (wanted.empty() || wanted == snap->id) ? CudaIdentity(snap) : nullptr;
  }
  return nullptr;
}

bool HoldsAWorkerPromise(const api::Actor& o) {
  return !o.status.node_name.empty() && o.status.worker_name.empty() &&
         o.spec.desired_state == api::DesiredState::kRunning && o.status.status != api::ActorState::kRunning;
}

bool WorkerSuits(const api::Worker& w, const api::Actor& a) { return WorkerSuits(w, a, RestoresOnto(a, {})); }

bool WorkerSuits(const api::Worker& w, const api::Actor& a, const api::GpuIdentity* restores_onto) {
  // A GPU actor needs a worker with as many GPUs (one worker is one GPU with --gpus), and one
  // its CUDA checkpoint can be restored on; a CPU actor takes a CPU slot, never a GPU another
  // actor could use.
  if (a.spec.gpu.count > 0) {
    if (w.spec.devices.size() < static_cast<size_t>(a.spec.gpu.count)) return false;
    return restores_onto == nullptr || api::GpuMismatch(*restores_onto, w.spec.gpu).empty();
  }
  return w.spec.devices.empty();
}

namespace {

struct NodeCount {
  int suitable = 0;  // workers that suit the actor
  int free = 0;      // of those, free
  int promised = 0;  // actors of the same kind bound here, wanting Running, holding no worker
  int Available() const { return std::max(0, free - promised); }
};

std::string WhatItNeeds(const api::Actor& a, const PlacementInput& in) {
  if (a.spec.gpu.count > 0) {
    std::string m = "a worker with " + std::to_string(a.spec.gpu.count) + " GPU" + (a.spec.gpu.count > 1 ? "s" : "");
    if (const api::GpuIdentity* taken_on = RestoresOnto(a, in.actors)) {
      m += " of " + api::Describe(*taken_on) + " (the snapshot it restores holds a CUDA context taken there)";
    }
    return m;
  }
  return "a CPU worker";
}

// Suitable workers per live node, and the actors already bound there that will claim one.
std::map<std::string, NodeCount> CountLiveNodes(const api::Actor& a, const PlacementInput& in) {
  std::map<std::string, NodeCount> nodes;
  const api::GpuIdentity* restores_onto = RestoresOnto(a, in.actors);
  for (const auto& w : in.workers) {
    if (!in.live_nodes.count(w.spec.node_name) || in.closed_nodes.count(w.spec.node_name) ||
        !WorkerSuits(w, a, restores_onto)) {
      continue;
    }
    NodeCount& n = nodes[w.spec.node_name];
    n.suitable++;
    if (w.IsFree()) n.free++;
  }
  for (const auto& o : in.actors) {
    if (!HoldsAWorkerPromise(o) || o.metadata.Key() == a.metadata.Key()) continue;
    if ((o.spec.gpu.count > 0) != (a.spec.gpu.count > 0)) continue;
    if (auto it = nodes.find(o.status.node_name); it != nodes.end()) it->second.promised++;
  }
  return nodes;
}

Placement SnapshotPlacement(const api::Actor& a, const PlacementInput& in) {
  const api::Snapshot& snap = *a.status.latest_snapshot;
  Placement p;
  if (!in.live_nodes.count(snap.node_name)) {
    p.reason = api::kReasonUnschedulable;
    p.message = "its snapshot " + snap.id + " is on node " + snap.node_name +
                ", which is not live (0/" + std::to_string(in.live_nodes.size()) +
                " live nodes hold it); it can resume only there";
    return p;
  }
  p.node = snap.node_name;
  auto nodes = CountLiveNodes(a, in);
  p.free = nodes[p.node].Available();
  p.suitable = nodes[p.node].suitable;
  return p;
}

// Stable while workers only move from promised to held (agents claiming what was promised):
// a new message is a new Event and a status write for every waiting actor.
std::string NoFreeWorkerMessage(const std::map<std::string, NodeCount>& nodes, const std::string& avoid) {
  int suitable = 0, held = 0, promised = 0, avoided = 0;
  for (const auto& [name, n] : nodes) {
    suitable += n.suitable;
    held += n.suitable - n.free;
    promised += n.free - n.Available();
    if (name == avoid) avoided += n.Available();
  }
  std::string m = "0/" + std::to_string(suitable) + " workers free: " + std::to_string(held + promised);
  m += promised > 0 ? " held or promised to actors bound to their node" : " held";
  if (avoided > 0) m += ", " + std::to_string(avoided) + " on node " + avoid + ", whose agent found none free";
  return m;
}

int ClosedLiveNodes(const PlacementInput& in) {
  int n = 0;
  for (const auto& node : in.closed_nodes) n += in.live_nodes.count(node) ? 1 : 0;
  return n;
}

}  // namespace

Placement Place(const api::Actor& a, const PlacementInput& in) {
  const auto& snap = a.status.latest_snapshot;
  if (snap && !snap->node_name.empty()) return SnapshotPlacement(a, in);

  const auto nodes = CountLiveNodes(a, in);
  // A warm-pool member is a spare: it never takes a node's last free worker (warm_pool.h).
  const int spare = a.metadata.labels.count(api::kWarmPoolOfLabel) ? 1 : 0;
  Placement p;
  for (const auto& [name, n] : nodes) {
    if (n.Available() > std::max(p.free, spare) && name != in.avoid) {
      p.node = name;
      p.free = n.Available();
      p.suitable = n.suitable;
    }
  }
  if (!p.node.empty()) return p;
  if (in.live_nodes.empty()) {
    std::set<std::string> known;
    for (const auto& w : in.workers) known.insert(w.spec.node_name);
    p.reason = api::kReasonUnschedulable;
    p.message = "0/" + std::to_string(known.size()) + " nodes live: no node agent has renewed its heartbeat";
  } else if (nodes.empty()) {
    p.reason = api::kReasonUnschedulable;
    p.message = "0/" + std::to_string(in.live_nodes.size()) + " live nodes have " + WhatItNeeds(a, in);
    if (const int closed = ClosedLiveNodes(in); closed > 0) {
      p.message += " and take new actors (" + std::to_string(closed) + " cordoned or draining)";
    }
  } else {
    p.reason = api::kReasonNoFreeWorker;
    p.message = NoFreeWorkerMessage(nodes, in.avoid);
    if (spare > 0) p.message += "; a warm-pool actor leaves each node's last free worker to others";
  }
  return p;
}

bool WorkerChangeMayUnblock(const nlohmann::json* before, const nlohmann::json* after) {
  auto is_free = [](const nlohmann::json& w) {
    return w.value("/status/phase"_json_pointer, std::string()) == ToString(api::WorkerPhase::kFree);
  };
  if (!after || !is_free(*after)) return false;
  if (!before || !is_free(*before)) return true;
  auto field = [](const nlohmann::json& w, const nlohmann::json::json_pointer& p) {
    return w.contains(p) ? w.at(p) : nlohmann::json();
  };
  for (const auto& p : {"/spec"_json_pointer, "/metadata/labels"_json_pointer}) {
    if (field(*before, p) != field(*after, p)) return true;
  }
  return false;
}

}  // namespace stasis
