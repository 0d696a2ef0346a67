#include "tests/support/oci_test_image.h"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/sha256.h"
#include "base/subprocess.h"
#include "images/oci_manifest.h"

namespace stasis::testing {
namespace {

using nlohmann::json;
namespace mt = images::media_type;

constexpr char kRefName[] = "org.opencontainers.image.ref.name";
constexpr char kCounterScript[] =
    "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done";

la_ssize_t AppendTo(struct archive*, void* user, const void* buffer, size_t length) {
  static_cast<std::string*>(user)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

Status ArchiveError(struct archive* a, const std::string& what) {
  std::string message =
      what + ": " + (archive_error_string(a) ? archive_error_string(a) : "libarchive failed");
  archive_write_free(a);
  return Status(Code::kInternal, message);
}

// The uncompressed tar of `members` (pax, numeric owners root:root, mtime 0).
Result<std::string> WriteTar(const std::vector<LayerMember>& members) {
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open2(a, &out, nullptr, AppendTo, nullptr, nullptr) != ARCHIVE_OK) {
    return ArchiveError(a, "opening the tar");
  }
  for (const LayerMember& m : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_mtime(e, 0, 0);
    switch (m.kind) {
      case LayerMember::Kind::kFile:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, static_cast<la_int64_t>(m.content.size()));
        break;
      case LayerMember::Kind::kDir:
        archive_entry_set_filetype(e, AE_IFDIR);
        break;
      case LayerMember::Kind::kSymlink:
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, m.content.c_str());
        break;
      case LayerMember::Kind::kHardlink:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, m.content.c_str());
        break;
    }
    archive_entry_set_perm(e, static_cast<mode_t>(m.mode));
    int rc = archive_write_header(a, e);
    if (rc == ARCHIVE_OK && m.kind == LayerMember::Kind::kFile && !m.content.empty()) {
      rc = archive_write_data(a, m.content.data(), m.content.size()) < 0 ? ARCHIVE_FATAL
                                                                         : ARCHIVE_OK;
    }
    archive_entry_free(e);
    if (rc != ARCHIVE_OK) return ArchiveError(a, "writing member " + m.name);
  }
  if (archive_write_close(a) != ARCHIVE_OK) return ArchiveError(a, "closing the tar");
  archive_write_free(a);
  return out;
}

// `tar` through libarchive's gzip or zstd filter, as one raw stream.
Result<std::string> Compress(const std::string& tar, LayerCompression compression) {
  if (compression == LayerCompression::kNone) return tar;
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_set_format_raw(a);
  int rc = compression == LayerCompression::kGzip ? archive_write_add_filter_gzip(a)
                                                  : archive_write_add_filter_zstd(a);
  if (rc != ARCHIVE_OK) return ArchiveError(a, "adding the compression filter");
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open2(a, &out, nullptr, AppendTo, nullptr, nullptr) != ARCHIVE_OK) {
    return ArchiveError(a, "opening the compressed stream");
  }
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, "layer.tar");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_size(e, static_cast<la_int64_t>(tar.size()));
  rc = archive_write_header(a, e);
  archive_entry_free(e);
  if (rc != ARCHIVE_OK || archive_write_data(a, tar.data(), tar.size()) < 0)
    return ArchiveError(a, "compressing");
  if (archive_write_close(a) != ARCHIVE_OK) return ArchiveError(a, "closing the compressed stream");
  archive_write_free(a);
  return out;
}

const char* LayerMediaType(LayerCompression c) {
  switch (c) {
    case LayerCompression::kNone:
      return mt::kOciLayerTar;
    case LayerCompression::kGzip:
      return mt::kOciLayerGzip;
    case LayerCompression::kZstd:
      return mt::kOciLayerZstd;
  }
  return mt::kOciLayerTar;
}

Result<BuiltBlob> WriteBlob(const std::string& layout, const std::string& media_type,
                            const std::string& bytes) {
  BuiltBlob blob{media_type, Sha256Digest(bytes), static_cast<int64_t>(bytes.size())};
  std::string path = layout + "/blobs/sha256/" + blob.digest.substr(7);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Status(Code::kInternal, "writing " + path);
  return blob;
}

json Descriptor(const BuiltBlob& b) {
  return json{{"mediaType", b.media_type}, {"digest", b.digest}, {"size", b.size}};
}

json PlatformJson(const TestImage& image) {
  json p{{"os", image.os}, {"architecture", image.architecture}};
  if (!image.variant.empty()) p["variant"] = image.variant;
  return p;
}

json ConfigJson(const TestImage& image, const std::vector<std::string>& diff_ids) {
  json config = json::object();
  if (!image.entrypoint.empty()) config["Entrypoint"] = image.entrypoint;
  if (!image.cmd.empty()) config["Cmd"] = image.cmd;
  if (!image.env.empty()) config["Env"] = image.env;
  if (!image.working_dir.empty()) config["WorkingDir"] = image.working_dir;
  if (!image.user.empty()) config["User"] = image.user;
  json doc = PlatformJson(image);
  doc["config"] = config;
  doc["rootfs"] = json{{"type", "layers"}, {"diff_ids", diff_ids}};
  return doc;
}

Result<BuiltManifest> WriteImage(const std::string& layout, const TestImage& image) {
  BuiltManifest built;
  for (const TestLayer& layer : image.layers) {
    auto tar = WriteTar(layer.members);
    if (!tar.ok()) return tar.status();
    built.diff_ids.push_back(Sha256Digest(*tar));
    auto compressed = Compress(*tar, layer.compression);
    if (!compressed.ok()) return compressed.status();
    auto blob = WriteBlob(layout, LayerMediaType(layer.compression), *compressed);
    if (!blob.ok()) return blob.status();
    built.layers.push_back(*blob);
  }
  auto config = WriteBlob(layout, mt::kOciConfig, ConfigJson(image, built.diff_ids).dump());
  if (!config.ok()) return config.status();
  built.config = *config;
  json manifest{{"schemaVersion", 2},
                {"mediaType", mt::kOciManifest},
                {"config", Descriptor(built.config)},
                {"layers", json::array()}};
  for (const BuiltBlob& l : built.layers) manifest["layers"].push_back(Descriptor(l));
  auto written = WriteBlob(layout, mt::kOciManifest, manifest.dump());
  if (!written.ok()) return written.status();
  built.manifest = *written;
  return built;
}

// index.json: the layout's tags, `tag` now naming `target` (replacing what it named).
Status AddTag(const std::string& layout, const std::string& tag, const BuiltBlob& target) {
  json index{{"schemaVersion", 2}, {"mediaType", mt::kOciIndex}, {"manifests", json::array()}};
  std::ifstream in(layout + "/index.json");
  if (in) index = json::parse(in, nullptr, false);
  if (index.is_discarded()) return Status(Code::kInternal, layout + "/index.json is not JSON");
  json kept = json::array();
  for (const json& m : index["manifests"]) {
    if (m.value("annotations", json::object()).value(kRefName, "") != tag) kept.push_back(m);
  }
  json entry = Descriptor(target);
  entry["annotations"] = json{{kRefName, tag}};
  kept.push_back(entry);
  index["manifests"] = kept;
  std::ofstream out(layout + "/index.json", std::ios::trunc);
  out << index.dump();
  std::ofstream(layout + "/oci-layout", std::ios::trunc) << R"({"imageLayoutVersion":"1.0.0"})";
  return out ? OkStatus() : Status(Code::kInternal, "writing " + layout + "/index.json");
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

LayerMember LayerMember::File(std::string name, std::string content, int mode) {
  return {Kind::kFile, std::move(name), std::move(content), mode};
}
LayerMember LayerMember::Dir(std::string name, int mode) {
  return {Kind::kDir, std::move(name), "", mode};
}
LayerMember LayerMember::Symlink(std::string name, std::string target) {
  return {Kind::kSymlink, std::move(name), std::move(target), 0777};
}
LayerMember LayerMember::Hardlink(std::string name, std::string target) {
  return {Kind::kHardlink, std::move(name), std::move(target), 0644};
}

std::string Sha256Digest(const std::string& bytes) { return "sha256:" + Sha256Hex(bytes); }

TestLayer BusyboxLayer(LayerCompression compression) {
  TestLayer layer;
  layer.compression = compression;
  for (const char* d : {"bin", "proc", "dev", "sys", "etc"})
    layer.members.push_back(LayerMember::Dir(d));
  layer.members.push_back(LayerMember::Dir("tmp", 01777));
  layer.members.push_back(LayerMember::File("bin/busybox", ReadWhole("/bin/busybox"), 0755));
  for (const char* applet : {"sh", "cat", "echo", "sleep", "ls", "test", "true", "wc", "date"}) {
    layer.members.push_back(LayerMember::Symlink(std::string("bin/") + applet, "busybox"));
  }
  return layer;
}

TestImage CounterImage(const std::string& architecture) {
  TestImage image;
  image.layers = {BusyboxLayer()};
  image.entrypoint = {"/bin/sh", "-c", kCounterScript};
  image.env = {"PATH=/bin", "HOME=/"};
  image.working_dir = "/";
  image.architecture = architecture;
  return image;
}

Result<BuiltImage> WriteOciLayout(const std::string& layout_dir, const std::string& tag,
                                  const std::vector<TestImage>& platforms) {
  if (platforms.empty()) return Status(Code::kInvalidArgument, "no image to write");
  std::error_code ec;
  std::filesystem::create_directories(layout_dir + "/blobs/sha256", ec);
  if (ec) return Status(Code::kInternal, "mkdir " + layout_dir + ": " + ec.message());
  BuiltImage built;
  for (const TestImage& image : platforms) {
    auto m = WriteImage(layout_dir, image);
    if (!m.ok()) return m.status();
    built.platforms.push_back(*m);
  }
  built.target = built.platforms[0].manifest;
  if (platforms.size() > 1) {
    json index{{"schemaVersion", 2}, {"mediaType", mt::kOciIndex}, {"manifests", json::array()}};
    for (size_t i = 0; i < platforms.size(); ++i) {
      json entry = Descriptor(built.platforms[i].manifest);
      entry["platform"] = PlatformJson(platforms[i]);
      index["manifests"].push_back(entry);
    }
    auto written = WriteBlob(layout_dir, mt::kOciIndex, index.dump());
    if (!written.ok()) return written.status();
    built.target = *written;
  }
  if (Status s = AddTag(layout_dir, tag, built.target); !s.ok()) return s;
  return built;
}

Status PushOciLayout(const std::string& layout_dir, const std::string& tag,
                     const TestRegistry& registry, const std::string& repository) {
  std::string cert_dir = std::filesystem::path(registry.ca_file()).parent_path();
  // --insecure-policy: no signature policy for a test image; --preserve-digests: the registry
  // holds exactly the bytes (and so the digests) the test computed, or the push fails.
  std::vector<std::string> argv = {"/usr/bin/skopeo",    "--insecure-policy", "copy",  "--all",
                                   "--preserve-digests", "--dest-cert-dir",   cert_dir};
  if (registry.plain_http()) argv.push_back("--dest-tls-verify=false");
  if (registry.credentials()) {
    argv.push_back("--dest-creds");
    argv.push_back(registry.credentials()->username + ":" + registry.credentials()->password);
  }
  argv.push_back("oci:" + layout_dir + ":" + tag);
  argv.push_back("docker://" + registry.host() + "/" + repository + ":" + tag);
  auto r = RunCommand(argv, std::chrono::minutes(5));
  if (!r.ok()) return r.status();
  if (!r->success())
    return Status(Code::kInternal, "skopeo copy failed: " + r->Summary() + "\n" + r->err);
  return OkStatus();
}

}  // namespace stasis::testing
