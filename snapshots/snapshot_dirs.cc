#include "snapshots/snapshot_dirs.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "snapshots/file_io.h"
#include "snapshots/snapshot_names.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;

Status RemoveError(const std::string& op, const fs::path& path, const std::error_code& ec) {
  return Status(Code::kInternal, op + " " + path.string() + ": " + ec.message(), kIoError);
}

// The *.partial entries of one actor's directory.
std::vector<fs::path> PartialsIn(const fs::path& actor_dir) {
  std::vector<fs::path> partials;
  std::error_code ec;
  for (const auto& snap : fs::directory_iterator(actor_dir, ec)) {
    if (IsPartialName(snap.path().filename().string())) partials.push_back(snap.path());
  }
  return partials;
}

}  // namespace

std::vector<SnapshotManifest> ListSnapshots(const std::string& root, const std::string& ns,
                                            const std::string& name) {
  std::vector<SnapshotManifest> out;
  if (root.empty() || !CheckNames(ns, name).ok()) return out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(ActorDir(root, ns, name), ec)) {
    const std::string id = entry.path().filename().string();
    if (!entry.is_directory(ec) || !IsSnapshotId(id)) continue;
    auto m = ReadManifest(entry.path());
    if (m.ok() && m->id == id) out.push_back(std::move(*m));
  }
  std::sort(out.begin(), out.end(), [](const SnapshotManifest& a, const SnapshotManifest& b) {
    return a.taken_at != b.taken_at ? a.taken_at < b.taken_at : a.id < b.id;
  });
  return out;
}

Status RemoveSnapshotDir(const fs::path& parent, const std::string& id) {
  std::error_code ec;
  const fs::path dir = parent / id;
  const fs::path partial = parent / (id + kPartialSuffix);
  fs::remove_all(partial, ec);
  if (ec) return RemoveError("remove", partial, ec);
  if (fs::exists(dir, ec)) {
    fs::rename(dir, partial, ec);
    if (ec) return RemoveError("rename", dir, ec);
    (void)FsyncPath(parent);
    fs::remove_all(partial, ec);
    if (ec) return RemoveError("remove", partial, ec);
  }
  return OkStatus();
}

Status RemoveActorDir(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> ids;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string id = entry.path().filename().string();
    if (IsSnapshotId(id)) ids.push_back(id);
  }
  for (const auto& id : ids) {
    if (Status s = RemoveSnapshotDir(dir, id); !s.ok()) return s;
  }
  fs::remove_all(dir, ec);
  if (ec) return RemoveError("remove", dir, ec);
  return OkStatus();
}

int RemovePartialsUnder(const std::string& root) {
  int removed = 0;
  if (root.empty()) return 0;
  std::error_code ec;
  // The layout is fixed: <root>/<ns>/<name>/<id>.partial.
  for (const auto& ns : fs::directory_iterator(root, ec)) {
    if (!ns.is_directory(ec)) continue;
    for (const auto& actor : fs::directory_iterator(ns.path(), ec)) {
      if (!actor.is_directory(ec)) continue;
      for (const auto& p : PartialsIn(actor.path())) {
        std::error_code rec;
        fs::remove_all(p, rec);
        if (rec) {
          spdlog::warn("component=snapshots op=remove_partial path={} result=error error=\"{}\"",
                       p.string(), rec.message());
          continue;
        }
        spdlog::info("component=snapshots op=remove_partial path={} result=ok", p.string());
        ++removed;
      }
    }
  }
  return removed;
}

std::vector<std::pair<std::string, std::string>> ActorsUnder(const std::string& root) {
  std::vector<std::pair<std::string, std::string>> out;
  if (root.empty()) return out;
  std::error_code ec;
  for (const auto& ns : fs::directory_iterator(root, ec)) {
    if (!ns.is_directory(ec)) continue;
    for (const auto& actor : fs::directory_iterator(ns.path(), ec)) {
      const std::string n = ns.path().filename().string(), a = actor.path().filename().string();
      if (actor.is_directory(ec) && CheckNames(n, a).ok()) out.emplace_back(n, a);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace stasis
