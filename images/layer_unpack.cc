#include "images/layer_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <vector>

#include "base/sha256.h"
#include "images/layer_members.h"

namespace stasis::images {
namespace {

namespace fs = std::filesystem;
using layer::JoinPath;
using layer::MemberKind;
using ReadPtr = std::unique_ptr<archive, decltype(&archive_read_free)>;
using WritePtr = std::unique_ptr<archive, decltype(&archive_write_free)>;

constexpr size_t kBlock = 1 << 16;

std::string ArchiveError(archive* a) {
  const char* e = a ? archive_error_string(a) : nullptr;
  return e ? e : "unknown error";
}

Status HostFailure(const std::string& blob, const std::string& what) {
  return Status(Code::kInternal, "unpacking layer " + blob + ": " + what, pull_reason::kUnpackFailed);
}

// The layer's uncompressed bytes: an outer raw reader undoes the compression, every byte it
// yields is hashed (the diff ID) and handed to the inner tar reader through Read.
class HashedStream {
 public:
  HashedStream()
      : outer_(archive_read_new(), archive_read_free), buf_(kBlock) {}

  // The compressions the layer media types name, and those Docker detects. Not
  // archive_read_support_filter_all: it would run external programs (lrzip, grzip) chosen by
  // the blob's first bytes.
  std::string Open(const std::string& path) {
    archive* a = outer_.get();
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_filter_xz(a);
    archive_read_support_format_raw(a);
    archive_entry* entry = nullptr;
    if (archive_read_open_filename(a, path.c_str(), kBlock) != ARCHIVE_OK ||
        archive_read_next_header(a, &entry) != ARCHIVE_OK) {
      return ArchiveError(a);
    }
    return "";
  }

  static la_ssize_t Read(archive* inner, void* self, const void** buf) {
    auto* s = static_cast<HashedStream*>(self);
    const la_ssize_t n = archive_read_data(s->outer_.get(), s->buf_.data(), s->buf_.size());
    if (n < 0) {
      archive_set_error(inner, EIO, "%s", ArchiveError(s->outer_.get()).c_str());
      return ARCHIVE_FATAL;
    }
    s->sha_.Update(s->buf_.data(), static_cast<size_t>(n));
    *buf = s->buf_.data();
    return n;
  }

  // Reads what the tar reader left after its end-of-archive blocks (padding, a compressor's
  // trailer), so the diff ID covers the whole stream and a bad checksum at the end is seen.
  std::string Drain() {
    for (la_ssize_t n; (n = archive_read_data(outer_.get(), buf_.data(), buf_.size())) != 0;) {
      if (n < 0) return ArchiveError(outer_.get());
      sha_.Update(buf_.data(), static_cast<size_t>(n));
    }
    return "";
  }

  std::string DiffId() { return "sha256:" + sha_.FinishHex(); }

 private:
  ReadPtr outer_;
  Sha256 sha_;
  std::vector<char> buf_;
};

// Applies members one by one onto the root. Every path it touches is checked on disk first,
// component by component with lstat: a symlink a lower layer (or this one) left must never
// carry a write, a removal or a hardlink outside the root.
class Applier {
 public:
  Applier(std::string root, std::string blob, const UnpackOptions& options)
      : root_(std::move(root)),
        blob_(std::move(blob)),
        options_(options),
        disk_(archive_write_disk_new(), archive_write_free) {
    // No _SECURE_NOABSOLUTEPATHS: every name is prefixed with the (absolute) root, because
    // chdir would move every thread of the agent; absolute member names are refused above it.
    archive_write_disk_set_options(disk_.get(), ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_OWNER |
                                                    ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
  }

  Status Apply(archive* in, archive_entry* entry);
  Status Close() {
    if (archive_write_close(disk_.get()) != ARCHIVE_OK) {
      return HostFailure(blob_, "closing: " + ArchiveError(disk_.get()));
    }
    return OkStatus();
  }
  const UnpackedLayer& result() const { return result_; }

 private:
  Status Refuse(const std::string& name, const std::string& why) const {
    return Status(Code::kInvalidArgument, "layer " + blob_ + ": member \"" + name + "\" " + why, kBadLayer);
  }
  std::string Abs(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }
  std::string ParentRefusal(const std::vector<std::string>& parts, size_t n) const;
  std::string HardlinkRefusal(const std::string& target, const std::string& rel) const;
  bool WroteUnder(const std::string& rel) const;
  Status RemoveLower(const std::string& rel);
  Status EmptyOfLower(const std::string& dir_rel);
  Status Replace(const std::string& rel, bool is_dir);
  Status Write(archive* in, archive_entry* entry, const std::string& name, const std::string& rel);

  std::string root_;
  std::string blob_;
  UnpackOptions options_;
  WritePtr disk_;
  std::set<std::string> written_;  // paths this layer wrote, relative to the root
  UnpackedLayer result_;
};

// Why the first `n` components of `parts` may not be walked: one is a symlink or not a
// directory. Stops at the first missing one (the write creates the rest as directories).
std::string Applier::ParentRefusal(const std::vector<std::string>& parts, size_t n) const {
  for (size_t i = 1; i <= n && i <= parts.size(); ++i) {
    struct stat st {};
    const std::string rel = JoinPath(parts, i);
    if (lstat(Abs(rel).c_str(), &st) != 0) {
      if (errno == ENOENT) return "";
      return "cannot be checked: " + rel + ": " + std::strerror(errno);
    }
    if (S_ISLNK(st.st_mode)) return "lies under the symlink " + rel;
    if (!S_ISDIR(st.st_mode)) return "lies under " + rel + ", which is not a directory";
  }
  return "";
}

std::string Applier::HardlinkRefusal(const std::string& target, const std::string& rel) const {
  if (std::string why = layer::HardlinkTargetRefusal(target); !why.empty()) return why;
  const auto parts = layer::SplitPath(target);
  if (std::string why = ParentRefusal(parts, parts.size() - 1); !why.empty()) {
    return "is a hardlink whose target " + why;
  }
  const std::string target_rel = JoinPath(parts, parts.size());
  if (target_rel == rel) return "is a hardlink to itself";
  struct stat st {};
  if (lstat(Abs(target_rel).c_str(), &st) != 0) return "is a hardlink to " + target_rel + ", which does not exist";
  if (S_ISDIR(st.st_mode)) return "is a hardlink to the directory " + target_rel;
  return "";
}

bool Applier::WroteUnder(const std::string& rel) const {
  const std::string prefix = rel + "/";
  const auto it = written_.lower_bound(prefix);
  return it != written_.end() && it->compare(0, prefix.size(), prefix) == 0;
}

// Removes `rel` as far as lower layers made it: what this layer wrote there, or under it,
// stays (OCI: a whiteout hides only what the layers below have).
Status Applier::RemoveLower(const std::string& rel) {
  struct stat st {};
  if (lstat(Abs(rel).c_str(), &st) != 0) return OkStatus();
  if (!written_.count(rel) && !WroteUnder(rel)) {
    std::error_code ec;
    fs::remove_all(Abs(rel), ec);  // removes a symlink itself, never what it points to
    return ec ? HostFailure(blob_, "removing " + rel + ": " + ec.message()) : OkStatus();
  }
  return S_ISDIR(st.st_mode) ? EmptyOfLower(rel) : OkStatus();
}

Status Applier::EmptyOfLower(const std::string& dir_rel) {
  struct stat st {};
  if (lstat(Abs(dir_rel).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return OkStatus();
  std::vector<std::string> children;
  std::error_code ec;
  for (fs::directory_iterator it(Abs(dir_rel), ec), end; !ec && it != end; it.increment(ec)) {
    children.push_back(it->path().filename().string());
  }
  if (ec) return HostFailure(blob_, "listing " + Abs(dir_rel) + ": " + ec.message());
  for (const auto& child : children) {
    if (Status s = RemoveLower(dir_rel.empty() ? child : dir_rel + "/" + child); !s.ok()) return s;
  }
  return OkStatus();
}

// Clears the way for a member as Docker does: whatever is at its path goes, except a
// directory that a directory member merges into.
Status Applier::Replace(const std::string& rel, bool is_dir) {
  struct stat st {};
  if (rel.empty() || lstat(Abs(rel).c_str(), &st) != 0) return OkStatus();
  if (is_dir && S_ISDIR(st.st_mode)) return OkStatus();
  std::error_code ec;
  fs::remove_all(Abs(rel), ec);
  return ec ? HostFailure(blob_, "replacing " + rel + ": " + ec.message()) : OkStatus();
}

Status Applier::Write(archive* in, archive_entry* entry, const std::string& name, const std::string& rel) {
  archive_entry_set_pathname(entry, Abs(rel).c_str());
  if (const char* hard = archive_entry_hardlink(entry)) {
    const auto parts = layer::SplitPath(hard);
    archive_entry_set_hardlink(entry, Abs(JoinPath(parts, parts.size())).c_str());
  }
  archive* disk = disk_.get();
  if (archive_write_header(disk, entry) != ARCHIVE_OK) return HostFailure(blob_, name + ": " + ArchiveError(disk));
  const bool regular = archive_entry_filetype(entry) == AE_IFREG;
  const void* buf = nullptr;
  size_t size = 0;
  la_int64_t offset = 0;
  for (int r; (r = archive_read_data_block(in, &buf, &size, &offset)) != ARCHIVE_EOF;) {
    if (r != ARCHIVE_OK) return Refuse(name, "cannot be read: " + ArchiveError(in));
    if (archive_write_data_block(disk, buf, size, offset) != ARCHIVE_OK) {
      return HostFailure(blob_, name + ": " + ArchiveError(disk));
    }
    if (regular) result_.bytes += static_cast<int64_t>(size);
  }
  if (archive_write_finish_entry(disk) != ARCHIVE_OK) return HostFailure(blob_, name + ": " + ArchiveError(disk));
  if (!rel.empty()) written_.insert(rel);
  return OkStatus();
}

Status Applier::Apply(archive* in, archive_entry* entry) {
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr) raw = archive_entry_pathname_utf8(entry);
  if (raw == nullptr) return Refuse("", "has no readable name");
  const std::string name = raw;
  const layer::MemberName member = layer::ClassifyMember(name);
  if (!member.refusal.empty()) return Refuse(name, member.refusal);
  const auto& parts = member.parts;
  const std::string rel = JoinPath(parts, parts.size());
  ++result_.entries;
  switch (member.kind) {
    case MemberKind::kOpaque:
      if (std::string why = ParentRefusal(parts, parts.size()); !why.empty()) return Refuse(name, why);
      return EmptyOfLower(rel);
    case MemberKind::kWhiteout:
      if (std::string why = ParentRefusal(parts, parts.size() - 1); !why.empty()) return Refuse(name, why);
      return RemoveLower(rel);
    case MemberKind::kEntry:
      break;
  }
  const auto type = archive_entry_filetype(entry);
  if (type == AE_IFSOCK) return Refuse(name, "is a socket");
  if ((type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO) && !options_.allow_devices) {
    return Refuse(name, std::string(type == AE_IFIFO ? "is a FIFO" : "is a device") + " (not allowed on this node)");
  }
  if (rel.empty() && type != AE_IFDIR) return Refuse(name, "names the root but is not a directory");
  if (std::string why = ParentRefusal(parts, parts.size() - (parts.empty() ? 0 : 1)); !why.empty()) {
    return Refuse(name, why);
  }
  if (const char* hard = archive_entry_hardlink(entry)) {
    if (std::string why = HardlinkRefusal(hard, rel); !why.empty()) return Refuse(name, why);
  }
  if (Status s = Replace(rel, type == AE_IFDIR); !s.ok()) return s;
  return Write(in, entry, name, rel);
}

}  // namespace

Result<UnpackedLayer> ApplyLayer(const std::string& blob_path, const std::string& rootfs,
                                 const UnpackOptions& options) {
  std::error_code ec;
  // The root without symlinks: _SECURE_SYMLINKS checks every component of the prefixed names.
  const fs::path root = fs::canonical(rootfs, ec);
  if (ec || !fs::is_directory(root)) {
    return HostFailure(blob_path, "root " + rootfs + ": " + (ec ? ec.message() : "not a directory"));
  }
  if (!fs::is_regular_file(blob_path, ec)) return HostFailure(blob_path, "the blob is not a readable file");
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "layer " + blob_path + ": " + why, kBadLayer);
  };
  HashedStream stream;
  if (std::string why = stream.Open(blob_path); !why.empty()) return bad(why);
  ReadPtr inner(archive_read_new(), archive_read_free);
  archive_read_support_format_tar(inner.get());  // ustar, pax and GNU tar
  if (archive_read_open(inner.get(), &stream, nullptr, &HashedStream::Read, nullptr) != ARCHIVE_OK) {
    return bad(ArchiveError(inner.get()));
  }
  Applier applier(root.string(), blob_path, options);
  archive_entry* entry = nullptr;
  for (int r; (r = archive_read_next_header(inner.get(), &entry)) != ARCHIVE_EOF;) {
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return bad(ArchiveError(inner.get()));
    if (Status s = applier.Apply(inner.get(), entry); !s.ok()) return s;
  }
  if (Status s = applier.Close(); !s.ok()) return s;
  if (std::string why = stream.Drain(); !why.empty()) return bad(why);
  UnpackedLayer out = applier.result();
  out.diff_id = stream.DiffId();
  return out;
}

}  // namespace stasis::images
