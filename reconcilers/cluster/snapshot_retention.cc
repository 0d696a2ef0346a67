#include "reconcilers/cluster/snapshot_retention.h"

#include <spdlog/spdlog.h>

namespace stasis {

namespace {

// When snapshot `m` reaches `min_age`; nullopt when its takenAt does not parse (never).
std::optional<Time> ComesOfAge(const SnapshotManifest& m, std::chrono::seconds min_age) {
  auto taken = ParseTime(m.taken_at);
  if (!taken.ok()) return std::nullopt;
  return *taken + min_age;
}

// The snapshots beyond the newest `retain` that nothing protects, oldest first.
std::vector<const SnapshotManifest*> BeyondRetain(const std::vector<SnapshotManifest>& committed, int retain,
                                                  const std::set<std::string>& protected_ids) {
  std::vector<const SnapshotManifest*> out;
  if (retain < 1) return out;  // refused by the flag; never read as "keep none"
  const size_t keep_from =
      committed.size() > static_cast<size_t>(retain) ? committed.size() - retain : 0;
  for (size_t i = 0; i < keep_from; ++i) {
    if (!protected_ids.count(committed[i].id)) out.push_back(&committed[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> SnapshotsToDelete(const std::vector<SnapshotManifest>& committed, int retain,
                                           const std::set<std::string>& protected_ids, Time now,
                                           std::chrono::seconds min_age) {
  std::vector<std::string> out;
  for (const SnapshotManifest* m : BeyondRetain(committed, retain, protected_ids)) {
    if (min_age.count() > 0) {
      auto of_age = ComesOfAge(*m, min_age);
      if (!of_age || *of_age > now) continue;
    }
    out.push_back(m->id);
  }
  return out;
}

std::optional<Time> RetentionRecheckAt(const std::vector<SnapshotManifest>& committed, int retain,
                                       const std::set<std::string>& protected_ids, Time now,
                                       std::chrono::seconds min_age) {
  std::optional<Time> first;
  if (min_age.count() <= 0) return first;
  for (const SnapshotManifest* m : BeyondRetain(committed, retain, protected_ids)) {
    auto of_age = ComesOfAge(*m, min_age);
    if (of_age && *of_age > now && (!first || *of_age < *first)) first = *of_age;
  }
  return first;
}

std::optional<std::set<std::string>> ProtectedSnapshots(const api::Actor& a) {
  if (a.metadata.IsBeingDeleted() || api::IsTransitioning(a.status.status)) return std::nullopt;
  std::set<std::string> ids;
  if (a.status.latest_snapshot && !a.status.latest_snapshot->id.empty()) {
    ids.insert(a.status.latest_snapshot->id);
  }
  return ids;
}

SnapshotRetention::SnapshotRetention(SnapshotStore& store, RetentionPolicy policy, ActorReader read_actor)
    : store_(store), policy_(policy), read_actor_(std::move(read_actor)) {}

Result<SnapshotRetention::Pruned> SnapshotRetention::Prune(const std::string& ns, const std::string& name,
                                                           Time now) {
  Pruned result;
  // The listing comes first, the read second (see the header): never the other way round.
  const auto committed = store_.ListCommitted(ns, name);
  if (committed.size() <= static_cast<size_t>(policy_.retain)) return result;
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
  result.recheck_at = RetentionRecheckAt(committed, policy_.retain, *protected_ids, now, policy_.min_age);
  for (const auto& id : SnapshotsToDelete(committed, policy_.retain, *protected_ids, now, policy_.min_age)) {
    if (Status s = store_.RemoveCommitted(ns, name, id); !s.ok()) {
      spdlog::warn("component=retention op=delete actor={}/{} snapshot={} result=error error=\"{}\"",
                   ns, name, id, s.message());
      return s;
    }
    spdlog::info("component=retention op=delete actor={}/{} snapshot={} result=ok retain={} min_age_s={} latest={}",
                 ns, name, id, policy_.retain, policy_.min_age.count(), result.latest);
    result.deleted.push_back(id);
  }
  return result;
}

}  // namespace stasis
