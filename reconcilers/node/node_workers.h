// The Workers of one node: registered by the node agent, claimed for an actor and freed
// through the API server with optimistic concurrency (a claim is a /status update carrying the
// resourceVersion the worker was read at; a 409 means someone else won, try the next). A
// worker is never held by two actors, however many agents and controllers race for it.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/worker.h"
#include "controller/kube_client.h"
#include "reconcilers/node/snapshot_metrics.h"

namespace stasis {

class NodeWorkers {
 public:
  // One worker per entry of `devices` (an empty entry = a CPU slot). Worker names are
  // "<node>-gpu<i>" when the entry lists devices, else "<node>-slot<i>". `gpus`: the identity
  // of each discovered GPU by UUID, published as the workers' spec.gpu (none: not published).
  NodeWorkers(KubeClient& client, std::string node, std::vector<std::vector<std::string>> devices,
              SnapshotMetrics* metrics, std::map<std::string, api::GpuIdentity> gpus = {});

  // Creates the Worker objects that do not exist; existing ones keep their status (claims
  // survive an agent restart). Labels them stasis.dev/node=<node>. An existing one whose
  // spec (devices, nodeName) or label is not what this node discovered is repaired to it.
  Status Register();
  // The worker this actor holds on this node, claiming a free one when it holds none: one with
  // at least `gpus` GPUs, and for a CPU actor (gpus 0) a CPU slot before a GPU worker.
  // kUnavailable ("no_free_worker") when every suitable worker is held; kInvalidArgument
  // ("gpu_count_unavailable") when no worker of the node has that many GPUs.
  Result<api::Worker> Claim(const api::ActorRef& actor, size_t gpus = 0);
  // Claim in two halves, for a resume that starts its sandbox while the claim is written
  // (resume.cc). Reserve: a free worker as this agent last saw them, no API call, kept from
  // this agent's other claims until ClaimReserved (or Unreserve) for it returns; nullopt when
  // the cache cannot settle it (nothing seen yet, the actor may hold one, none free there), and
  // the caller claims with Claim. The Worker returned is the one to be written, held by `actor`.
  std::optional<api::Worker> Reserve(const api::ActorRef& actor, size_t gpus = 0);
  // Writes the reserved claim: a compare-and-swap on the worker as last seen, then, if that
  // version is stale, ClaimNamed.
  Status ClaimReserved(const api::Worker& reserved, const api::ActorRef& actor);
  void Unreserve(const std::string& worker_name);
  // Holds the named worker for `actor` if it is free or already held by it, on a LIST:
  // kAborted ("worker_taken") when another actor holds it. For a recovery that must keep the
  // worker a sandbox already runs on.
  Status ClaimNamed(const std::string& worker_name, const api::ActorRef& actor);
  // Frees every worker of this node held by `actor`. OK when it holds none.
  Status Free(const api::ActorRef& actor);
  // Frees the named worker if `actor` holds it, in one JSON patch whose `test` operations make
  // it a compare-and-swap on the holder (no read first: the fast path of a pause). Falls back
  // to Free(actor) when the patch is refused (the worker is not held by it, or is gone), so the
  // outcome is Free's.
  Status Release(const std::string& worker_name, const api::ActorRef& actor);
  // Lists the workers (and so sets the stasis_workers gauge from them). The gauge follows this
  // agent's own claims and frees as they are written; this picks up others' changes (the
  // cluster controller's), so the agent calls it now and then.
  void RefreshGauge();
  std::optional<api::Worker> HeldBy(const api::ActorRef& actor);
  // Frees workers whose holder `keeps(ref)` says should not hold one (restart recovery).
  // try_cache: look first at the workers as this agent last saw them (Free does).
  Status FreeUnless(const std::function<bool(const api::ActorRef&)>& keeps, bool try_cache = false);
  // The devices of a worker of this node by name (GPU UUIDs), for the runtime spec: from this
  // node's own discovery (the constructor's table), never from the Worker in the API.
  std::vector<std::string> DevicesOf(const std::string& worker_name) const;
  // The identity of that worker's GPUs from this node's discovery (empty: none known, or GPUs
  // that differ): what a checkpoint records and a restore compares (api/gpu_identity.h).
  api::GpuIdentity GpuOf(const std::string& worker_name) const;
  Result<std::vector<api::Worker>> List();

  const std::string& node() const { return node_; }

 private:
  Status CreateWorker(const std::string& name, const std::vector<std::string>& devices);
  api::GpuIdentity IdentityOf(const std::vector<std::string>& devices) const;
  // The spec this node's discovery gives a worker of these devices, as a merge patch's body.
  nlohmann::json SpecOf(const std::vector<std::string>& devices) const;
  // Overwrites the Worker's spec and node label with this node's discovery.
  Status Repair(const std::string& name);
  // The devices of the local table's worker of that name; nullptr for a name not in it.
  const std::vector<std::string>* LocalDevices(const std::string& worker_name) const;
  Status SetHolder(const api::Worker& worker, const std::optional<api::ActorRef>& holder);
  // cached: the workers as last seen by this agent if it has seen them, else a LIST.
  Result<std::vector<api::Worker>> Snapshot(bool cached);
  // Claim's choice among the workers as last seen: the one held by the actor, or a free one
  // no other claim of this agent is trying (reserved in claiming_ until its write returns).
  enum class PickOutcome { kHeld, kTry, kAskServer, kNone };
  struct Picked {
    PickOutcome outcome;
    api::Worker worker;
  };
  Result<Picked> Pick(const api::ActorRef& actor, size_t gpus, bool cached);
  // stasis_workers from known_; known_mu_ held.
  void UpdateGaugeLocked();
  // Keeps a worker as this agent's own write returned it (Claim's and Free's first look).
  void Remember(const nlohmann::json& written);

  KubeClient& client_;
  std::string node_;
  std::vector<std::vector<std::string>> devices_;
  const std::map<std::string, api::GpuIdentity> gpus_;
  SnapshotMetrics* metrics_;
  // This node's workers as this agent last saw them: its last LIST, updated by its own
  // successful writes (their responses); invalid after a 409 until the next LIST.
  std::mutex known_mu_;
  std::map<std::string, api::Worker> known_;
  bool known_valid_ = false;
  std::set<std::string> claiming_;  // workers a Claim of this agent is writing now
};

}  // namespace stasis
