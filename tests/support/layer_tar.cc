#include "tests/support/layer_tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "base/sha256.h"

namespace stasis::testing {

TarMember TarFile(const std::string& name, const std::string& content, int mode) {
  return {name, TarType::kFile, content, mode};
}
TarMember TarDir(const std::string& name, int mode) { return {name, TarType::kDir, "", mode}; }
TarMember TarSymlink(const std::string& name, const std::string& target) {
  return {name, TarType::kSymlink, target, 0777};
}
TarMember TarHardlink(const std::string& name, const std::string& target) {
  return {name, TarType::kHardlink, target, 0644};
}
TarMember TarCharDevice(const std::string& name) { return {name, TarType::kCharDevice, "", 0666}; }
TarMember TarFifo(const std::string& name) { return {name, TarType::kFifo, "", 0644}; }

namespace {

mode_t FileType(TarType type) {
  switch (type) {
    case TarType::kDir: return AE_IFDIR;
    case TarType::kSymlink: return AE_IFLNK;
    case TarType::kCharDevice: return AE_IFCHR;
    case TarType::kFifo: return AE_IFIFO;
    case TarType::kFile:
    case TarType::kHardlink: break;
  }
  return AE_IFREG;
}

void WriteMember(archive* a, const TarMember& m) {
  std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
  archive_entry_set_pathname(e.get(), m.name.c_str());
  archive_entry_set_filetype(e.get(), FileType(m.type));
  archive_entry_set_perm(e.get(), m.mode);
  archive_entry_set_uid(e.get(), m.uid);
  archive_entry_set_gid(e.get(), m.gid);
  archive_entry_set_mtime(e.get(), m.mtime, 0);
  if (m.type == TarType::kSymlink) archive_entry_set_symlink(e.get(), m.data.c_str());
  if (m.type == TarType::kHardlink) archive_entry_set_hardlink(e.get(), m.data.c_str());
  if (m.type == TarType::kCharDevice) archive_entry_set_rdev(e.get(), makedev(1, 3));
  const bool has_data = m.type == TarType::kFile;
  archive_entry_set_size(e.get(), has_data ? static_cast<la_int64_t>(m.data.size()) : 0);
  ASSERT_EQ(archive_write_header(a, e.get()), ARCHIVE_OK) << m.name << ": " << archive_error_string(a);
  if (has_data && !m.data.empty()) {
    ASSERT_EQ(archive_write_data(a, m.data.data(), m.data.size()), static_cast<la_ssize_t>(m.data.size()));
  }
}

}  // namespace

void WriteTar(const std::string& path, const std::vector<TarMember>& members, TarFilter filter) {
  std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(), archive_write_free);
  ASSERT_EQ(archive_write_set_format_pax_restricted(a.get()), ARCHIVE_OK);
  if (filter == TarFilter::kGzip) {
    ASSERT_EQ(archive_write_add_filter_gzip(a.get()), ARCHIVE_OK);
  } else if (filter == TarFilter::kZstd) {
    ASSERT_EQ(archive_write_add_filter_zstd(a.get()), ARCHIVE_OK);
  }
  ASSERT_EQ(archive_write_open_filename(a.get(), path.c_str()), ARCHIVE_OK) << archive_error_string(a.get());
  for (const auto& m : members) ASSERT_NO_FATAL_FAILURE(WriteMember(a.get(), m));
  ASSERT_EQ(archive_write_close(a.get()), ARCHIVE_OK) << archive_error_string(a.get());
}

std::string Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  Sha256 sha;
  char buf[1 << 14];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) sha.Update(buf, static_cast<size_t>(in.gcount()));
  return "sha256:" + sha.FinishHex();
}

LayerWorkspace::LayerWorkspace() : dir_("stasis-layer-") {
  std::filesystem::create_directories(rootfs());
  std::filesystem::create_directories(dir_.path() / "layers");
  dir_.Write("outside/sentinel", "sentinel\n");
}

std::string LayerWorkspace::Blob(const std::vector<TarMember>& members, TarFilter filter) {
  const std::string path = (dir_.path() / "layers" / ("layer" + std::to_string(++layers_))).string();
  WriteTar(path, members, filter);
  return path;
}

Result<images::UnpackedLayer> LayerWorkspace::Apply(const std::vector<TarMember>& members, TarFilter filter,
                                                    const images::UnpackOptions& options) {
  return images::ApplyLayer(Blob(members, filter), rootfs().string(), options);
}

std::string LayerWorkspace::Escapes() const {
  namespace fs = std::filesystem;
  std::string out;
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    const std::string name = e.path().filename().string();
    if (name != "rootfs" && name != "outside" && name != "layers") out += "new entry " + name + "; ";
  }
  for (const auto& e : fs::recursive_directory_iterator(outside())) {
    if (e.path().filename() != "sentinel") out += "new entry outside/" + e.path().filename().string() + "; ";
  }
  if (dir_.Read("outside/sentinel") != "sentinel\n") out += "outside/sentinel changed or gone; ";
  if (fs::exists(fs::symlink_status(fs::path("/etc") / kEtcProbe))) out += std::string("/etc/") + kEtcProbe + " made; ";
  return out;
}

}  // namespace stasis::testing
