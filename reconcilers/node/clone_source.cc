#include "reconcilers/node/clone_source.h"

#include <tuple>

#include "api/actor_template.h"

namespace stasis {
namespace {

// A manifest the clone may restore: the source's current life, committed Full.
bool Usable(const SnapshotManifest& m, const std::string& uid) {
  return m.scope == "Full" && m.owner_uid == uid;
}

Status Incompatible(const std::string& what) {
  return Status(Code::kFailedPrecondition, what, kSourceIncompatible);
}

Status CheckRunnable(const api::ActorSpec& clone, const SnapshotManifest& m) {
  if (m.cuda_checkpointed && clone.gpu.count == 0) {
    return Incompatible("snapshot " + m.id + " of " + m.name + " holds a CUDA context; this actor asks for no GPU");
  }
  if (m.image_digest.empty() != clone.image.empty()) {
    return Incompatible("snapshot " + m.id + " of " + m.name + " was taken on " +
                        (m.image_digest.empty() ? std::string("a bundle") : "image " + m.image_digest) +
                        "; this actor runs " + (clone.image.empty() ? "a bundle" : "an image"));
  }
  return OkStatus();
}

// The snapshot the clone named: of the source's current life, and Full.
Status CheckNamed(const SnapshotManifest& m, const api::ActorSourceRef& ref, const std::string& uid) {
  if (m.owner_uid != uid) {
    return Status(Code::kUnavailable, "snapshot " + m.id + " was taken by an earlier actor named " + ref.actor_name,
                  kSourceSnapshotUnavailable);
  }
  if (m.scope != "Full") {
    return Incompatible("snapshot " + m.id + " of " + ref.actor_name + " is a " + m.scope +
                        " snapshot: a clone restores a Full one");
  }
  return OkStatus();
}

}  // namespace

Result<CloneSnapshot> ChooseCloneSnapshot(const api::ActorSpec& clone, const SourceObservation& source) {
  if (!clone.source) return Status(Code::kInvalidArgument, "the actor has no spec.source", kSourceNotFound);
  const api::ActorSourceRef& ref = *clone.source;
  if (!source.exists) {
    return Status(Code::kUnavailable, "source actor " + ref.actor_name + " does not exist", kSourceNotFound);
  }
  const SnapshotManifest* chosen = nullptr;
  bool local = false;
  if (!ref.snapshot_id.empty()) {
    // A named snapshot may be on this node's disk (a warm-pool claim) or in the store.
    auto named = [&](const std::vector<SnapshotManifest>& in) -> const SnapshotManifest* {
      for (const auto& m : in) {
        if (m.id == ref.snapshot_id) return &m;
      }
      return nullptr;
    };
    chosen = named(source.local);
    local = chosen != nullptr;
    if (!chosen) chosen = named(source.committed);
    if (chosen) {
      if (Status s = CheckNamed(*chosen, ref, source.uid); !s.ok()) return s;
    }
  } else {
    // An unnamed one from the store only: the clone must be able to start on any node.
    for (const auto& m : source.committed) {
      // RFC 3339 times of one format compare as strings; ties go to the later id.
      if (Usable(m, source.uid) &&
          (!chosen || std::tie(m.taken_at, m.id) > std::tie(chosen->taken_at, chosen->id))) {
        chosen = &m;
      }
    }
  }
  if (!chosen) {
    return Status(Code::kUnavailable,
                  ref.snapshot_id.empty()
                      ? "source actor " + ref.actor_name + " has no committed Full snapshot (suspend it, or commit a pause)"
                      : "source actor " + ref.actor_name + " has no snapshot " + ref.snapshot_id +
                            " in the store or on this node",
                  kSourceSnapshotUnavailable);
  }
  if (Status s = CheckRunnable(clone, *chosen); !s.ok()) return s;
  return CloneSnapshot{ref.actor_name, source.uid, chosen->id, chosen->image_digest, chosen->trigger,
                       chosen->cuda_checkpointed, local};
}

std::string StartKind(bool has_source, const std::map<std::string, std::string>& source_labels,
                      const std::map<std::string, std::string>& own_labels) {
  if (!has_source) return "boot";
  if (own_labels.count(api::kWarmPoolOfLabel)) return "refill";
  if (source_labels.count(api::kGoldenOfLabel)) return "golden";
  if (source_labels.count(api::kWarmPoolOfLabel)) return "warm";
  return "clone";
}

std::vector<std::string> PostRestoreHookEnv(const api::Actor& a, const std::string& snapshot_id,
                                            const std::string& restore) {
  return {"STASIS_ACTOR_NAMESPACE=" + a.metadata.namespace_, "STASIS_ACTOR_NAME=" + a.metadata.name,
          "STASIS_ACTOR_UID=" + a.metadata.uid, "STASIS_SNAPSHOT_ID=" + snapshot_id, "STASIS_RESTORE=" + restore};
}

}  // namespace stasis
