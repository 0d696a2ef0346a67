#include "snapshots/object_store_gc.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <set>

#include "snapshots/manifest.h"
#include "snapshots/stored_manifest.h"
#include "snapshots/snapshot_names.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

// "<ns>/<name>/<id>/<rest>" split; nullopt unless the names are valid and <rest> is non-empty.
std::optional<std::array<std::string, 4>> SplitKey(std::string_view rel) {
  std::array<std::string, 4> parts;
  for (size_t i = 0; i < 3; ++i) {
    const size_t slash = rel.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    parts[i] = std::string(rel.substr(0, slash));
    rel.remove_prefix(slash + 1);
  }
  if (rel.empty() || !CheckNames(parts[0], parts[1], parts[2]).ok()) return std::nullopt;
  parts[3] = std::string(rel);
  return parts;
}

std::string Actor(const StoredSnapshot& s) { return s.ns + "/" + s.name; }

}  // namespace

std::vector<StoredSnapshot> GroupSnapshots(const std::vector<S3Object>& objects, const std::string& prefix) {
  using Id = std::array<std::string, 3>;
  std::map<Id, StoredSnapshot> by_prefix;
  std::set<Id> timeless;  // an object without a time: the snapshot is never past the grace
  for (const S3Object& o : objects) {
    if (o.key.compare(0, prefix.size(), prefix) != 0) continue;
    auto parts = SplitKey(std::string_view(o.key).substr(prefix.size()));
    if (!parts) continue;
    const Id id{(*parts)[0], (*parts)[1], (*parts)[2]};
    StoredSnapshot& s = by_prefix[id];
    s.ns = id[0];
    s.name = id[1];
    s.id = id[2];
    if (o.last_modified == Time{}) {
      timeless.insert(id);
    } else if (s.keys.empty() || o.last_modified > s.newest) {
      s.newest = o.last_modified;
    }
    s.keys.push_back(o.key);
    if ((*parts)[3] == kManifestFile) s.has_manifest = true;
  }
  for (const Id& id : timeless) by_prefix[id].newest = Time{};
  std::vector<StoredSnapshot> out;
  out.reserve(by_prefix.size());
  for (auto& [_, s] : by_prefix) out.push_back(std::move(s));
  return out;
}

bool PastGrace(Time t, Time now, std::chrono::seconds grace) { return t != Time{} && t + grace <= now; }

GcPlan PlanObjectStoreGc(const std::vector<StoredSnapshot>& snapshots, const LiveActors& live,
                         const std::vector<MultipartUpload>& uploads, Time now, std::chrono::seconds grace) {
  GcPlan plan;
  for (size_t i = 0; i < snapshots.size(); ++i) {
    const StoredSnapshot& s = snapshots[i];
    if (!PastGrace(s.newest, now, grace)) continue;
    if (!s.has_manifest) {
      plan.snapshots.push_back({i, kGcIncomplete});
      continue;
    }
    auto actor = live.find({s.ns, s.name});
    if (actor == live.end()) {
      plan.snapshots.push_back({i, kGcActorGone});
    } else if (s.owner_uid && !s.owner_uid->empty() && *s.owner_uid != actor->second) {
      plan.snapshots.push_back({i, kGcOwnerReplaced});
    }
  }
  for (const MultipartUpload& u : uploads) {
    if (PastGrace(u.initiated, now, grace)) plan.uploads.push_back(u);
  }
  return plan;
}

ObjectStoreGc::ObjectStoreGc(S3Client& client, S3Location location, std::chrono::seconds grace,
                             const EncryptionKey* key)
    : client_(client), location_(std::move(location)), grace_(grace), key_(key) {}

Result<std::vector<MultipartUpload>> ObjectStoreGc::ListUploads() {
  std::vector<MultipartUpload> all;
  std::string key_marker, id_marker;
  for (;;) {
    auto page = client_.ListMultipartUploads(location_.prefix, key_marker, id_marker);
    if (!page.ok()) return page.status();
    all.insert(all.end(), page->uploads.begin(), page->uploads.end());
    if (!page->truncated) return all;
    if (page->next_key_marker.empty() && page->next_upload_id_marker.empty()) {
      return Status(Code::kInternal, "a truncated multipart-upload listing without a marker",
                    snapshot_reason::kStoreRequestRejected);
    }
    key_marker = page->next_key_marker;
    id_marker = page->next_upload_id_marker;
  }
}

void ObjectStoreGc::ReadOwners(std::vector<StoredSnapshot>& snapshots, const LiveActors& live, Time now) {
  for (StoredSnapshot& s : snapshots) {
    // Only a complete snapshot, past the grace, of an actor that exists turns on its owner.
    if (!s.has_manifest || !PastGrace(s.newest, now, grace_) || !live.count({s.ns, s.name})) continue;
    const std::string key = location_.prefix + s.ns + "/" + s.name + "/" + s.id + "/" + kManifestFile;
    auto text = client_.GetObject(key);
    if (!text.ok()) continue;  // unread: kept (PlanObjectStoreGc)
    auto m = ParseStoredManifest(*text, key_, s.ns + "/" + s.name + "/" + s.id,
                                 std::string(kS3Scheme) + location_.bucket + "/" + key);
    if (m.ok() && m->ns == s.ns && m->name == s.name && m->id == s.id) {
      s.owner_uid = m->owner_uid;
    } else if (!m.ok()) {
      spdlog::warn("component=gc op=read_manifest actor={} snapshot={} result=kept error=\"{}\"", Actor(s), s.id,
                   m.status().ToString());
    }
  }
}

Status ObjectStoreGc::StillAbandoned(const StoredSnapshot& s, Time now) {
  // A commit retried under the same id (its first attempt failed and could not clean up)
  // writes the same keys again: listed afresh, its new objects are young, or its manifest is
  // there. Only what is still all old and manifest-less goes.
  const std::string prefix = location_.prefix + s.ns + "/" + s.name + "/" + s.id + "/";
  auto again = client_.ListAllObjects(prefix);
  if (!again.ok()) return again.status();
  auto groups = GroupSnapshots(*again, location_.prefix);
  if (groups.size() == 1 && !groups[0].has_manifest && PastGrace(groups[0].newest, now, grace_)) return OkStatus();
  return Status(Code::kAborted, "written again since the listing (a put under way)", snapshot_reason::kStoreRequestRejected);
}

Status ObjectStoreGc::DeleteSnapshot(const StoredSnapshot& s, Time now) {
  const std::string manifest = location_.prefix + s.ns + "/" + s.name + "/" + s.id + "/" + kManifestFile;
  if (s.has_manifest) {
    // The manifest first: from then on the snapshot no longer looks committed to anyone.
    if (Status d = client_.DeleteObject(manifest); !d.ok()) return d;
  } else if (Status still = StillAbandoned(s, now); !still.ok()) {
    return still;
  }
  for (const std::string& key : s.keys) {
    if (key == manifest) continue;
    if (Status d = client_.DeleteObject(key); !d.ok()) return d;
  }
  return OkStatus();
}

Result<ObjectStoreGc::Report> ObjectStoreGc::RunOnce(const std::function<Result<LiveActors>()>& list_actors,
                                                     Time now) {
  // The store first, the actors second (header): never the other way round.
  auto objects = client_.ListAllObjects(location_.prefix);
  if (!objects.ok()) return objects.status();
  auto uploads = ListUploads();
  if (!uploads.ok()) {
    // Object GC goes on; no upload is aborted on a listing we could not finish.
    spdlog::warn("component=gc op=list_uploads store=s3://{}/{} result=error error=\"{}\"", location_.bucket,
                 location_.prefix, uploads.status().message());
  }
  auto live = list_actors();
  if (!live.ok()) return live.status();
  std::vector<StoredSnapshot> snapshots = GroupSnapshots(*objects, location_.prefix);
  ReadOwners(snapshots, *live, now);
  const GcPlan plan = PlanObjectStoreGc(snapshots, *live, uploads.ok() ? *uploads : std::vector<MultipartUpload>{},
                                        now, grace_);
  Report report;
  report.snapshots_seen = static_cast<int>(snapshots.size());
  for (const GcDeletion& d : plan.snapshots) {
    const StoredSnapshot& s = snapshots[d.snapshot];
    const long long age_s = std::chrono::duration_cast<std::chrono::seconds>(now - s.newest).count();
    if (Status st = DeleteSnapshot(s, now); st.code() == Code::kAborted) {
      ++report.kept;  // written again since the listing: not abandoned after all
      spdlog::info("component=gc op=delete actor={} snapshot={} reason={} result=kept why=\"{}\"", Actor(s), s.id,
                   d.reason, st.message());
      continue;
    } else if (!st.ok()) {
      ++report.failed;
      spdlog::warn("component=gc op=delete actor={} snapshot={} reason={} age_s={} result=error error=\"{}\"", Actor(s),
                   s.id, d.reason, age_s, st.message());
      continue;
    }
    ++report.deleted[d.reason];
    spdlog::info("component=gc op=delete actor={} snapshot={} reason={} objects={} age_s={} owner_uid={} result=ok",
                 Actor(s), s.id, d.reason, s.keys.size(), age_s, s.owner_uid.value_or("-"));
  }
  for (const MultipartUpload& u : plan.uploads) {
    if (Status st = client_.AbortMultipartUpload(u.key, u.upload_id); !st.ok()) {
      ++report.failed;
      spdlog::warn("component=gc op=abort_upload key={} upload_id={} result=error error=\"{}\"", u.key, u.upload_id,
                   st.message());
      continue;
    }
    ++report.deleted[kGcMultipartUpload];
    spdlog::info("component=gc op=abort_upload key={} upload_id={} initiated={} result=ok", u.key, u.upload_id,
                 FormatTime(u.initiated));
  }
  return report;
}

}  // namespace stasis
