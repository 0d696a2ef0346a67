// The cluster controller's ActorTemplate reconciler (one template key at a time): takes each
// template generation's golden snapshot through a golden actor and fills actors created with
// spec.templateRef in from the template or its warm pool (template_decisions.h and warm_pool.h
// decide; this class reads the caches and the store, and acts). Only the leader runs it.
#pragma once

#include <chrono>
#include <string>

#include "api/actor_template.h"
#include "base/clock.h"
#include "controller/event_recorder.h"
#include "controller/kube_client.h"
#include "controller/object_store.h"
#include "controller/reconciler.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "reconcilers/cluster/template_decisions.h"
#include "snapshots/snapshot_store.h"

namespace stasis {

inline const ResourceType kActorTemplateType{api::kGroup, api::kVersion, api::kActorTemplateResource, true};

// The actors' cache index by namespace, which this reconciler reads.
inline constexpr char kActorsByNamespaceIndex[] = "namespace";

// The template keys ("ns/name") an actor event concerns: the template whose golden actor or
// pool member it is, and the one its spec.templateRef names.
std::vector<std::string> TemplateKeysOf(const nlohmann::json& actor);

struct TemplateReconcilerOptions {
  std::chrono::milliseconds recheck{std::chrono::seconds(2)};  // while a golden is under way
  // How often a recorded golden's presence in the store is checked.
  std::chrono::milliseconds store_check{std::chrono::seconds(30)};
};

class TemplateReconciler : public Reconciler {
 public:
  // `store`: the snapshot store the controller reaches, or nullptr (a missing golden snapshot
  // is then noticed by the clones that cannot start, not here).
  TemplateReconciler(TemplateReconcilerOptions options, KubeClient& client, const ObjectStore& templates,
                     const ObjectStore& actors, const ObjectStore& workers, EventRecorder* events,
                     const SnapshotStore* store,
                     ClusterMetrics* metrics = nullptr, Clock& clock = RealClock::Get());

  Result<ReconcileOutcome> Reconcile(const Request& request) override;

 private:
  Result<ReconcileOutcome> ReconcileTemplate(const Request& request);
  TemplateObservation Observe(const api::ActorTemplate& t) const;
  // The template is gone (confirmed by a quorum read): its golden actors and pool go with it.
  [[nodiscard]] Status DeleteActorsOf(const std::string& ns, const std::string& name);
  [[nodiscard]] Status CreateGolden(const api::ActorTemplate& t, const std::string& name);
  [[nodiscard]] Status SetDesiredState(const std::string& ns, const std::string& name, const char* state);
  // `rv`, when not empty: deleted only at that resourceVersion (a 409 otherwise).
  [[nodiscard]] Status DeleteActor(const std::string& ns, const std::string& name, const std::string& rv = "");
  // The warm pool's upkeep and the filling in of waiting actors (warm_pool.h), once the golden
  // is recorded.
  // `observed`: TemplateObservation::resource_versions, the preconditions of its writes.
  [[nodiscard]] Status KeepPool(const api::ActorTemplate& t, const api::GoldenSnapshot& golden,
                                const PoolActions& pool, const std::map<std::string, std::string>& observed);
  [[nodiscard]] Status ClaimMember(const api::ActorTemplate& t, const PoolClaim& claim, const std::string& member_rv,
                                   const std::string& actor_rv);
  // Copies the template's actor spec into actor `name` (at resourceVersion `rv`) with this
  // spec.source (and, when not empty, spec.nodeName).
  [[nodiscard]] Status FillIn(const api::ActorTemplate& t, const std::string& name, const std::string& rv,
                              const nlohmann::json& source, const std::string& node);
  [[nodiscard]] Status WriteStatus(const api::ActorTemplate& before, const TemplateActions& act);

  TemplateReconcilerOptions options_;
  KubeClient& client_;
  const ObjectStore& templates_;
  const ObjectStore& actors_;
  const ObjectStore& workers_;
  EventRecorder* events_;
  const SnapshotStore* store_;
  ClusterMetrics* metrics_;
  Clock& clock_;
};

}  // namespace stasis
