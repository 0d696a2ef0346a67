// The directories of a Data snapshot (spec.snapshots.dataDirs): where each declared directory
// (a path inside the container) lives on the host, through the OCI bundle's bind mounts, and
// its archive inside a snapshot image.
//
// Invariants:
//  - A dataDir is usable only when it is, or lies under, the destination of a bind mount of a
//    host directory in the bundle's config.json, and its host directory, symlinks resolved,
//    stays inside that mount's source: never a path in the container's own root filesystem
//    (which a fresh boot would not keep), never one that escapes through a symlink.
//  - Archives are made by `tar` through RunCommand (argv only, a deadline, its own process
//    group; no user string reaches a shell) and unpacked in process by libarchive
//    (tar_extract.h), after every archive of the snapshot has been scanned: an archive with an
//    absolute, ".." or escaping link member, or a device, is refused before anything is emptied.
//  - A restore writes only into directories under the bundle's confinement root
//    (bundle_confinement.h in runtimes/, checked by the node agent before the restore).
//  - An image holds one archive per dataDir (`data-<i>.tar`) and `data-dirs.json`, which names
//    the container path of each: a restore maps them through the bundle of the node it runs on.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

struct DataDir {
  std::string container_path;  // as declared, normalized ("/data")
  std::string host_path;       // its directory on this host, symlinks resolved
};

// Maps every declared dataDir through the bind mounts of <bundle>/config.json. kInvalidArgument
// with reason "data_dir_unusable" when one cannot be mapped (the message says which and why).
Result<std::vector<DataDir>> ResolveDataDirs(const std::string& bundle,
                                             const std::vector<std::string>& data_dirs);

// Writes data-<i>.tar for each directory and data-dirs.json into `image_dir`. The caller
// freezes the sandbox first: the directories must not change while they are read. kInternal
// with reason "data_archive_failed" (tar's stderr quoted) on any failure, a timeout included.
Status ArchiveDataDirs(const std::vector<DataDir>& dirs, const std::string& image_dir,
                       std::chrono::milliseconds deadline);

// Replaces the contents of each directory named in <image_dir>/data-dirs.json, mapped through
// `bundle`, by its archive. The caller verifies the image's checksums and the bundle's
// confinement first (`confine_root`: the root ConfineBundle returned; every directory must lie
// strictly under it) and starts the sandbox only after this succeeds. Everything that can be
// refused is checked before the first directory is emptied. Reasons: "data_dir_unusable"
// (kInvalidArgument: the bundle no longer maps a directory, or maps it outside the root),
// "snapshot_corrupt" (kFailedPrecondition: no usable index, or an archive refused by
// ScanArchive), "data_restore_failed" (kInternal: libarchive or the file system failed).
Status RestoreDataDirs(const std::string& bundle, const std::string& image_dir, const std::string& confine_root,
                       std::chrono::milliseconds deadline);

}  // namespace stasis
