#include "snapshots/manifest.h"

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "snapshots/file_io.h"
#include "base/sha256.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kSnapshotCorrupt;
using snapshot_reason::kSnapshotNotFound;
using snapshot_reason::kSnapshotOwnerMismatch;

nlohmann::json FileToJson(const SnapshotManifest& m, const SnapshotFile& f) {
  nlohmann::json j = {{"path", f.path}, {"size", f.size}};
  if (m.format == kManifestFormatWholeFile) {
    j["sha256"] = f.sha256;
  } else {
    j["chunks"] = f.chunks;
  }
  return j;
}

nlohmann::json ManifestToJson(const SnapshotManifest& m) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : m.files) files.push_back(FileToJson(m, f));
  nlohmann::json j = {{"formatVersion", m.format},
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
  if (m.format == kManifestFormatChunked) {
    j["chunkBytes"] = m.chunk_bytes;
    if (!m.checksums_pending) j["chunkListSha256"] = m.chunk_list_sha256;
  }
  if (!m.owner_uid.empty()) j["ownerUid"] = m.owner_uid;
  if (!m.image_digest.empty()) j["imageDigest"] = m.image_digest;
  if (m.gpu_fast_snapshot) j["gpuFastSnapshot"] = true;
  if (m.gpu != SnapshotGpu{}) {
    j["gpu"] = {{"model", m.gpu.model},
                {"driverVersion", m.gpu.driver_version},
                {"cudaVersion", m.gpu.cuda_version},
                {"devices", m.gpu.devices}};
  }
  if (!m.deferred_sync_boot_id.empty()) j["deferredSyncBootId"] = m.deferred_sync_boot_id;
  if (m.checksums_pending) j["checksumsPending"] = true;
  // Written only when set: a manifest of an untransformed snapshot reads as it always did.
  if (m.compression != Compression::kNone) j["compression"] = CompressionName(m.compression);
  if (m.encryption != Encryption::kNone) j["encryption"] = EncryptionName(m.encryption);
  if (!m.key_id.empty()) j["keyId"] = m.key_id;
  return j;
}

// One entry of "files"; its digests may be absent only while they are pending.
SnapshotFile FileFromJson(const nlohmann::json& f, const SnapshotManifest& m) {
  SnapshotFile file{f.at("path").get<std::string>(), f.at("size").get<int64_t>(), {}, ""};
  if (m.format == kManifestFormatWholeFile) {
    file.sha256 = m.checksums_pending ? f.value("sha256", "") : f.at("sha256").get<std::string>();
  } else if (!m.checksums_pending || f.contains("chunks")) {
    file.chunks = f.at("chunks").get<std::vector<std::string>>();
  }
  return file;
}

// The stored copy's transform; a name this code does not know throws std::invalid_argument (a
// newer stasis's codec: decoding it as another would restore garbage).
void ReadTransform(const nlohmann::json& j, SnapshotManifest& m) {
  const std::string compression = j.value("compression", "none");
  const std::string encryption = j.value("encryption", "none");
  const auto c = CompressionFromName(compression);
  const auto e = EncryptionFromName(encryption);
  if (!c) throw std::invalid_argument("compression \"" + compression + "\" is not one this stasis reads (none, zstd)");
  if (!e) throw std::invalid_argument("encryption \"" + encryption + "\" is not one this stasis reads (none, aes-256-gcm)");
  m.compression = *c;
  m.encryption = *e;
  m.key_id = j.value("keyId", "");
}

// Throws nlohmann's exceptions on a missing or mistyped field, std::invalid_argument on a
// format this code does not know; the caller turns them into a Status.
SnapshotManifest ManifestFromJson(const nlohmann::json& j) {
  SnapshotManifest m;
  m.format = j.value("formatVersion", kManifestFormatWholeFile);
  if (m.format != kManifestFormatWholeFile && m.format != kManifestFormatChunked) {
    throw std::invalid_argument("formatVersion " + std::to_string(m.format) +
                                " is not one this stasis reads (1, 2): written by a newer version?");
  }
  m.id = j.at("id").get<std::string>();
  m.ns = j.at("namespace").get<std::string>();
  m.name = j.at("name").get<std::string>();
  m.owner_uid = j.value("ownerUid", "");
  m.scope = j.value("scope", "");
  m.trigger = j.value("trigger", "");
  m.runtime_version = j.value("runtimeVersion", "");
  m.image_digest = j.value("imageDigest", "");
  m.cuda_checkpointed = j.value("cudaCheckpointed", false);
  m.gpu_fast_snapshot = j.value("gpuFastSnapshot", false);
  if (j.contains("gpu")) {
    const nlohmann::json& g = j.at("gpu");
    m.gpu = {g.value("model", ""), g.value("driverVersion", ""), g.value("cudaVersion", ""),
             g.value("devices", std::vector<std::string>{})};
  }
  m.taken_at = j.value("takenAt", "");
  m.duration_seconds = j.value("durationSeconds", 0.0);
  m.total_bytes = j.value("totalBytes", int64_t{0});
  m.deferred_sync_boot_id = j.value("deferredSyncBootId", "");
  m.checksums_pending = j.value("checksumsPending", false);
  if (m.format == kManifestFormatChunked) {
    m.chunk_bytes = j.at("chunkBytes").get<int64_t>();
    m.chunk_list_sha256 = j.value("chunkListSha256", "");
  }
  ReadTransform(j, m);
  for (const auto& f : j.at("files")) m.files.push_back(FileFromJson(f, m));
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

}  // namespace

std::string ManifestText(const SnapshotManifest& m) { return ManifestToJson(m).dump(2) + "\n"; }

Status SnapshotCorruptError(const fs::path& dir, const std::string& why) {
  return Status(Code::kFailedPrecondition, "snapshot " + dir.string() + ": " + why, kSnapshotCorrupt);
}

std::string ChunkListSha256(const std::vector<SnapshotFile>& files) {
  Sha256 hash;
  for (const auto& f : files) {
    const std::string head = f.path + "\n" + std::to_string(f.size) + "\n";
    hash.Update(head.data(), head.size());
    for (const auto& c : f.chunks) {
      hash.Update(c.data(), c.size());
      hash.Update("\n", 1);
    }
  }
  return hash.FinishHex();
}

void SetChunkDigests(SnapshotManifest& m, const std::vector<ChunkedDigest>& digests) {
  m.format = kManifestFormatChunked;
  m.total_bytes = 0;
  for (size_t i = 0; i < m.files.size() && i < digests.size(); ++i) {
    m.files[i].size = digests[i].size;
    m.files[i].chunks = digests[i].chunks;
    m.files[i].sha256.clear();
    m.total_bytes += digests[i].size;
  }
  m.chunk_list_sha256 = ChunkListSha256(m.files);
}

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
  const std::string text(std::istreambuf_iterator<char>(in), {});
  return ParseManifest(text, path.string());
}

Result<SnapshotManifest> ParseManifest(const std::string& text, const std::string& where) {
  try {
    return ManifestFromJson(nlohmann::json::parse(text));
  } catch (const std::exception& e) {
    return Status(Code::kFailedPrecondition, "snapshot manifest " + where + " is invalid: " + e.what(),
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
    return SnapshotCorruptError(dir, "manifest names " + m.ns + "/" + m.name + "/" + m.id);
  }
  return OkStatus();
}

Status CheckManifestPaths(const fs::path& dir, const SnapshotManifest& m) {
  for (const auto& f : m.files) {
    if (!IsSafeRelativePath(f.path) || f.path == kManifestFile) {
      return SnapshotCorruptError(dir, "manifest lists an unsafe path \"" + f.path + "\"");
    }
  }
  return OkStatus();
}

Status CheckManifestOwner(const fs::path& dir, const SnapshotManifest& m, const std::string& uid) {
  if (m.owner_uid.empty() || m.owner_uid == uid) return OkStatus();
  return Status(Code::kFailedPrecondition,
                "snapshot " + dir.string() + " was taken of actor uid " + m.owner_uid + ", not of this actor (uid " +
                    uid + "): an earlier actor of the same name",
                kSnapshotOwnerMismatch);
}

}  // namespace stasis
