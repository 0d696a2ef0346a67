#include "snapshots/data_dirs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "snapshots/tar_extract.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kIndexFile[] = "data-dirs.json";
constexpr char kUnusable[] = "data_dir_unusable";
constexpr char kArchiveFailed[] = "data_archive_failed";
constexpr char kRestoreFailed[] = "data_restore_failed";
constexpr char kCorrupt[] = "snapshot_corrupt";

long long Millis(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

// "/data/" and "/data/./x/.." are "/data".
std::string Normal(const std::string& p) {
  std::string s = fs::path(p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// Whether `path` is `base` or lies under it (both normal and absolute).
bool Within(const std::string& path, const std::string& base) {
  if (base == "/") return true;
  return path == base || (path.size() > base.size() && path.compare(0, base.size(), base) == 0 &&
                          path[base.size()] == '/');
}

bool IsBind(const nlohmann::json& mount) {
  if (mount.value("type", "") == "bind") return true;
  for (const auto& o : mount.value("options", nlohmann::json::array())) {
    if (o.is_string() && (o == "bind" || o == "rbind")) return true;
  }
  return false;
}

Status Unusable(const std::string& dir, const std::string& why) {
  return Status(Code::kInvalidArgument, "dataDir " + dir + " cannot be snapshotted: " + why, kUnusable);
}

Result<nlohmann::json> ReadMounts(const std::string& bundle) {
  std::ifstream in(fs::path(bundle) / "config.json");
  if (!in) return Status(Code::kInvalidArgument, "cannot read " + bundle + "/config.json", kUnusable);
  try {
    const auto spec = nlohmann::json::parse(in);
    return spec.value("mounts", nlohmann::json::array());
  } catch (const std::exception& e) {
    return Status(Code::kInvalidArgument, bundle + "/config.json: " + e.what(), kUnusable);
  }
}

Result<DataDir> Resolve(const std::string& bundle, const nlohmann::json& mounts,
                        const std::string& declared) {
  const std::string dir = Normal(declared);
  if (dir.empty() || dir.front() != '/') return Unusable(declared, "not an absolute path");
  // The innermost mount that holds the directory decides where its data lives.
  const nlohmann::json* best = nullptr;
  std::string best_dest;
  for (const auto& m : mounts) {
    if (!m.is_object() || !m.contains("destination") || !m["destination"].is_string()) continue;
    const std::string dest = Normal(m["destination"].get<std::string>());
    if (Within(dir, dest) && dest.size() >= best_dest.size()) {
      best = &m;
      best_dest = dest;
    }
  }
  if (!best) {
    return Unusable(dir, "no mount holds it: it is in the container's root filesystem, which a fresh boot does not keep");
  }
  if (!IsBind(*best)) {
    return Unusable(dir, "it is on the " + best->value("type", std::string("?")) + " mount at " + best_dest +
                             ", not a bind mount of a host directory");
  }
  fs::path source = best->value("source", "");
  if (source.empty()) return Unusable(dir, "the bind mount at " + best_dest + " has no source");
  if (source.is_relative()) source = fs::path(bundle) / source;
  std::error_code ec;
  const fs::path root = fs::canonical(source, ec);
  if (ec || !fs::is_directory(root, ec)) {
    return Unusable(dir, "the source " + source.string() + " of the bind mount at " + best_dest +
                             " is not a host directory");
  }
  const std::string rest = dir.substr(best_dest == "/" ? 1 : best_dest.size());
  const fs::path wanted = rest.empty() ? root : root / fs::path(rest).relative_path();
  const fs::path host = fs::canonical(wanted, ec);
  if (ec || !fs::is_directory(host, ec)) {
    return Unusable(dir, "its host directory " + wanted.string() + " does not exist or is not a directory");
  }
  if (!Within(host.string(), root.string())) {
    return Unusable(dir, "its host directory " + wanted.string() + " resolves to " + host.string() +
                             ", outside the bind mount's source " + root.string());
  }
  return DataDir{dir, host.string()};
}

std::string TarError(const CommandResult& r) {
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  const auto nl = err.rfind('\n');
  if (nl != std::string::npos) err = err.substr(nl + 1);
  return r.Summary().substr(0, r.Summary().find(':')) + (err.empty() ? "" : ": " + err);
}

}  // namespace

Result<std::vector<DataDir>> ResolveDataDirs(const std::string& bundle,
                                             const std::vector<std::string>& data_dirs) {
  if (data_dirs.empty()) {
    return Status(Code::kInvalidArgument, "a Data snapshot needs at least one dataDirs entry", kUnusable);
  }
  auto mounts = ReadMounts(bundle);
  if (!mounts.ok()) return mounts.status();
  std::vector<DataDir> out;
  for (const auto& d : data_dirs) {
    auto r = Resolve(bundle, *mounts, d);
    if (!r.ok()) return r.status();
    for (const auto& seen : out) {
      if (Within(r->host_path, seen.host_path) || Within(seen.host_path, r->host_path)) {
        return Unusable(r->container_path, "its host directory overlaps that of " + seen.container_path);
      }
    }
    out.push_back(*r);
  }
  return out;
}

Status ArchiveDataDirs(const std::vector<DataDir>& dirs, const std::string& image_dir,
                       std::chrono::milliseconds deadline) {
  const auto start = Clock::now();
  nlohmann::json index = nlohmann::json::array();
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string archive = "data-" + std::to_string(i) + ".tar";
    const auto left = deadline - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (left.count() <= 0) {
      return Status(Code::kInternal, "archiving the data directories took longer than the checkpoint deadline",
                    kArchiveFailed);
    }
    // Numeric owners: the container's uids mean nothing to this host's user database.
    auto r = RunCommand({"tar", "--create", "--file", (fs::path(image_dir) / archive).string(),
                         "--numeric-owner", "--directory", dirs[i].host_path, "."},
                        left);
    if (!r.ok() || !r->success()) {
      return Status(Code::kInternal,
                    "archiving dataDir " + dirs[i].container_path + " (" + dirs[i].host_path +
                        "): tar " + (r.ok() ? TarError(*r) : r.status().message()),
                    kArchiveFailed);
    }
    // What a restore would refuse (a symlink out of the directory, a device) fails the
    // checkpoint now, while the actor still runs, rather than leave a snapshot that cannot be
    // restored.
    if (Status s = ScanArchive((fs::path(image_dir) / archive).string()); !s.ok()) {
      return Status(Code::kInternal, "dataDir " + dirs[i].container_path + " cannot be archived: " + s.message(),
                    kArchiveFailed);
    }
    index.push_back({{"containerPath", dirs[i].container_path}, {"archive", archive},
                     {"hostPath", dirs[i].host_path}});
  }
  std::ofstream out(fs::path(image_dir) / kIndexFile);
  out << index.dump(2) << "\n";
  out.close();
  if (!out) {
    return Status(Code::kInternal, "cannot write " + image_dir + "/" + kIndexFile, kArchiveFailed);
  }
  spdlog::info("component=data_dirs op=archive dirs={} image={} duration_ms={}", dirs.size(),
               image_dir, Millis(start));
  return OkStatus();
}

namespace {

struct RestorePlan {
  std::string container_path, host_path, archive;
};

// Everything a restore can refuse, checked before anything is emptied: the index, each
// directory's mapping through the bundle (and under `confine_root`), each archive's members.
Result<std::vector<RestorePlan>> PlanRestore(const std::string& bundle, const std::string& image_dir,
                                             const std::string& confine_root) {
  nlohmann::json index;
  try {
    std::ifstream in(fs::path(image_dir) / kIndexFile);
    if (!in) throw std::runtime_error("missing");
    index = nlohmann::json::parse(in);
    if (!index.is_array()) throw std::runtime_error("not an array");
  } catch (const std::exception& e) {
    return Status(Code::kFailedPrecondition,
                  "Data snapshot " + image_dir + " has no usable " + kIndexFile + ": " + e.what(), kCorrupt);
  }
  auto mounts = ReadMounts(bundle);
  if (!mounts.ok()) return mounts.status();
  std::vector<RestorePlan> plan;
  for (const auto& entry : index) {
    const std::string container_path = entry.value("containerPath", "");
    const std::string archive = entry.value("archive", "");
    // The index is ours, but it is read from disk: an archive name is a plain file name.
    if (archive.empty() || archive.find('/') != std::string::npos || archive == "." || archive == "..") {
      return Status(Code::kFailedPrecondition, "Data snapshot " + image_dir + ": bad archive name \"" + archive + "\"",
                    kCorrupt);
    }
    auto dir = Resolve(bundle, *mounts, container_path);
    if (!dir.ok()) return dir.status();
    if (confine_root.empty() || !Within(dir->host_path, Normal(confine_root)) || dir->host_path == Normal(confine_root)) {
      return Unusable(container_path, "its host directory " + dir->host_path + " is not under the bundle's root " +
                                          confine_root);
    }
    const std::string path = (fs::path(image_dir) / archive).string();
    if (Status s = ScanArchive(path); !s.ok()) return s;
    plan.push_back({container_path, dir->host_path, path});
  }
  return plan;
}

}  // namespace

Status RestoreDataDirs(const std::string& bundle, const std::string& image_dir, const std::string& confine_root,
                       std::chrono::milliseconds deadline) {
  const auto start = Clock::now();
  auto plan = PlanRestore(bundle, image_dir, confine_root);
  if (!plan.ok()) return plan.status();
  for (const auto& p : *plan) {
    // The directory is the bind mount's source (or under it): its contents are replaced, the
    // directory itself stays (it may be a mount point on the host). remove_all removes a
    // symlink, never what it points to.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(p.host_path, ec)) {
      std::error_code rec;
      fs::remove_all(e.path(), rec);
      if (rec) {
        return Status(Code::kInternal, "emptying " + p.host_path + ": " + e.path().string() + ": " + rec.message(),
                      kRestoreFailed);
      }
    }
    if (ec) return Status(Code::kInternal, "emptying " + p.host_path + ": " + ec.message(), kRestoreFailed);
    if (Clock::now() - start > deadline) {
      return Status(Code::kInternal, "restoring the data directories took longer than the restore deadline",
                    kRestoreFailed);
    }
    if (Status s = ExtractArchive(p.archive, p.host_path); !s.ok()) {
      return Status(s.code(), "restoring dataDir " + p.container_path + ": " + s.message(), s.reason());
    }
  }
  spdlog::info("component=data_dirs op=restore dirs={} image={} duration_ms={}", plan->size(), image_dir,
               Millis(start));
  return OkStatus();
}

}  // namespace stasis
