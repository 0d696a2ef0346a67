#include "snapshots/snapshot_store.h"

#include "base/names.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

namespace stasis {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kManifestFile[] = "manifest.json";
constexpr char kPartialSuffix[] = ".partial";
constexpr int kManifestFormat = 1;
constexpr size_t kBufferSize = 1 << 20;

// Reasons (Status::reason()) of snapshot failures, for conditions and metrics.
constexpr char kInvalidName[] = "invalid_name";
constexpr char kSnapshotNotFound[] = "snapshot_not_found";
constexpr char kSnapshotCorrupt[] = "snapshot_corrupt";
constexpr char kStoreNotWritable[] = "store_not_writable";
constexpr char kNoStore[] = "no_store";
constexpr char kIoError[] = "io_error";

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

long long Millis(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A snapshot id: letters, digits, '-', '_' and '.', starting with a letter or digit, at most
// 128 characters, and never ending in ".partial" (that would alias a partial directory).
bool IsSnapshotId(const std::string& s) {
  if (s.empty() || s.size() > 128 || EndsWith(s, kPartialSuffix)) return false;
  if (!std::isalnum(static_cast<unsigned char>(s.front()))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

Status CheckNames(const std::string& ns, const std::string& name) {
  if (!IsDnsLabel(ns)) {
    return Status(Code::kInvalidArgument, "invalid namespace \"" + ns + "\" for a snapshot path",
                  kInvalidName);
  }
  if (!IsDnsSubdomain(name)) {
    return Status(Code::kInvalidArgument, "invalid actor name \"" + name + "\" for a snapshot path",
                  kInvalidName);
  }
  return OkStatus();
}

Status CheckNames(const std::string& ns, const std::string& name, const std::string& id) {
  if (Status s = CheckNames(ns, name); !s.ok()) return s;
  if (!IsSnapshotId(id)) {
    return Status(Code::kInvalidArgument, "invalid snapshot id \"" + id + "\"", kInvalidName);
  }
  return OkStatus();
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

// fsync of a file or a directory by path.
Status FsyncPath(const fs::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(Code::kInternal, Errno("open " + path.string()), kIoError);
  const int r = fsync(fd);
  const int saved = errno;
  close(fd);
  if (r != 0) {
    errno = saved;
    return Status(Code::kInternal, Errno("fsync " + path.string()), kIoError);
  }
  return OkStatus();
}

struct Digest {
  std::string sha256;
  int64_t size = 0;
};

std::string Hex(const unsigned char* md, unsigned int len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

Result<Digest> HashFile(const fs::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(Code::kInternal, Errno("open " + path.string()), kIoError);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    close(fd);
    return Status(Code::kInternal, "EVP_DigestInit_ex failed", kIoError);
  }
  // Not zeroed: read() fills it (zeroing 1 MiB was 14 % of a small pause's instructions).
  auto buf = std::make_unique_for_overwrite<unsigned char[]>(kBufferSize);
  Digest digest;
  while (true) {
    const ssize_t n = read(fd, buf.get(), kBufferSize);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s(Code::kInternal, Errno("read " + path.string()), kIoError);
      close(fd);
      return s;
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.get(), static_cast<size_t>(n));
    digest.size += n;
  }
  close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  digest.sha256 = Hex(md, len);
  return digest;
}

// Copies one file, hashing the bytes as they are read (one reading, not two), and fsyncs the
// copy. The caller compares the digest with the manifest.
Result<Digest> CopyFileHashed(const fs::path& from, const fs::path& to) {
  const int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Status(Code::kInternal, Errno("open " + from.string()), kIoError);
  const int out = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    Status s(Code::kFailedPrecondition, Errno("create " + to.string()), kStoreNotWritable);
    close(in);
    return s;
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  Status status;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    status = Status(Code::kInternal, "EVP_DigestInit_ex failed", kIoError);
  }
  auto buf = std::make_unique_for_overwrite<char[]>(kBufferSize);  // read() fills it
  Digest digest;
  while (status.ok()) {
    const ssize_t n = read(in, buf.get(), kBufferSize);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = Status(Code::kInternal, Errno("read " + from.string()), kIoError);
      break;
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.get(), static_cast<size_t>(n));
    digest.size += n;
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = write(out, buf.get() + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        status =
            Status(Code::kFailedPrecondition, Errno("write " + to.string()), kStoreNotWritable);
        break;
      }
      off += w;
    }
  }
  if (status.ok() && fsync(out) != 0) {
    status = Status(Code::kFailedPrecondition, Errno("fsync " + to.string()), kStoreNotWritable);
  }
  close(in);
  close(out);
  if (!status.ok()) return status;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  digest.sha256 = Hex(md, len);
  return digest;
}

// The kernel's id of this boot: a page cache that was not written back is lost only across
// a change of it. "" if unreadable (then every deferred snapshot counts as from another boot).
std::string ThisBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Writes `text` to `path` (which must not exist), and fsyncs it if `sync`.
Status WriteNewFile(const fs::path& path, const std::string& text, bool sync) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status(Code::kInternal, Errno("create " + path.string()), kIoError);
  Status status;
  for (size_t off = 0; off < text.size();) {
    const ssize_t w = write(fd, text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      status = Status(Code::kInternal, Errno("write " + path.string()), kIoError);
      break;
    }
    off += static_cast<size_t>(w);
  }
  if (status.ok() && sync && fsync(fd) != 0)
    status = Status(Code::kInternal, Errno("fsync " + path.string()), kIoError);
  close(fd);
  return status;
}

std::string NowRfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

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
  if (!m.deferred_sync_boot_id.empty()) j["deferredSyncBootId"] = m.deferred_sync_boot_id;
  if (m.checksums_pending) j["checksumsPending"] = true;
  return j;
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
  try {
    const auto j = nlohmann::json::parse(in);
    SnapshotManifest m;
    m.id = j.at("id").get<std::string>();
    m.ns = j.at("namespace").get<std::string>();
    m.name = j.at("name").get<std::string>();
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
  } catch (const std::exception& e) {
    return Status(Code::kFailedPrecondition,
                  "snapshot manifest " + path.string() + " is invalid: " + e.what(),
                  kSnapshotCorrupt);
  }
}

// Every path a manifest lists stays inside its snapshot and is not the manifest itself: it is
// read from disk, and a tampered one must not make the agent hash, copy or link outside.
Status CheckManifestPaths(const fs::path& dir, const SnapshotManifest& m) {
  for (const auto& f : m.files) {
    if (!IsSafeRelativePath(f.path) || f.path == kManifestFile) {
      return Status(Code::kFailedPrecondition,
                    "snapshot " + dir.string() + ": manifest lists an unsafe path \"" + f.path + "\"",
                    kSnapshotCorrupt);
    }
  }
  return OkStatus();
}

// Checks every file the manifest lists: present, same size, same sha256.
Result<SnapshotManifest> VerifyDir(const fs::path& dir, const std::string& ns,
                                   const std::string& name, const std::string& id) {
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  auto corrupt = [&](const std::string& why) {
    return Status(Code::kFailedPrecondition, "snapshot " + dir.string() + ": " + why,
                  kSnapshotCorrupt);
  };
  if (manifest->id != id || manifest->ns != ns || manifest->name != name) {
    return corrupt("manifest names " + manifest->ns + "/" + manifest->name + "/" + manifest->id);
  }
  if (manifest->checksums_pending) {
    return corrupt("its checksums were never computed (completed without them in boot " +
                   manifest->deferred_sync_boot_id + "; the node rebooted before they were): unverifiable");
  }
  if (Status s = CheckManifestPaths(dir, *manifest); !s.ok()) return s;
  int64_t total = 0;
  for (const auto& f : manifest->files) {
    const fs::path file = dir / f.path;
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(file, ec))) return corrupt(f.path + " is missing");
    auto digest = HashFile(file);
    if (!digest.ok()) return digest.status();
    if (digest->size != f.size) {
      return corrupt(f.path + " has " + std::to_string(digest->size) + " bytes, manifest says " +
                     std::to_string(f.size));
    }
    if (digest->sha256 != f.sha256) {
      return corrupt(f.path + " sha256 " + digest->sha256 + " does not match the manifest's " +
                     f.sha256);
    }
    total += f.size;
  }
  if (total != manifest->total_bytes) return corrupt("file sizes do not add up to totalBytes");
  return manifest;
}

// The subdirectories the files of a snapshot are in, deepest first per file: their entries must
// be durable too.
std::vector<fs::path> SubdirectoriesOf(const std::vector<fs::path>& files) {
  std::vector<fs::path> dirs;
  for (const auto& rel : files) {
    for (fs::path d = rel.parent_path(); !d.empty(); d = d.parent_path()) dirs.push_back(d);
  }
  return dirs;
}

// Computes the checksums a kDeferred snapshot was completed without, and rewrites its manifest
// with them (a new file, synced, renamed over the old: a reader sees one or the other). OK at
// once when none are pending; kNotFound when the snapshot was removed meanwhile.
Status FillPendingChecksums(const fs::path& dir) {
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (!manifest->checksums_pending) return OkStatus();
  if (Status s = CheckManifestPaths(dir, *manifest); !s.ok()) return s;
  std::error_code ec;
  // A failure because the snapshot was removed meanwhile (a resume, a delete) is not an error.
  auto removed_or = [&](Status s) {
    return fs::exists(dir, ec) ? s : Status(Code::kNotFound, "snapshot " + dir.string() + " removed", kSnapshotNotFound);
  };
  for (auto& f : manifest->files) {
    auto digest = HashFile(dir / f.path);
    if (!digest.ok()) return removed_or(digest.status());
    if (digest->size != f.size) {
      return Status(Code::kFailedPrecondition,
                    "snapshot " + dir.string() + ": " + f.path + " has " + std::to_string(digest->size) +
                        " bytes, " + std::to_string(f.size) + " when it was completed",
                    kSnapshotCorrupt);
    }
    f.sha256 = digest->sha256;
  }
  manifest->checksums_pending = false;
  const fs::path tmp = dir / (std::string(kManifestFile) + ".tmp");
  fs::remove(tmp, ec);
  if (Status s = WriteNewFile(tmp, ManifestToJson(*manifest).dump(2) + "\n", /*sync=*/true); !s.ok()) {
    return removed_or(s);
  }
  fs::rename(tmp, dir / kManifestFile, ec);
  if (ec) return Status(Code::kInternal, "rename " + tmp.string() + ": " + ec.message(), kIoError);
  return FsyncPath(dir);
}

// Complete snapshots of one actor under `root`, oldest first (manifests read, not verified).
std::vector<SnapshotManifest> ListDir(const std::string& root, const std::string& ns,
                                      const std::string& name) {
  std::vector<SnapshotManifest> out;
  if (root.empty() || !CheckNames(ns, name).ok()) return out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(root) / ns / name, ec)) {
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

// Removes a snapshot so that no crash can leave something that looks complete: the directory
// is first renamed to <id>.partial (atomic), then removed.
Status RemoveSnapshotDir(const fs::path& parent, const std::string& id) {
  std::error_code ec;
  const fs::path dir = parent / id;
  const fs::path partial = parent / (id + kPartialSuffix);
  fs::remove_all(partial, ec);
  if (ec)
    return Status(Code::kInternal, "remove " + partial.string() + ": " + ec.message(), kIoError);
  if (fs::exists(dir, ec)) {
    fs::rename(dir, partial, ec);
    if (ec)
      return Status(Code::kInternal, "rename " + dir.string() + ": " + ec.message(), kIoError);
    (void)FsyncPath(parent);
    fs::remove_all(partial, ec);
    if (ec)
      return Status(Code::kInternal, "remove " + partial.string() + ": " + ec.message(), kIoError);
  }
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
      std::vector<fs::path> partials;
      for (const auto& snap : fs::directory_iterator(actor.path(), ec)) {
        if (EndsWith(snap.path().filename().string(), kPartialSuffix))
          partials.push_back(snap.path());
      }
      for (const auto& p : partials) {
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

}  // namespace

SnapshotStore::SnapshotStore(std::string local_root, std::string store_root, bool link_same_fs,
                             std::string boot_id)
    : local_root_(std::move(local_root)), store_root_(std::move(store_root)),
      link_same_fs_(link_same_fs), boot_id_(boot_id.empty() ? ThisBootId() : std::move(boot_id)),
      deferred_(std::make_unique<DeferredSync>()) {}

std::string SnapshotStore::LocalPath(const std::string& ns, const std::string& name,
                                     const std::string& id) const {
  return (fs::path(local_root_) / ns / name / id).string();
}

std::string SnapshotStore::StorePath(const std::string& ns, const std::string& name,
                                     const std::string& id) const {
  return (fs::path(store_root_) / ns / name / id).string();
}

Result<std::string> SnapshotStore::BeginLocal(const std::string& ns, const std::string& name,
                                              const std::string& id) {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  const fs::path parent = fs::path(local_root_) / ns / name;
  const fs::path partial = parent / (id + kPartialSuffix);
  std::error_code ec;
  if (fs::exists(parent / id, ec)) {
    return Status(Code::kAlreadyExists, "snapshot " + (parent / id).string() + " already exists");
  }
  fs::create_directories(parent, ec);
  if (ec)
    return Status(Code::kFailedPrecondition, "create " + parent.string() + ": " + ec.message(),
                  kIoError);
  // A leftover of an earlier attempt: runsc refuses to write over an image.
  fs::remove_all(partial, ec);
  if (!ec) fs::create_directory(partial, ec);
  if (ec)
    return Status(Code::kFailedPrecondition, "create " + partial.string() + ": " + ec.message(),
                  kIoError);
  return partial.string();
}

Result<SnapshotManifest> SnapshotStore::CompleteLocal(SnapshotManifest manifest, Durability durability) {
  const bool sync_now = durability == Durability::kSynced;
  const auto start = Clock::now();
  if (Status s = CheckNames(manifest.ns, manifest.name, manifest.id); !s.ok()) return s;
  const fs::path parent = fs::path(local_root_) / manifest.ns / manifest.name;
  const fs::path partial = parent / (manifest.id + kPartialSuffix);
  const fs::path complete = parent / manifest.id;
  std::error_code ec;
  if (!fs::is_directory(partial, ec)) {
    return Status(Code::kNotFound, "no partial snapshot at " + partial.string(), kSnapshotNotFound);
  }
  if (fs::exists(complete, ec)) {
    return Status(Code::kAlreadyExists, "snapshot " + complete.string() + " already exists");
  }

  // Hash and sync every file; the manifest lists them in path order.
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(partial, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const auto st = it->symlink_status(ec);
    if (fs::is_directory(st)) continue;
    const fs::path rel = fs::relative(it->path(), partial);
    if (rel == kManifestFile) continue;  // rewritten below
    if (!fs::is_regular_file(st)) {
      return Status(Code::kFailedPrecondition,
                    "snapshot " + partial.string() + ": " + rel.string() + " is not a regular file",
                    kSnapshotCorrupt);
    }
    files.push_back(rel);
  }
  if (ec)
    return Status(Code::kInternal, "walk " + partial.string() + ": " + ec.message(), kIoError);
  std::sort(files.begin(), files.end());

  manifest.files.clear();
  manifest.total_bytes = 0;
  manifest.deferred_sync_boot_id = sync_now ? "" : boot_id_;
  // A deferred Full image is not read here at all: its checksums come in the background job.
  manifest.checksums_pending = !sync_now && manifest.scope == "Full";
  // The image is fresh in the page cache: hashing reads it (CPU), fsync writes it back (disk).
  // They overlap (kSynced): one thread syncs every file while this one hashes them.
  Status synced;
  std::thread syncer;
  if (sync_now) syncer = std::thread([&] {
    for (const auto& rel : files) {
      if (Status s = FsyncPath(partial / rel); !s.ok()) {
        synced = s;
        return;
      }
    }
  });
  Status hashed;
  for (const auto& rel : files) {
    if (manifest.checksums_pending) {
      const auto size = fs::file_size(partial / rel, ec);
      if (ec) {
        hashed = Status(Code::kInternal, "stat " + (partial / rel).string() + ": " + ec.message(), kIoError);
        break;
      }
      manifest.files.push_back({rel.string(), static_cast<int64_t>(size), ""});
      manifest.total_bytes += static_cast<int64_t>(size);
      continue;
    }
    auto digest = HashFile(partial / rel);
    if (!digest.ok()) {
      hashed = digest.status();
      break;
    }
    manifest.files.push_back({rel.string(), digest->size, digest->sha256});
    manifest.total_bytes += digest->size;
  }
  if (syncer.joinable()) syncer.join();
  if (!hashed.ok()) return hashed;
  if (!synced.ok()) return synced;
  if (manifest.taken_at.empty()) manifest.taken_at = NowRfc3339();

  // The manifest is the mark of completeness: written (and, kSynced, synced) before the rename.
  fs::remove(partial / kManifestFile, ec);
  if (Status s = WriteNewFile(partial / kManifestFile, ManifestToJson(manifest).dump(2) + "\n", sync_now);
      !s.ok()) {
    return s;
  }
  // Subdirectories first, then the snapshot directory: their entries must be durable too.
  if (sync_now) {
    for (const auto& d : SubdirectoriesOf(files)) (void)FsyncPath(partial / d);
    if (Status s = FsyncPath(partial); !s.ok()) return s;
  }
  fs::rename(partial, complete, ec);
  if (ec)
    return Status(Code::kInternal, "rename " + partial.string() + ": " + ec.message(), kIoError);
  if (sync_now) {
    if (Status s = FsyncPath(parent); !s.ok()) return s;
  } else {
    EnqueueDeferred(complete, files);
  }
  spdlog::info(
      "component=snapshots op=complete actor={}/{} snapshot={} files={} bytes={} sync={} duration_ms={}",
      manifest.ns, manifest.name, manifest.id, manifest.files.size(), manifest.total_bytes,
      sync_now ? "before" : "deferred", Millis(start));
  return manifest;
}

Result<SnapshotManifest> SnapshotStore::CheckLocalForRestore(const std::string& ns,
                                                             const std::string& name,
                                                             const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  const fs::path dir = LocalPath(ns, name, id);
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  const bool maybe_lost = !manifest->deferred_sync_boot_id.empty() &&
                          (manifest->deferred_sync_boot_id != boot_id_ || deferred_->Failed(dir.string()));
  if (!maybe_lost) return manifest;
  spdlog::info("component=snapshots op=verify actor={}/{} snapshot={} why=\"{}\"", ns, name, id,
               manifest->deferred_sync_boot_id != boot_id_ ? "completed before a reboot, before it was synced"
                                                           : "its background fsync failed");
  return VerifyDir(dir, ns, name, id);
}

bool SnapshotStore::FlushDeferred(std::chrono::milliseconds timeout) { return deferred_->Flush(timeout); }

void SnapshotStore::EnqueueDeferred(const fs::path& dir, const std::vector<fs::path>& files) {
  // The fsyncs of kSynced, in the same order, under the final name.
  std::vector<std::string> paths;
  for (const auto& rel : files) paths.push_back((dir / rel).string());
  paths.push_back((dir / kManifestFile).string());
  for (const auto& d : SubdirectoriesOf(files)) paths.push_back((dir / d).string());
  paths.push_back(dir.string());
  paths.push_back(dir.parent_path().string());
  deferred_->Enqueue(dir.string(), std::move(paths), [dir] { return FillPendingChecksums(dir); });
}

int SnapshotStore::ResumePendingChecksums() {
  int queued = 0;
  for (const auto& [ns, name] : LocalActors()) {
    for (const auto& m : ListLocal(ns, name)) {
      if (!m.checksums_pending || m.deferred_sync_boot_id != boot_id_) continue;
      std::vector<fs::path> files;
      for (const auto& f : m.files) files.emplace_back(f.path);
      EnqueueDeferred(LocalPath(ns, name, m.id), files);
      ++queued;
    }
  }
  return queued;
}

Result<SnapshotManifest> SnapshotStore::Commit(const std::string& ns, const std::string& name,
                                               const std::string& id, bool just_completed) {
  const auto start = Clock::now();
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  auto fail = [&](Status s) {
    spdlog::warn(
        "component=snapshots op=commit actor={}/{} snapshot={} result=error reason={} "
        "duration_ms={} error=\"{}\"",
        ns, name, id, s.reason(), Millis(start), s.message());
    return s;
  };
  if (store_root_.empty()) {
    return fail(Status(Code::kFailedPrecondition, "no snapshot store configured", kNoStore));
  }
  const fs::path source = LocalPath(ns, name, id);
  auto local = ReadManifest(source);
  if (!local.ok()) return fail(local.status());
  if (local->checksums_pending) {
    // A paused snapshot whose background checksums have not come yet: wait for them; if its
    // job failed or ran in an agent that stopped, compute them here — on the boot it was
    // written in (what VerifyDir refuses after a reboot: nothing can vouch for those bytes).
    if (local->deferred_sync_boot_id != boot_id_) return fail(VerifyDir(source, ns, name, id).status());
    (void)deferred_->Flush(std::chrono::minutes(10));
    if (Status s = FillPendingChecksums(source); !s.ok()) return fail(s);
    local = ReadManifest(source);
    if (!local.ok()) return fail(local.status());
  }
  if (local->id != id || local->ns != ns || local->name != name) {
    return fail(Status(Code::kFailedPrecondition,
                       "snapshot " + source.string() + ": manifest names " + local->ns + "/" +
                           local->name + "/" + local->id,
                       kSnapshotCorrupt));
  }
  if (Status s = CheckManifestPaths(source, *local); !s.ok()) return fail(s);

  const fs::path parent = fs::path(store_root_) / ns / name;
  const fs::path partial = parent / (id + kPartialSuffix);
  const fs::path complete = parent / id;
  std::error_code ec;
  if (fs::exists(complete, ec)) {
    // Committed before (a crash between the rename and the status update): verify, keep.
    auto existing = VerifyCommitted(ns, name, id);
    if (!existing.ok()) return fail(existing.status());
    return existing;
  }
  if (Status s = CheckStoreWritable(); !s.ok()) return fail(s);
  fs::create_directories(parent, ec);
  if (!ec) fs::remove_all(partial, ec);
  if (!ec) fs::create_directory(partial, ec);
  if (ec) {
    return fail(Status(Code::kFailedPrecondition,
                       "create " + partial.string() + ": " + ec.message(), kStoreNotWritable));
  }
  // A failed commit leaves nothing in the store, not even a partial directory.
  auto abandon = [&](Status s) {
    std::error_code rec;
    fs::remove_all(partial, rec);
    return fail(std::move(s));
  };
  // On the node's own file system the store takes the image's files by hard link: no byte is
  // copied. Across file systems every file is copied once, hashed as it is read.
  struct stat from_st {}, to_st {};
  bool link = link_same_fs_ && stat(source.c_str(), &from_st) == 0 &&
              stat(partial.c_str(), &to_st) == 0 && from_st.st_dev == to_st.st_dev;
  const bool linked_at_start = link;
  for (const auto& f : local->files) {
    const fs::path to = partial / f.path;
    fs::create_directories(to.parent_path(), ec);
    if (ec) {
      return abandon(Status(Code::kFailedPrecondition,
                         "create " + to.parent_path().string() + ": " + ec.message(),
                         kStoreNotWritable));
    }
    Result<Digest> digest = Digest{};
    if (link && ::link((source / f.path).c_str(), to.c_str()) == 0) {
      // The very file CompleteLocal hashed a moment ago needs no second reading; one that has
      // rested on this node since (a paused snapshot) is read once more.
      digest = just_completed ? Result<Digest>(Digest{f.sha256, f.size}) : HashFile(to);
      // A kDeferred snapshot's file may not be on disk yet (a no-op for one that is).
      if (digest.ok() && !local->deferred_sync_boot_id.empty()) {
        if (Status s = FsyncPath(to); !s.ok()) digest = s;
      }
    } else {
      if (link) {
        spdlog::info("component=snapshots op=commit actor={}/{} snapshot={} link_failed=\"{}\" action=copy",
                     ns, name, id, std::strerror(errno));
        link = false;
      }
      digest = CopyFileHashed(source / f.path, to);
    }
    if (!digest.ok()) return abandon(digest.status());
    if (digest->size != f.size || digest->sha256 != f.sha256) {
      return abandon(Status(Code::kFailedPrecondition,
                         "snapshot " + source.string() + ": " + f.path +
                             " does not match its manifest (sha256 " + digest->sha256 + ", " +
                             std::to_string(digest->size) + " bytes)",
                         kSnapshotCorrupt));
    }
  }
  if (auto m = CopyFileHashed(source / kManifestFile, partial / kManifestFile); !m.ok()) {
    return abandon(m.status());
  }
  for (const auto& f : local->files) {
    for (fs::path d = fs::path(f.path).parent_path(); !d.empty(); d = d.parent_path()) {
      (void)FsyncPath(partial / d);
    }
  }
  if (Status s = FsyncPath(partial); !s.ok()) return abandon(s);
  fs::rename(partial, complete, ec);
  if (ec)
    return abandon(
        Status(Code::kInternal, "rename " + partial.string() + ": " + ec.message(), kIoError));
  if (Status s = FsyncPath(parent); !s.ok()) return abandon(s);
  spdlog::info(
      "component=snapshots op=commit actor={}/{} snapshot={} result=ok bytes={} linked={} duration_ms={}",
      ns, name, id, local->total_bytes, linked_at_start && link, Millis(start));
  return local;
}

Result<SnapshotManifest> SnapshotStore::VerifyLocal(const std::string& ns, const std::string& name,
                                                    const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  return VerifyDir(LocalPath(ns, name, id), ns, name, id);
}

Result<SnapshotManifest> SnapshotStore::VerifyCommitted(const std::string& ns,
                                                        const std::string& name,
                                                        const std::string& id) const {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (store_root_.empty())
    return Status(Code::kFailedPrecondition, "no snapshot store configured", kNoStore);
  return VerifyDir(StorePath(ns, name, id), ns, name, id);
}

std::vector<SnapshotManifest> SnapshotStore::ListLocal(const std::string& ns,
                                                       const std::string& name) const {
  return ListDir(local_root_, ns, name);
}

std::vector<SnapshotManifest> SnapshotStore::ListCommitted(const std::string& ns,
                                                           const std::string& name) const {
  return ListDir(store_root_, ns, name);
}

Status SnapshotStore::RemoveLocal(const std::string& ns, const std::string& name,
                                  const std::string& id) {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  return RemoveSnapshotDir(fs::path(local_root_) / ns / name, id);
}

Status SnapshotStore::RemoveCommitted(const std::string& ns, const std::string& name,
                                      const std::string& id) {
  if (Status s = CheckNames(ns, name, id); !s.ok()) return s;
  if (store_root_.empty())
    return Status(Code::kFailedPrecondition, "no snapshot store configured", kNoStore);
  return RemoveSnapshotDir(fs::path(store_root_) / ns / name, id);
}

Status SnapshotStore::RemoveAllLocal(const std::string& ns, const std::string& name) {
  if (Status s = CheckNames(ns, name); !s.ok()) return s;
  const fs::path dir = fs::path(local_root_) / ns / name;
  std::error_code ec;
  // Complete snapshots one by one (each stops looking complete first), then the rest.
  std::vector<std::string> ids;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string id = entry.path().filename().string();
    if (IsSnapshotId(id)) ids.push_back(id);
  }
  for (const auto& id : ids) {
    if (Status s = RemoveSnapshotDir(dir, id); !s.ok()) return s;
  }
  fs::remove_all(dir, ec);
  if (ec) return Status(Code::kInternal, "remove " + dir.string() + ": " + ec.message(), kIoError);
  return OkStatus();
}

std::vector<std::pair<std::string, std::string>> SnapshotStore::LocalActors() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (local_root_.empty()) return out;
  std::error_code ec;
  for (const auto& ns : fs::directory_iterator(local_root_, ec)) {
    if (!ns.is_directory(ec)) continue;
    for (const auto& actor : fs::directory_iterator(ns.path(), ec)) {
      const std::string n = ns.path().filename().string(), a = actor.path().filename().string();
      if (actor.is_directory(ec) && CheckNames(n, a).ok()) out.emplace_back(n, a);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<int> SnapshotStore::RemovePartials() {
  return RemovePartialsUnder(local_root_) + RemovePartialsUnder(store_root_);
}

Status SnapshotStore::CheckStoreWritable() const {
  if (store_root_.empty())
    return Status(Code::kFailedPrecondition, "no snapshot store configured", kNoStore);
  auto not_writable = [&](const std::string& why) {
    return Status(Code::kFailedPrecondition,
                  "snapshot store " + store_root_ + " is not writable: " + why, kStoreNotWritable);
  };
  std::error_code ec;
  if (!fs::is_directory(store_root_, ec)) {
    return not_writable(fs::exists(store_root_, ec) ? "not a directory" : "does not exist");
  }
  // Root passes permission bits, so only a real create/write/sync/unlink tells (read-only
  // mounts, immutable directories, full or broken shared filesystems).
  const fs::path probe =
      fs::path(store_root_) / (".stasis-write-check-" + std::to_string(getpid()) + "-" +
                               std::to_string(std::random_device{}()));
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return not_writable(Errno("create " + probe.filename().string()));
  const bool wrote = write(fd, "x", 1) == 1 && fsync(fd) == 0;
  const std::string write_error = wrote ? "" : Errno("write " + probe.filename().string());
  close(fd);
  if (unlink(probe.c_str()) != 0) return not_writable(Errno("unlink " + probe.filename().string()));
  if (!wrote) return not_writable(write_error);
  return OkStatus();
}

std::string NewSnapshotId() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  static thread_local std::mt19937 rng{std::random_device{}()};
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", static_cast<unsigned>(rng() & 0xffffff));
  return std::string(stamp) + "-" + suffix;
}

}  // namespace stasis
