// Applying one image layer (a tar stream, plain, gzip or zstd) onto a root filesystem being
// built, as root, without letting the layer choose where anything lands. Read with libarchive
// in process: an outer raw reader decompresses (gzip, zstd, bzip2, xz: not every filter
// libarchive has, some of which run external programs) and hashes the uncompressed bytes — the layer's diff ID, checked against the image config — while an inner
// tar reader takes its members from that stream.
//
// Rules (OCI image-spec "Applying Changesets"):
//  - ".wh.<name>" removes <name> of the layers below; ".wh..wh..opq" empties its directory of
//    what the layers below put there (what this layer itself adds stays, whatever the order of
//    the members in the tar);
//  - refused with reason "bad_layer" (kInvalidArgument) naming the member: an absolute name, a
//    ".." component, a member that would be written through a symlink (one of this layer or a
//    layer below), a hardlink whose target is absolute, has "..", or goes through a symlink,
//    device nodes and FIFOs unless allowed, a whiteout of "." or of nothing;
//  - a symlink's target is written as it is: the sandbox resolves it inside its own root, and
//    the agent never follows one (ARCHIVE_EXTRACT_SECURE_SYMLINKS and _SECURE_NODOTDOT are set
//    as a second line behind these checks; _SECURE_NOABSOLUTEPATHS cannot be, as members are
//    written under the absolute rootfs path: chdir would move every thread of the agent);
//  - a member replaces what lower layers have at its path (a file, a symlink, a whole
//    directory), except a directory, which a directory member merges into (as Docker does);
//  - owners are numeric, modes and mtimes kept (tar --numeric-owner -p).
// A refused or broken layer leaves `rootfs` partly written: the caller unpacks into a private
// temporary directory and removes it on failure (image_store.h).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "images/image_reasons.h"

namespace stasis::images {

inline constexpr const char* kBadLayer = pull_reason::kBadLayer;

struct UnpackOptions {
  bool allow_devices = false;  // device nodes and FIFOs (an operator's choice per node)
};

struct UnpackedLayer {
  std::string diff_id;        // "sha256:…" of the uncompressed tar stream
  int64_t bytes = 0;          // regular files' bytes written
  int64_t entries = 0;        // members applied (whiteouts included)
};

// kInvalidArgument "bad_layer" for a refused member or an unreadable archive (libarchive's
// message quoted); kInternal "unpack_failed" for a write that failed on the host.
[[nodiscard]] Result<UnpackedLayer> ApplyLayer(const std::string& blob_path, const std::string& rootfs,
                                               const UnpackOptions& options = {});

}  // namespace stasis::images
