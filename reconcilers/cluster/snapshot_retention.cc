#include "reconcilers/cluster/snapshot_retention.h"

#include <spdlog/spdlog.h>

namespace stasis {

std::vector<std::string> SnapshotsToDelete(const std::vector<SnapshotManifest>& committed, int retain,
                                           const std::set<std::string>& protected_ids) {
  std::vector<std::string> out;
  if (retain < 1) return out;  // refused by the flag; never read as "keep none"
  const size_t keep_from =
      committed.size() > static_cast<size_t>(retain) ? committed.size() - retain : 0;
  for (size_t i = 0; i < keep_from; ++i) {
    if (!protected_ids.count(committed[i].id)) out.push_back(committed[i].id);
  }
  return out;
}

std::optional<std::set<std::string>> ProtectedSnapshots(const api::Actor& a) {
  if (a.metadata.IsBeingDeleted() || api::IsTransitioning(a.status.status)) return std::nullopt;
  std::set<std::string> ids;
  if (a.status.latest_snapshot && !a.status.latest_snapshot->id.empty()) {
    ids.insert(a.status.latest_snapshot->id);
  }
  return ids;
}

SnapshotRetention::SnapshotRetention(SnapshotStore& store, int retain, ActorReader read_actor)
    : store_(store), retain_(retain), read_actor_(std::move(read_actor)) {}

Result<SnapshotRetention::Pruned> SnapshotRetention::Prune(const std::string& ns,
                                                           const std::string& name) {
  Pruned result;
  // The listing comes first, the read second (see the header): never the other way round.
  const auto committed = store_.ListCommitted(ns, name);
  if (committed.size() <= static_cast<size_t>(retain_)) return result;
  auto actor = read_actor_(ns, name);
  if (!actor.ok()) {
    if (actor.status().code() != Code::kNotFound) return actor.status();
    result.skipped = true;  // its deletion removes its snapshots
    return result;
  }
  if (actor->status.latest_snapshot) result.latest = actor->status.latest_snapshot->id;
  const auto protected_ids = ProtectedSnapshots(*actor);
  if (!protected_ids) {
    result.skipped = true;
    return result;
  }
  for (const auto& id : SnapshotsToDelete(committed, retain_, *protected_ids)) {
    if (Status s = store_.RemoveCommitted(ns, name, id); !s.ok()) {
      spdlog::warn("component=retention op=delete actor={}/{} snapshot={} result=error error=\"{}\"",
                   ns, name, id, s.message());
      return s;
    }
    spdlog::info("component=retention op=delete actor={}/{} snapshot={} result=ok retain={} latest={}",
                 ns, name, id, retain_, result.latest);
    result.deleted.push_back(id);
  }
  return result;
}

}  // namespace stasis
