// One reconcile's working copy of an actor, shared by the files that carry out the node
// agent's decisions (actor_reconciler.cc, checkpoint.cc, resume.cc, recovery.cc,
// status_writer.cc). Private to the node agent.
// Invariant: `before` is the actor as last read or written, `a` the copy being changed;
// WriteStatus sends their difference with before's resourceVersion as its precondition.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "api/field_error.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/clone_source.h"

namespace stasis {

struct ActorReconciler::Ctx {
  api::Actor before;  // as last read or written
  api::Actor a;       // the working copy; WriteStatus sends the difference
  SandboxRef ref;
  api::ActorRef actor_ref;
  std::string key;
  RuntimeDriver* driver = nullptr;  // the driver of spec.runtime
  bool wrote = false;    // an API write of this reconcile succeeded
  bool claimed = false;  // Resume claimed a worker
  bool through_intent = false;  // `a` is read through a resume's intent record (resume_intent.h)
  std::string bundle_root;  // the --bundle-root the bundle was confined to (bundle_confinement.h)
  Observation observed;  // what Decide sees
  std::vector<api::FieldError> spec_errors;  // what kValidateSpec found
  // What kListSnapshots found (Observation says only whether).
  std::optional<SnapshotManifest> newer_local;
  std::optional<SnapshotManifest> committed_by_transition;
  // An actor from an image: the image its sandbox starts or restores on (actor_image.cc), held
  // from eviction while this reconcile lives; and pull secrets it could not use.
  std::optional<images::LocalImage> image;
  // A clone without a snapshot of its own: the source's snapshot it restores (clone_source.h).
  std::optional<CloneSnapshot> clone;
  // The committed snapshot FetchBeforeClaim fetched and checked, its cached copy held from
  // eviction until the restore has opened it.
  std::optional<SnapshotStore::RestoreSource> restore_source;
  std::string start_kind = "boot";  // StartKind, for stasis_actor_start_seconds
  std::vector<std::string> pull_secret_problems;
};

// How a failed transition is reported and whether it is tried again (host_failures.cc).
struct ActorReconciler::FailureVerdict {
  std::string reason;     // the condition's: Host* for a host error, else the failure class's
  bool host = false;      // an error of the host (host_errors.h)
  bool permanent = false;  // a host error no retry can fix
  bool gave_up = false;   // not retried at this generation
  std::string note;       // put before the condition's message when it gave up
};

// Beside a sandbox's runsc root <root>/run/<id>: the file naming its actor ("<ns>/<name>"),
// so restart recovery can tell whose a sandbox is from its id alone.
inline constexpr char kOwnerSuffix[] = ".actor";

// An actor object as the API server returns it (a GET, a PATCH's answer), without the server's
// field-ownership records: most of the object, used by nothing here, and copied several times
// a reconcile (the informer's cache drops them for the same reason).
inline nlohmann::json WithoutManagedFields(nlohmann::json object) {
  if (auto meta = object.find("metadata"); meta != object.end() && meta->is_object()) meta->erase("managedFields");
  return object;
}

inline double Seconds(Clock::TimePoint::duration d) { return std::chrono::duration<double>(d).count(); }

// For cleanup whose failure changes no decision (a superseded snapshot, a leftover directory):
// one warning line, never silence.
inline void WarnIfFailed(const Status& s, const char* event, const std::string& key) {
  if (!s.ok()) spdlog::warn("{} actor={} error=\"{}\"", event, key, s.ToString());
}

// The GPU identity a manifest records (its model, driver and CUDA version; the device UUIDs
// stay in the manifest), as status and the placement rule compare it (api/gpu_identity.h).
inline api::GpuIdentity GpuTakenOn(const SnapshotManifest& m) {
  return {m.gpu.model, m.gpu.driver_version, m.gpu.cuda_version};
}

}  // namespace stasis
