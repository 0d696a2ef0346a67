// Garbage collection of an object store of snapshots (object_store_backend.h's layout:
// <prefix><ns>/<name>/<id>/chunks/… and …/<id>/manifest.json, put last). What it removes:
//  - incomplete: a snapshot's objects without a manifest (a put that failed and could not clean
//    up, or a node that died mid-put);
//  - actor_gone: a complete snapshot of an actor (ns/name) that no longer exists;
//  - owner_replaced: a complete snapshot whose manifest names another owner uid than the actor
//    of that name now (an earlier actor of the same name: a restore would refuse it anyway);
//  - multipart uploads begun under the prefix and neither completed nor aborted.
//
// Invariants:
//  - Nothing is deleted unless every object under the prefix is older than the grace period,
//    by the store's own LastModified (or Initiated) clock against the controller's: a put in
//    progress writes an object at least every chunk, so its newest object is young. The grace
//    must exceed the longest a put can stall between two objects (the S3 client's retry budget)
//    plus the clock skew between the store and the controller.
//  - A listing that failed on any page is an error, never read as "nothing there"; a manifest
//    that cannot be read keeps its snapshot; a manifest without an owner uid (an older agent)
//    is kept while an actor of its name exists.
//  - The store is listed before the actors are (as retention does): a snapshot committed after
//    the listing is not in it, and the actor of one committed before it is in the actor list.
//  - Keys that are not <ns>/<name>/<id>/… with valid names (the write probe, foreign objects)
//    are never touched.
//  - An incomplete snapshot is listed again just before its deletion and kept if anything of it
//    is young now or its manifest arrived (a commit retried under the same id). A retry that
//    starts in the milliseconds between that listing and the deletions can still lose chunks;
//    its manifest then names chunks that are missing, which a restore refuses (snapshot_corrupt).
//  - A complete snapshot loses its manifest first: from then on nothing reads it as committed.
//
// PlanObjectStoreGc is the decision, pure; ObjectStoreGc is the edge that lists, reads and deletes.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "snapshots/encryption_key.h"
#include "snapshots/s3_client.h"
#include "snapshots/s3_location.h"

namespace stasis {

// Why garbage collection deletes something (also the reason label of the deletions metric).
inline constexpr char kGcIncomplete[] = "incomplete";
inline constexpr char kGcActorGone[] = "actor_gone";
inline constexpr char kGcOwnerReplaced[] = "owner_replaced";
inline constexpr char kGcMultipartUpload[] = "multipart_upload";

// The actors that exist: (namespace, name) → metadata.uid.
using LiveActors = std::map<std::pair<std::string, std::string>, std::string>;

// One snapshot prefix of the listing, <prefix><ns>/<name>/<id>/.
struct StoredSnapshot {
  std::string ns, name, id;
  std::vector<std::string> keys;  // every object under it, the manifest's included
  Time newest{};                  // the newest LastModified; Time{} when one had none
  bool has_manifest = false;
  // The manifest's owner uid once read ("" when it records none); nullopt when not read.
  std::optional<std::string> owner_uid;
};

// Groups a listing of everything under `prefix` by snapshot; other keys are left out.
std::vector<StoredSnapshot> GroupSnapshots(const std::vector<S3Object>& objects, const std::string& prefix);

struct GcDeletion {
  size_t snapshot = 0;  // index into the snapshots planned over
  std::string reason;   // kGc*
};
struct GcPlan {
  std::vector<GcDeletion> snapshots;
  std::vector<MultipartUpload> uploads;  // to abort
};

// Whether a snapshot or upload last written at `t` is past the grace period at `now`. Time{}
// (no time in the listing) never is.
bool PastGrace(Time t, Time now, std::chrono::seconds grace);

// What to delete (see the header's invariants). A snapshot of a live actor with an unread
// manifest (owner_uid nullopt) is kept.
GcPlan PlanObjectStoreGc(const std::vector<StoredSnapshot>& snapshots, const LiveActors& live,
                         const std::vector<MultipartUpload>& uploads, Time now, std::chrono::seconds grace);

class ObjectStoreGc {
 public:
  // `key` (nullptr: none) opens sealed manifests; a snapshot whose manifest it cannot open
  // keeps its owner unknown, and so is kept.
  ObjectStoreGc(S3Client& client, S3Location location, std::chrono::seconds grace, const EncryptionKey* key = nullptr);

  struct Report {
    std::map<std::string, int> deleted;  // reason → snapshots (or uploads) deleted
    int failed = 0;                      // deletions that failed (logged; tried again next pass)
    int kept = 0;                        // planned, but written again when listed afresh
    int snapshots_seen = 0;
  };
  // One pass: list the store, then the actors (list_actors: a quorum read), read the manifests
  // that decide an owner, delete what PlanObjectStoreGc selects. An error from either listing
  // ends the pass before anything is deleted.
  Result<Report> RunOnce(const std::function<Result<LiveActors>()>& list_actors, Time now);

  std::chrono::seconds grace() const { return grace_; }

 private:
  // Every upload under the prefix, page after page; an error when any page failed.
  Result<std::vector<MultipartUpload>> ListUploads();
  // Reads the owner uid of every snapshot that PlanObjectStoreGc needs it for.
  void ReadOwners(std::vector<StoredSnapshot>& snapshots, const LiveActors& live, Time now);
  // OK when the incomplete snapshot `s`, listed again now, is still all past the grace and
  // without a manifest.
  [[nodiscard]] Status StillAbandoned(const StoredSnapshot& s, Time now);
  [[nodiscard]] Status DeleteSnapshot(const StoredSnapshot& s, Time now);

  S3Client& client_;
  S3Location location_;
  std::chrono::seconds grace_;
  const EncryptionKey* key_;
};

}  // namespace stasis
