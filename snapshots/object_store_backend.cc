#include "snapshots/object_store_backend.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <random>

#include "base/parallel.h"
#include "snapshots/deferred_durability.h"
#include "snapshots/file_io.h"
#include "base/sha256.h"
#include "snapshots/snapshot_dirs.h"
#include "snapshots/snapshot_names.h"
#include "snapshots/snapshot_reasons.h"
#include "snapshots/stored_manifest.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kSnapshotCorrupt;
using snapshot_reason::kSnapshotNotFound;
using snapshot_reason::kStoreNotWritable;
using snapshot_reason::kStoreObjectMissing;

std::vector<ChunkSpan> ChunksOf(const SnapshotManifest& m) {
  std::vector<int64_t> sizes;
  for (const auto& f : m.files) sizes.push_back(f.size);
  return ChunkSpans(sizes, m.chunk_bytes);
}

// Reads [offset, offset+length) of `path` into `buf`.
Status ReadChunk(const fs::path& path, const ChunkSpan& c, char* buf) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status(Code::kInternal, Errno("open " + path.string()), kIoError);
  Status status;
  for (int64_t done = 0; done < c.length;) {
    const ssize_t n = pread(fd, buf + done, static_cast<size_t>(c.length - done), c.offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = Status(Code::kInternal, n < 0 ? Errno("read " + path.string()) : path.string() + " is shorter than its manifest says", kIoError);
      break;
    }
    done += n;
  }
  close(fd);
  return status;
}

// Creates every file of `m` under `partial`, at its size, open for writing.
Result<std::vector<int>> CreateFiles(const fs::path& partial, const SnapshotManifest& m) {
  std::vector<int> fds;
  for (const auto& f : m.files) {
    const fs::path path = partial / f.path;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, f.size) != 0) {
      Status s(Code::kInternal, Errno("create " + path.string()), kIoError);
      if (fd >= 0) close(fd);
      for (int o : fds) close(o);
      return s;
    }
    fds.push_back(fd);
  }
  return fds;
}

}  // namespace

ObjectStoreBackend::ObjectStoreBackend(std::unique_ptr<S3Client> client, S3Location location, std::string cache_root,
                                       int transfers, ChunkCodec codec)
    : client_(std::move(client)), location_(std::move(location)), cache_root_(std::move(cache_root)),
      transfers_(transfers > 0 ? transfers : std::clamp(AvailableCpus(), 2, 16)), codec_(std::move(codec)) {
  if (!cache_root_.empty()) cache_ = std::make_unique<SnapshotCache>(cache_root_, 0, client_->observer());
}

void ObjectStoreBackend::SetDigestThreads(int threads) {
  if (threads > 0) transfers_ = threads;
}

void ObjectStoreBackend::SetCacheBound(int64_t bytes) {
  if (cache_) cache_->set_bound_bytes(bytes);
}

std::string ObjectStoreBackend::SnapshotPrefix(const std::string& ns, const std::string& name,
                                               const std::string& id) const {
  return location_.prefix + ns + "/" + name + "/" + id + "/";
}

std::string ObjectStoreBackend::ChunkKey(const std::string& snapshot_prefix, size_t file, int64_t chunk) {
  return snapshot_prefix + "chunks/" + std::to_string(file) + "/" + std::to_string(chunk);
}

std::string ObjectStoreBackend::ManifestKey(const std::string& snapshot_prefix) {
  return snapshot_prefix + kManifestFile;
}

std::string ObjectStoreBackend::Location(const std::string& ns, const std::string& name, const std::string& id) const {
  return std::string(kS3Scheme) + location_.bucket + "/" + SnapshotPrefix(ns, name, id);
}

Result<SnapshotManifest> ObjectStoreBackend::GetManifest(const std::string& ns, const std::string& name,
                                                         const std::string& id) const {
  const std::string where = Location(ns, name, id);
  auto text = client_->GetObject(ManifestKey(SnapshotPrefix(ns, name, id)));
  if (!text.ok()) {
    if (text.status().reason() == kStoreObjectMissing) {
      return Status(Code::kNotFound, "no snapshot at " + where, kSnapshotNotFound);
    }
    return text.status();
  }
  auto m = ParseStoredManifest(*text, codec_.key(), ns + "/" + name + "/" + id, where + kManifestFile);
  if (!m.ok()) return m.status();
  if (Status s = CheckManifestNames(where, *m, ns, name, id); !s.ok()) return s;
  if (Status s = CheckManifestPaths(where, *m); !s.ok()) return s;
  if (m->format != kManifestFormatChunked || m->checksums_pending) {
    return SnapshotCorruptError(where, "the store holds only complete format-2 manifests");
  }
  if (Status s = CheckChunkLayout(where, *m); !s.ok()) return s;
  return m;
}

Status ObjectStoreBackend::UploadChunks(const fs::path& source, const SnapshotManifest& m, const std::string& prefix,
                                        std::atomic<uint64_t>* stored_bytes) {
  const auto chunks = ChunksOf(m);
  const size_t workers = WorkersFor(chunks.size(), transfers_);
  std::vector<std::unique_ptr<char[]>> buffers(workers);
  std::vector<std::string> encoded(workers), scratch(workers);
  for (auto& b : buffers) b = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(m.chunk_bytes));
  return ParallelFor(chunks.size(), transfers_, [&](size_t j, size_t worker) -> Status {
    const ChunkSpan& c = chunks[j];
    const SnapshotFile& f = m.files[c.file];
    char* buf = buffers[worker].get();
    if (Status s = ReadChunk(source / f.path, c, buf); !s.ok()) return s;
    Sha256 hash;
    hash.Update(buf, static_cast<size_t>(c.length));
    const std::string got = hash.FinishHex();
    if (got != f.chunks[static_cast<size_t>(c.index)]) {
      return ChunkMismatchError(source.string(), m, f, static_cast<size_t>(c.index), got);
    }
    auto object = codec_.Encode(std::string_view(buf, static_cast<size_t>(c.length)), PlaceOf(m, c), encoded[worker],
                                scratch[worker]);
    if (!object.ok()) return object.status();
    *stored_bytes += object->size();
    return client_->PutObject(ChunkKey(prefix, c.file, c.index), *object);
  });
}

Result<CommittedBackend::PutOutcome> ObjectStoreBackend::Put(const fs::path& source, const SnapshotManifest& m,
                                                             bool /*just_completed: every chunk is read to be sent*/) {
  const std::string prefix = SnapshotPrefix(m.ns, m.name, m.id);
  auto existing = GetManifest(m.ns, m.name, m.id);
  if (existing.ok()) {
    // Committed before (a crash between the manifest's put and the status write).
    if (existing->chunk_list_sha256 == m.chunk_list_sha256) return PutOutcome{std::move(*existing), "already_committed"};
    return SnapshotCorruptError(Location(m.ns, m.name, m.id), "the store holds another snapshot under this id");
  }
  if (existing.status().reason() != kSnapshotNotFound) return existing.status();
  SnapshotManifest stored = m;
  stored.compression = codec_.compression();
  stored.encryption = codec_.encryption();
  stored.key_id = codec_.key() ? codec_.key()->id() : "";
  auto manifest = StoredManifestObject(stored, codec_.key());
  if (!manifest.ok()) return manifest.status();
  const auto start = std::chrono::steady_clock::now();
  std::atomic<uint64_t> stored_bytes{0};
  Status put = UploadChunks(source, stored, prefix, &stored_bytes);
  if (put.ok()) put = client_->PutObject(ManifestKey(prefix), *manifest);
  ObserveTransfer(TransferDirection::kUpload, stored, start, put.ok());
  if (TransferObserver* o = client_->observer(); o && put.ok() && stored.compression != Compression::kNone) {
    o->Compressed(static_cast<uint64_t>(stored.total_bytes), stored_bytes.load());
  }
  if (!put.ok()) {
    // No manifest: nothing looks committed. The chunks are removed now if the store lets us,
    // else by garbage collection later.
    if (Status d = DeleteUnder(prefix); !d.ok()) {
      spdlog::warn("component=snapshots op=commit actor={}/{} snapshot={} cleanup=failed error=\"{}\"", m.ns, m.name,
                   m.id, d.message());
    }
    return put;
  }
  KeepInCache(source, stored);
  return PutOutcome{std::move(stored), "uploaded"};
}

void ObjectStoreBackend::KeepInCache(const fs::path& source, const SnapshotManifest& m) {
  if (!cache_) return;
  // Hard links: no second copy on disk, and the node-local copy can be removed as before. Every
  // chunk was just read and checked against the manifest to be uploaded, and nothing writes a
  // snapshot's files after its checkpoint, so this copy is as verified as a download.
  auto hold = cache_->Hold(m.ns, m.name, m.id);
  const fs::path partial = PartialDir(cache_root_, m.ns, m.name, m.id);
  const fs::path complete = SnapshotDir(cache_root_, m.ns, m.name, m.id);
  std::error_code ec;
  fs::remove_all(partial, ec);
  for (const SnapshotFile& f : m.files) {
    if (ec) break;
    fs::create_directories((partial / f.path).parent_path(), ec);
    if (!ec) fs::create_hard_link(source / f.path, partial / f.path, ec);
  }
  Status s = ec ? Status(Code::kInternal, "link into " + partial.string() + ": " + ec.message(), kIoError)
                : WriteCachedManifest(partial, m);
  if (s.ok() && !fs::exists(complete, ec)) {
    fs::rename(partial, complete, ec);
    if (ec) s = Status(Code::kInternal, "rename " + partial.string() + ": " + ec.message(), kIoError);
  }
  fs::remove_all(partial, ec);
  if (!s.ok()) {
    // Only a resume here saved a download: it will download instead.
    spdlog::info("component=snapshots op=cache actor={}/{} snapshot={} result=skipped why=\"{}\"", m.ns, m.name, m.id,
                 s.message());
    return;
  }
  cache_->Touch(complete);
  (void)cache_->Enforce();
}

Status ObjectStoreBackend::Download(const std::string& prefix, const SnapshotManifest& m, const fs::path& partial) const {
  auto fds = CreateFiles(partial, m);
  if (!fds.ok()) return fds.status();
  const auto chunks = ChunksOf(m);
  const ChunkCodec codec = codec_.ForSnapshot(m.compression, m.encryption);
  std::vector<ChunkBuffers> buffers(WorkersFor(chunks.size(), transfers_));
  Status status = ParallelFor(chunks.size(), transfers_, [&](size_t j, size_t worker) -> Status {
    const ChunkSpan& c = chunks[j];
    const SnapshotFile& f = m.files[c.file];
    auto bytes = client_->GetObject(ChunkKey(prefix, c.file, c.index));
    if (!bytes.ok()) {
      if (bytes.status().reason() == kStoreObjectMissing) {
        return SnapshotCorruptError(Location(m.ns, m.name, m.id), f.path + " chunk " + std::to_string(c.index) + " is missing");
      }
      return bytes.status();
    }
    auto plain = codec.Decode(*bytes, PlaceOf(m, c), c.length, buffers[worker]);
    if (!plain.ok()) return ChunkDecodeError(m, c, plain.status());
    Sha256 hash;
    hash.Update(plain->data(), plain->size());
    const std::string got = hash.FinishHex();
    if (static_cast<int64_t>(plain->size()) != c.length || got != f.chunks[static_cast<size_t>(c.index)]) {
      return ChunkMismatchError(Location(m.ns, m.name, m.id), m, f, static_cast<size_t>(c.index), got);
    }
    if (!PwriteAll((*fds)[c.file], plain->data(), c.length, c.offset)) {
      return Status(Code::kInternal, Errno("write " + (partial / f.path).string()), kIoError);
    }
    return OkStatus();
  });
  for (int fd : *fds) close(fd);
  if (!status.ok()) return status;
  return WriteCachedManifest(partial, m);
}

Status ObjectStoreBackend::WriteCachedManifest(const fs::path& dir, const SnapshotManifest& m) {
  // Not fsynced: the copy is a cache. Its manifest records this boot, and a copy from another
  // boot (whose page cache may have been lost) is downloaded again, never trusted.
  SnapshotManifest cached = m;
  cached.deferred_sync_boot_id = ThisBootId();
  return WriteManifest(dir, cached, /*sync=*/false);
}

ChunkPlace ObjectStoreBackend::PlaceOf(const SnapshotManifest& m, const ChunkSpan& c) {
  return ChunkPlace{m.ns + "/" + m.name + "/" + m.id, m.chunk_list_sha256, c.file, c.index};
}

Status ObjectStoreBackend::ChunkDecodeError(const SnapshotManifest& m, const ChunkSpan& c, const Status& why) const {
  const std::string what = "snapshot " + Location(m.ns, m.name, m.id) + ": " + m.files[c.file].path + " chunk " +
                           std::to_string(c.index) + " (bytes " + std::to_string(c.offset) + "–" +
                           std::to_string(c.offset + c.length - 1) + "): " + why.message();
  return Status(why.code(), what, why.reason());
}

Result<CommittedBackend::Fetched> ObjectStoreBackend::Fetch(const std::string& ns, const std::string& name,
                                                            const std::string& id) const {
  if (cache_root_.empty()) {
    // Without a cache there is nowhere to download to (a relative path would land in the
    // working directory): the controller lists and removes, it never fetches.
    return Status(Code::kFailedPrecondition, "no download cache to fetch " + Location(ns, name, id) + " into",
                  kStoreNotWritable);
  }
  auto m = GetManifest(ns, name, id);
  if (!m.ok()) return m.status();
  const fs::path complete = SnapshotDir(cache_root_, ns, name, id);
  // Held before the cached copy is looked at: an eviction pass either removed it already or
  // leaves it to this restore.
  std::shared_ptr<const void> hold = cache_->Hold(ns, name, id);
  if (auto cached = ReadManifest(complete); cached.ok() && cached->chunk_list_sha256 == m->chunk_list_sha256 &&
                                             !cached->deferred_sync_boot_id.empty() &&
                                             cached->deferred_sync_boot_id == ThisBootId()) {
    cache_->Touch(complete);
    return Fetched{complete.string(), std::move(*m), std::move(hold)};
  }
  const fs::path partial = PartialDir(cache_root_, ns, name, id);
  std::error_code ec;
  // A stale copy (another snapshot under this id, or one a crash left) gives way first.
  if (fs::exists(complete, ec)) {
    if (Status s = RemoveSnapshotDir(complete.parent_path(), id); !s.ok()) return s;
  }
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return Status(Code::kInternal, "create " + partial.string() + ": " + ec.message(), kIoError);
  const auto start = std::chrono::steady_clock::now();
  Status got = Download(SnapshotPrefix(ns, name, id), *m, partial);
  ObserveTransfer(TransferDirection::kDownload, *m, start, got.ok());
  if (got.ok()) {
    fs::rename(partial, complete, ec);
    if (ec) got = Status(Code::kInternal, "rename " + partial.string() + ": " + ec.message(), kIoError);
  }
  if (!got.ok()) {
    fs::remove_all(partial, ec);
    return got;
  }
  cache_->Touch(complete);
  (void)cache_->Enforce();  // this copy is held: the others make room
  return Fetched{complete.string(), std::move(*m), std::move(hold)};
}

std::vector<SnapshotManifest> ObjectStoreBackend::List(const std::string& ns, const std::string& name) const {
  std::vector<SnapshotManifest> out;
  auto objects = client_->ListAllObjects(location_.prefix + ns + "/" + name + "/");
  if (!objects.ok()) return out;
  const std::string suffix = std::string("/") + kManifestFile;
  for (const auto& o : *objects) {
    if (o.key.size() <= suffix.size() || o.key.compare(o.key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string rest = o.key.substr(location_.prefix.size() + ns.size() + name.size() + 2);
    const std::string id = rest.substr(0, rest.size() - suffix.size());
    if (id.find('/') != std::string::npos) continue;
    auto m = GetManifest(ns, name, id);
    if (m.ok()) {
      out.push_back(std::move(*m));
    } else {
      // Left out, so never chosen for deletion: a sealed manifest under another key, or one
      // that does not read, is kept until someone who can read it decides.
      spdlog::warn("component=snapshots op=list actor={}/{} snapshot={} skipped=unread-manifest error=\"{}\"", ns, name, id,
                   m.status().ToString());
    }
  }
  std::sort(out.begin(), out.end(), [](const SnapshotManifest& a, const SnapshotManifest& b) {
    return std::tie(a.taken_at, a.id) < std::tie(b.taken_at, b.id);
  });
  return out;
}

void ObjectStoreBackend::ObserveTransfer(TransferDirection d, const SnapshotManifest& m,
                                         std::chrono::steady_clock::time_point start, bool ok) const {
  if (TransferObserver* o = client_->observer()) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    o->SnapshotTransfer(d, static_cast<uint64_t>(m.total_bytes), took.count(), ok);
  }
}

Status ObjectStoreBackend::DeleteUnder(const std::string& prefix) const {
  auto objects = client_->ListAllObjects(prefix);
  if (!objects.ok()) return objects.status();
  for (const auto& o : *objects) {
    if (Status s = client_->DeleteObject(o.key); !s.ok()) return s;
  }
  return OkStatus();
}

Status ObjectStoreBackend::Remove(const std::string& ns, const std::string& name, const std::string& id) {
  const std::string prefix = SnapshotPrefix(ns, name, id);
  // The manifest first: from then on the snapshot no longer looks committed to anyone.
  if (Status s = client_->DeleteObject(ManifestKey(prefix)); !s.ok()) return s;
  if (Status s = DeleteUnder(prefix); !s.ok()) return s;
  std::error_code ec;
  if (!cache_root_.empty() && fs::exists(SnapshotDir(cache_root_, ns, name, id), ec)) {
    if (Status s = RemoveSnapshotDir(ActorDir(cache_root_, ns, name), id); !s.ok()) return s;
    (void)cache_->Enforce();  // nothing to evict: the cache's size, reported
  }
  return OkStatus();
}

Result<bool> ObjectStoreBackend::Has(const std::string& ns, const std::string& name, const std::string& id) const {
  const std::string key = location_.prefix + ns + "/" + name + "/" + id + "/" + kManifestFile;
  auto objects = client_->ListAllObjects(key);
  if (!objects.ok()) return objects.status();
  for (const auto& o : *objects) {
    if (o.key == key) return true;
  }
  return false;
}

Status ObjectStoreBackend::CheckWritable() const {
  const std::string probe = location_.prefix + ".stasis-write-check-" + std::to_string(getpid()) + "-" +
                            std::to_string(std::random_device{}());
  Status s = client_->PutObject(probe, "x");
  if (s.ok()) s = client_->DeleteObject(probe);
  if (s.ok()) return OkStatus();
  return Status(Code::kFailedPrecondition,
                "snapshot store s3://" + location_.bucket + "/" + location_.prefix + " is not writable: " + s.message(),
                s.reason().empty() ? kStoreNotWritable : s.reason());
}

Result<int> ObjectStoreBackend::RemoveLeftovers() {
  if (cache_root_.empty()) return 0;  // no cache, no partial downloads
  const int removed = RemovePartialsUnder(cache_root_);
  // At start-up: a bound lowered since the last run applies at once, and the size is reported.
  (void)cache_->Enforce();
  return removed;
}

}  // namespace stasis
