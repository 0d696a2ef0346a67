#include "reconcilers/node/clone_source.h"

#include <tuple>

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

}  // namespace

Result<CloneSnapshot> ChooseCloneSnapshot(const api::ActorSpec& clone, const SourceObservation& source) {
  if (!clone.source) return Status(Code::kInvalidArgument, "the actor has no spec.source", kSourceNotFound);
  const api::ActorSourceRef& ref = *clone.source;
  if (!source.exists) {
    return Status(Code::kUnavailable, "source actor " + ref.actor_name + " does not exist", kSourceNotFound);
  }
  const SnapshotManifest* chosen = nullptr;
  for (const auto& m : source.committed) {
    if (!ref.snapshot_id.empty()) {
      if (m.id != ref.snapshot_id) continue;
      if (m.owner_uid != source.uid) {
        return Status(Code::kUnavailable,
                      "snapshot " + m.id + " was taken by an earlier actor named " + ref.actor_name,
                      kSourceSnapshotUnavailable);
      }
      if (m.scope != "Full") {
        return Incompatible("snapshot " + m.id + " of " + ref.actor_name + " is a " + m.scope +
                            " snapshot: a clone restores a Full one");
      }
      chosen = &m;
      break;
    }
    // RFC 3339 times of one format compare as strings; ties go to the later id.
    if (Usable(m, source.uid) &&
        (!chosen || std::tie(m.taken_at, m.id) > std::tie(chosen->taken_at, chosen->id))) {
      chosen = &m;
    }
  }
  if (!chosen) {
    return Status(Code::kUnavailable,
                  ref.snapshot_id.empty()
                      ? "source actor " + ref.actor_name + " has no committed Full snapshot (suspend it, or commit a pause)"
                      : "source actor " + ref.actor_name + " has no committed snapshot " + ref.snapshot_id,
                  kSourceSnapshotUnavailable);
  }
  if (Status s = CheckRunnable(clone, *chosen); !s.ok()) return s;
  return CloneSnapshot{ref.actor_name, source.uid, chosen->id, chosen->image_digest, chosen->trigger,
                       chosen->cuda_checkpointed};
}

std::vector<std::string> PostRestoreHookEnv(const api::Actor& a, const std::string& snapshot_id,
                                            const std::string& restore) {
  return {"STASIS_ACTOR_NAMESPACE=" + a.metadata.namespace_, "STASIS_ACTOR_NAME=" + a.metadata.name,
          "STASIS_ACTOR_UID=" + a.metadata.uid, "STASIS_SNAPSHOT_ID=" + snapshot_id, "STASIS_RESTORE=" + restore};
}

}  // namespace stasis
