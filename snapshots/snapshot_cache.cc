#include "snapshots/snapshot_cache.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "snapshots/manifest.h"
#include "snapshots/snapshot_dirs.h"
#include "snapshots/snapshot_names.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using std::chrono::system_clock;

bool IsDirectoryNoFollow(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() == fs::file_type::directory;
}

// The bytes of the regular files under `dir`, symlinks not followed: what the entry holds on
// this disk. A download's files are created at their full size, so an entry in flight counts
// what it will hold.
int64_t BytesUnder(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code sec;
    if (it->symlink_status(sec).type() != fs::file_type::regular) continue;
    const auto size = it->file_size(sec);
    if (!sec) total += static_cast<int64_t>(size);
  }
  return total;
}

// The manifest's mtime: the entry's last use (Touch), or its download.
system_clock::time_point LastUse(const fs::path& dir) {
  struct stat st {};
  if (lstat((dir / kManifestFile).c_str(), &st) != 0) return {};
  const auto since_epoch = std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
  return system_clock::time_point(std::chrono::duration_cast<system_clock::duration>(since_epoch));
}

// Whether `dir` is a complete cached copy of <ns>/<name>/<id>: the only state eviction acts on.
bool IsCompleteCopy(const fs::path& dir, const std::string& ns, const std::string& name, const std::string& id) {
  if (!IsSnapshotId(id) || !IsDirectoryNoFollow(dir)) return false;
  auto m = ReadManifest(dir);
  return m.ok() && m->ns == ns && m->name == name && m->id == id;
}

// One holder of a key; the last one gone releases it. Never copied or moved: each object is
// one count (a moved-from temporary would release a hold still in use).
template <typename Holds>
struct HoldToken {
  HoldToken(std::shared_ptr<Holds> h, std::string k) : holds(std::move(h)), key(std::move(k)) {}
  HoldToken(const HoldToken&) = delete;
  HoldToken& operator=(const HoldToken&) = delete;
  std::shared_ptr<Holds> holds;
  std::string key;
  ~HoldToken() {
    std::lock_guard lock(holds->mu);
    if (auto it = holds->count.find(key); it != holds->count.end() && --it->second == 0) holds->count.erase(it);
  }
};

}  // namespace

SnapshotCache::SnapshotCache(std::string root, int64_t bound_bytes, TransferObserver* observer)
    : root_(std::move(root)), bound_bytes_(bound_bytes), observer_(observer) {}

std::shared_ptr<const void> SnapshotCache::Hold(const std::string& ns, const std::string& name, const std::string& id) {
  std::string key = ns + "/" + name + "/" + id;
  {
    std::lock_guard lock(holds_->mu);
    ++holds_->count[key];
  }
  return std::make_shared<const HoldToken<Holds>>(holds_, std::move(key));
}

void SnapshotCache::Touch(const fs::path& dir) const {
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(system_clock::now().time_since_epoch());
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;  // atime: left to the kernel
  times[1].tv_sec = static_cast<time_t>(now.count() / 1'000'000'000);
  times[1].tv_nsec = static_cast<long>(now.count() % 1'000'000'000);
  if (utimensat(AT_FDCWD, (dir / kManifestFile).c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    // Not fatal: the copy only looks older than it is, and may go before its turn.
    spdlog::warn("component=snapshots op=cache_touch path={} error=\"{}\"", dir.string(), std::strerror(errno));
  }
}

SnapshotCache::Scanned SnapshotCache::Scan() const {
  Scanned out;
  std::error_code ec;
  for (const auto& ns : fs::directory_iterator(root_, ec)) {
    if (!IsDirectoryNoFollow(ns.path())) continue;
    std::error_code aec;
    for (const auto& actor : fs::directory_iterator(ns.path(), aec)) {
      if (!IsDirectoryNoFollow(actor.path())) continue;
      std::error_code sec;
      for (const auto& snap : fs::directory_iterator(actor.path(), sec)) {
        const std::string n = ns.path().filename(), a = actor.path().filename(), id = snap.path().filename();
        CacheEntry e{n + "/" + a + "/" + id, BytesUnder(snap.path()), {}, true};
        if (IsPartialName(id)) {
          // A download in flight (or a removal's last step): its bytes count, it is not ours to take.
        } else if (!IsCompleteCopy(snap.path(), n, a, id)) {
          spdlog::warn("component=snapshots op=evict path={} bytes={} skipped=unknown-state", snap.path().string(),
                       e.bytes);
        } else {
          e.last_use = LastUse(snap.path());
          e.in_use = false;  // holds are checked at the removal itself (Evict)
        }
        out.entries.push_back(std::move(e));
        out.dirs.push_back(snap.path());
      }
    }
  }
  return out;
}

bool SnapshotCache::Evict(const CacheEntry& e, const fs::path& dir) {
  const std::string id = dir.filename();
  const std::string actor = dir.parent_path().parent_path().filename().string() + "/" +
                            dir.parent_path().filename().string();
  // Under the holds' lock: a restore that wants this copy either held it before (kept) or
  // waits here and finds it gone (downloads it again).
  std::lock_guard lock(holds_->mu);
  if (holds_->count.contains(e.key)) {
    spdlog::info("component=snapshots op=evict actor={} snapshot={} bytes={} skipped=in-use", actor, id, e.bytes);
    return false;
  }
  if (Status s = RemoveSnapshotDir(dir.parent_path(), id); !s.ok()) {
    spdlog::warn("component=snapshots op=evict actor={} snapshot={} result=error error=\"{}\"", actor, id, s.message());
    return false;
  }
  spdlog::info("component=snapshots op=evict actor={} snapshot={} bytes={} reason=lru", actor, id, e.bytes);
  if (observer_) observer_->CacheEviction(static_cast<uint64_t>(e.bytes));
  return true;
}

int SnapshotCache::Enforce() {
  if (root_.empty()) return 0;
  std::lock_guard pass(enforce_mu_);
  Scanned scanned;
  try {
    scanned = Scan();
  } catch (const fs::filesystem_error& e) {
    // A listing that failed halfway would undercount: nothing is evicted on it.
    spdlog::warn("component=snapshots op=evict result=error error=\"{}\"", e.what());
    return 0;
  }
  // The planner sees a held copy as in use; the hold is checked again at the removal.
  {
    std::lock_guard lock(holds_->mu);
    for (auto& e : scanned.entries) e.in_use = e.in_use || holds_->count.contains(e.key);
  }
  const int64_t bound = bound_bytes_;
  const EvictionPlan plan = PlanCacheEviction(scanned.entries, bound);
  int evicted = 0;
  int64_t remaining = plan.total_bytes;
  for (size_t i : plan.evict) {
    if (!Evict(scanned.entries[i], scanned.dirs[i])) continue;
    ++evicted;
    remaining -= scanned.entries[i].bytes;
  }
  if (remaining > bound && bound > 0) {
    spdlog::warn("component=snapshots op=evict result=over-bound bytes={} bound_bytes={} reason=in-use-or-unknown",
                 remaining, bound);
  }
  if (observer_) observer_->CacheBytes(static_cast<uint64_t>(remaining));
  return evicted;
}

}  // namespace stasis
