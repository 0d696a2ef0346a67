#include "snapshots/manifest.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "snapshots/file_io.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kSnapshotCorrupt;
using snapshot_reason::kSnapshotNotFound;
using snapshot_reason::kSnapshotOwnerMismatch;

constexpr int kManifestFormat = 1;

nlohmann::json ManifestToJson(const SnapshotManifest& m) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : m.files)
    files.push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  nlohmann::json j = {{"formatVersion", kManifestFormat},
          {"id", m.id},
          {"namespace", m.ns},
          {"name", m.name},
          {"scope", m.scope},
          {"trigger", m.trigger},
          {"runtimeVersion", m.runtime_version},
          {"cudaCheckpointed", m.cuda_checkpointed},
          {"takenAt", m.taken_at},
          {"durationSeconds", m.duration_seconds},
          {"totalBytes", m.total_bytes},
          {"files", files}};
  if (!m.owner_uid.empty()) j["ownerUid"] = m.owner_uid;
  if (!m.deferred_sync_boot_id.empty()) j["deferredSyncBootId"] = m.deferred_sync_boot_id;
  if (m.checksums_pending) j["checksumsPending"] = true;
  return j;
}

// Throws nlohmann's exceptions on a missing or mistyped field; the caller turns them into a
// Status.
SnapshotManifest ManifestFromJson(const nlohmann::json& j) {
  SnapshotManifest m;
  m.id = j.at("id").get<std::string>();
  m.ns = j.at("namespace").get<std::string>();
  m.name = j.at("name").get<std::string>();
  m.owner_uid = j.value("ownerUid", "");
  m.scope = j.value("scope", "");
  m.trigger = j.value("trigger", "");
  m.runtime_version = j.value("runtimeVersion", "");
  m.cuda_checkpointed = j.value("cudaCheckpointed", false);
  m.taken_at = j.value("takenAt", "");
  m.duration_seconds = j.value("durationSeconds", 0.0);
  m.total_bytes = j.value("totalBytes", int64_t{0});
  m.deferred_sync_boot_id = j.value("deferredSyncBootId", "");
  m.checksums_pending = j.value("checksumsPending", false);
  for (const auto& f : j.at("files")) {
    m.files.push_back({f.at("path").get<std::string>(), f.at("size").get<int64_t>(),
                       m.checksums_pending ? f.value("sha256", "") : f.at("sha256").get<std::string>()});
  }
  return m;
}

// A path from a manifest: relative, normal, and inside the snapshot directory.
bool IsSafeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : fs::path(p)) {
    const std::string s = part.string();
    if (s.empty() || s == "." || s == "..") return false;
  }
  return true;
}

Status Corrupt(const fs::path& dir, const std::string& why) {
  return Status(Code::kFailedPrecondition, "snapshot " + dir.string() + ": " + why,
                kSnapshotCorrupt);
}

// One listed file against the disk: present, same size, same sha256.
Status VerifyFile(const fs::path& dir, const SnapshotFile& f) {
  const fs::path file = dir / f.path;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(file, ec))) return Corrupt(dir, f.path + " is missing");
  auto digest = HashFile(file);
  if (!digest.ok()) return digest.status();
  if (digest->size != f.size) {
    return Corrupt(dir, f.path + " has " + std::to_string(digest->size) + " bytes, manifest says " +
                            std::to_string(f.size));
  }
  if (digest->sha256 != f.sha256) {
    return Corrupt(dir, f.path + " sha256 " + digest->sha256 + " does not match the manifest's " +
                            f.sha256);
  }
  return OkStatus();
}

}  // namespace

std::string ManifestText(const SnapshotManifest& m) { return ManifestToJson(m).dump(2) + "\n"; }

Result<SnapshotManifest> ReadManifest(const fs::path& dir) {
  const fs::path path = dir / kManifestFile;
  std::ifstream in(path);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      return Status(Code::kNotFound, "no snapshot at " + dir.string(), kSnapshotNotFound);
    }
    return Status(Code::kFailedPrecondition,
                  "snapshot " + dir.string() + " has no readable manifest", kSnapshotCorrupt);
  }
  try {
    return ManifestFromJson(nlohmann::json::parse(in));
  } catch (const std::exception& e) {
    return Status(Code::kFailedPrecondition,
                  "snapshot manifest " + path.string() + " is invalid: " + e.what(),
                  kSnapshotCorrupt);
  }
}

Status WriteManifest(const fs::path& dir, const SnapshotManifest& m, bool sync) {
  std::error_code ec;
  fs::remove(dir / kManifestFile, ec);
  return WriteNewFile(dir / kManifestFile, ManifestText(m), sync);
}

Status ReplaceManifest(const fs::path& dir, const SnapshotManifest& m) {
  const fs::path tmp = dir / (std::string(kManifestFile) + ".tmp");
  std::error_code ec;
  fs::remove(tmp, ec);
  if (Status s = WriteNewFile(tmp, ManifestText(m), /*sync=*/true); !s.ok()) return s;
  fs::rename(tmp, dir / kManifestFile, ec);
  if (ec) return Status(Code::kInternal, "rename " + tmp.string() + ": " + ec.message(), kIoError);
  return OkStatus();
}

Status CheckManifestNames(const fs::path& dir, const SnapshotManifest& m, const std::string& ns,
                          const std::string& name, const std::string& id) {
  if (m.id != id || m.ns != ns || m.name != name) {
    return Corrupt(dir, "manifest names " + m.ns + "/" + m.name + "/" + m.id);
  }
  return OkStatus();
}

Status CheckManifestPaths(const fs::path& dir, const SnapshotManifest& m) {
  for (const auto& f : m.files) {
    if (!IsSafeRelativePath(f.path) || f.path == kManifestFile) {
      return Corrupt(dir, "manifest lists an unsafe path \"" + f.path + "\"");
    }
  }
  return OkStatus();
}

namespace {

// Verifies every listed file, `threads` files at a time; the first failure in the manifest's
// order is returned, so the answer does not depend on which thread finished first.
Status VerifyFiles(const fs::path& dir, const std::vector<SnapshotFile>& files, int threads) {
  std::vector<Status> results(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) results[i] = VerifyFile(dir, files[i]);
  };
  const size_t n = std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1, files.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& r : results) {
    if (!r.ok()) return r;
  }
  return OkStatus();
}

}  // namespace

Result<SnapshotManifest> VerifySnapshotDir(const fs::path& dir, const std::string& ns,
                                           const std::string& name, const std::string& id, int threads) {
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (Status s = CheckManifestNames(dir, *manifest, ns, name, id); !s.ok()) return s;
  if (manifest->checksums_pending) {
    return Corrupt(dir, "its checksums were never computed (completed without them in boot " +
                            manifest->deferred_sync_boot_id +
                            "; the node rebooted before they were): unverifiable");
  }
  if (Status s = CheckManifestPaths(dir, *manifest); !s.ok()) return s;
  int64_t total = 0;
  for (const auto& f : manifest->files) total += f.size;
  if (total != manifest->total_bytes) return Corrupt(dir, "file sizes do not add up to totalBytes");
  if (manifest->files.empty()) return manifest;
  if (Status s = VerifyFiles(dir, manifest->files, threads); !s.ok()) return s;
  return manifest;
}

Status CheckManifestOwner(const fs::path& dir, const SnapshotManifest& m, const std::string& uid) {
  if (m.owner_uid.empty() || m.owner_uid == uid) return OkStatus();
  return Status(Code::kFailedPrecondition,
                "snapshot " + dir.string() + " was taken of actor uid " + m.owner_uid + ", not of this actor (uid " +
                    uid + "): an earlier actor of the same name",
                kSnapshotOwnerMismatch);
}

}  // namespace stasis
