// Test images made by the tests themselves, never pulled from the internet: layers written
// with libarchive (tar; gzip, zstd or none per layer) from the busybox counter (Debian's
// busybox-static) and any members a fault test wants (files, directories, symlinks, hardlinks;
// a whiteout is just a member named ".wh.<name>"), an image config whose rootfs.diff_ids are
// the layers' real uncompressed digests, written as an OCI image layout (oci-layout,
// index.json, blobs/sha256/…) and pushed to a TestRegistry with skopeo, digests preserved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "tests/support/test_registry.h"

namespace stasis::testing {

struct LayerMember {
  enum class Kind { kFile, kDir, kSymlink, kHardlink };
  Kind kind = Kind::kFile;
  std::string name;     // as written in the tar ("bin/sh"; "../x" and "/x" too, for fault tests)
  std::string content;  // a file's bytes; a symlink's or hardlink's target
  int mode = 0644;

  static LayerMember File(std::string name, std::string content, int mode = 0644);
  static LayerMember Dir(std::string name, int mode = 0755);
  static LayerMember Symlink(std::string name, std::string target);
  static LayerMember Hardlink(std::string name, std::string target);
};

enum class LayerCompression { kNone, kGzip, kZstd };

struct TestLayer {
  std::vector<LayerMember> members;
  LayerCompression compression = LayerCompression::kGzip;
};

struct TestImage {
  std::vector<TestLayer> layers;  // bottom first
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;
  std::string working_dir;
  std::string user;
  std::string os = "linux";
  std::string architecture = "amd64";
  std::string variant;
};

// /bin/busybox with the counter's applets linked to it, and the directories a rootfs needs.
TestLayer BusyboxLayer(LayerCompression compression = LayerCompression::kGzip);
// The counter of hack/make-bundle.sh as an image: busybox, and an entrypoint that writes an
// increasing number to /tmp/counter ten times a second.
TestImage CounterImage(const std::string& architecture = "amd64");

struct BuiltBlob {
  std::string media_type;
  std::string digest;  // "sha256:…"
  int64_t size = 0;
};

struct BuiltManifest {
  BuiltBlob manifest;
  BuiltBlob config;
  std::vector<BuiltBlob> layers;
  std::vector<std::string> diff_ids;
};

struct BuiltImage {
  BuiltBlob target;                      // what the tag names: a manifest, or an index
  std::vector<BuiltManifest> platforms;  // one per TestImage, in order
};

// Writes (or adds `tag` to) the OCI image layout at `layout_dir`: one image is tagged as its
// manifest, several as an index of them (one per platform).
[[nodiscard]] Result<BuiltImage> WriteOciLayout(const std::string& layout_dir,
                                                const std::string& tag,
                                                const std::vector<TestImage>& platforms);

// skopeo copy --all --preserve-digests of oci:<layout_dir>:<tag> to
// docker://<registry>/<repository>:<tag>, trusting the registry's CA and with its credentials.
[[nodiscard]] Status PushOciLayout(const std::string& layout_dir, const std::string& tag,
                                   const TestRegistry& registry, const std::string& repository);

// "sha256:<hex>" of `bytes`.
std::string Sha256Digest(const std::string& bytes);

}  // namespace stasis::testing
