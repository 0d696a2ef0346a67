#include "snapshots/tar_extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <memory>
#include <set>
#include <sstream>
#include <vector>

namespace stasis {
namespace {

constexpr char kCorrupt[] = "snapshot_corrupt";
constexpr char kRestoreFailed[] = "data_restore_failed";

using ReadPtr = std::unique_ptr<archive, decltype(&archive_read_free)>;
using WritePtr = std::unique_ptr<archive, decltype(&archive_write_free)>;

std::vector<std::string> Parts(const std::string& path) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(path);
  while (std::getline(in, part, '/')) {
    if (!part.empty() && part != ".") out.push_back(part);
  }
  return out;
}

std::string Joined(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
  return out;
}

// Whether a relative symlink target, read from the member's own directory, stays in the tree.
bool TargetStaysInside(const std::vector<std::string>& member, const std::string& target) {
  long depth = static_cast<long>(member.size()) - 1;  // the directory holding the link
  for (const auto& p : Parts(target)) {
    depth += p == ".." ? -1 : 1;
    if (depth < 0) return false;
  }
  return true;
}

ReadPtr OpenRead(const std::string& path, std::string* error) {
  ReadPtr a(archive_read_new(), archive_read_free);
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    *error = archive_error_string(a.get()) ? archive_error_string(a.get()) : "cannot open";
    return ReadPtr(nullptr, archive_read_free);
  }
  return a;
}

// Why `entry` may not be unpacked, or "". `symlinks`: the symlink members seen so far.
std::string MemberProblem(archive_entry* entry, std::set<std::string>& symlinks) {
  const char* raw = archive_entry_pathname(entry);
  const std::string name = raw ? raw : "";
  if (!name.empty() && name.front() == '/') return "is an absolute path";
  const auto parts = Parts(name);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "..") return "has a \"..\" component";
    if (i + 1 < parts.size() && symlinks.count(Joined(parts, i + 1))) return "lies under the symlink " + Joined(parts, i + 1);
  }
  switch (archive_entry_filetype(entry)) {
    case AE_IFCHR: case AE_IFBLK: return "is a device";
    case AE_IFIFO: return "is a FIFO";
    case AE_IFSOCK: return "is a socket";
    default: break;
  }
  if (const char* hard = archive_entry_hardlink(entry)) {
    const std::string target = hard;
    if (target.empty() || target.front() == '/') return "is a hardlink to an absolute path";
    for (const auto& p : Parts(target)) {
      if (p == "..") return "is a hardlink with a \"..\" component";
    }
  }
  if (archive_entry_filetype(entry) == AE_IFLNK) {
    const char* t = archive_entry_symlink(entry);
    const std::string target = t ? t : "";
    if (target.empty() || target.front() == '/') return "is a symlink to the absolute path \"" + target + "\"";
    if (!TargetStaysInside(parts, target)) return "is a symlink to \"" + target + "\", outside the directory";
    symlinks.insert(Joined(parts, parts.size()));
  }
  return "";
}

}  // namespace

Status ScanArchive(const std::string& path) {
  std::string error;
  ReadPtr a = OpenRead(path, &error);
  if (!a) return Status(Code::kFailedPrecondition, "archive " + path + ": " + error, kCorrupt);
  std::set<std::string> symlinks;
  archive_entry* entry = nullptr;
  for (int r; (r = archive_read_next_header(a.get(), &entry)) != ARCHIVE_EOF;) {
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      return Status(Code::kFailedPrecondition, "archive " + path + ": " + archive_error_string(a.get()), kCorrupt);
    }
    if (std::string why = MemberProblem(entry, symlinks); !why.empty()) {
      const char* name = archive_entry_pathname(entry);
      return Status(Code::kFailedPrecondition,
                    "archive " + path + " refused: member \"" + (name ? name : "") + "\" " + why, kCorrupt);
    }
  }
  return OkStatus();
}

Status ExtractArchive(const std::string& path, const std::string& dest) {
  auto failed = [&](archive* a, const std::string& what) {
    const char* e = a ? archive_error_string(a) : nullptr;
    return Status(Code::kInternal, "unpacking " + path + " into " + dest + ": " + what + (e ? ": " + std::string(e) : ""),
                  kRestoreFailed);
  };
  std::string error;
  ReadPtr in = OpenRead(path, &error);
  if (!in) return failed(nullptr, error);
  WritePtr out(archive_write_disk_new(), archive_write_free);
  // No ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS: every name is prefixed with `dest` (the agent is
  // multithreaded; chdir would move every thread), and the scan refused absolute names.
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_OWNER |
                                                ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
  archive_entry* entry = nullptr;
  for (int r; (r = archive_read_next_header(in.get(), &entry)) != ARCHIVE_EOF;) {
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return failed(in.get(), "reading");
    archive_entry_set_pathname(entry, (dest + "/" + archive_entry_pathname(entry)).c_str());
    if (const char* hard = archive_entry_hardlink(entry)) {
      archive_entry_set_hardlink(entry, (dest + "/" + hard).c_str());
    }
    if (archive_write_header(out.get(), entry) != ARCHIVE_OK) return failed(out.get(), archive_entry_pathname(entry));
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    for (int d; (d = archive_read_data_block(in.get(), &buf, &size, &offset)) != ARCHIVE_EOF;) {
      if (d != ARCHIVE_OK) return failed(in.get(), archive_entry_pathname(entry));
      if (archive_write_data_block(out.get(), buf, size, offset) != ARCHIVE_OK) {
        return failed(out.get(), archive_entry_pathname(entry));
      }
    }
    if (archive_write_finish_entry(out.get()) != ARCHIVE_OK) return failed(out.get(), archive_entry_pathname(entry));
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) return failed(out.get(), "closing");
  return OkStatus();
}

}  // namespace stasis
