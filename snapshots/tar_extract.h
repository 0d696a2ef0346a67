// Unpacking a Data snapshot's archive into a host directory as root, without letting the archive
// choose where anything lands. Everything is read with libarchive, in process.
//
// Invariants:
//  - ScanArchive reads the whole archive and refuses it when any member is absolute, has a ".."
//    component, lies under an earlier symlink member, is a device, FIFO or socket, or is a link
//    whose target leaves the tree (a symlink to an absolute path or above the top; a hardlink
//    to anything but a relative, clean member name). Nothing is written.
//  - ExtractArchive writes only under `dest` (the member names prefixed with it), with
//    libarchive's ARCHIVE_EXTRACT_SECURE_SYMLINKS and _SECURE_NODOTDOT as a second line behind
//    the scan; owners are numeric and permissions kept, as `tar --numeric-owner -p` would.
//  - A caller scans every archive before it empties a directory: an archive that would be
//    refused must never cost the data already there.
#pragma once

#include <string>

#include "base/status.h"

namespace stasis {

// kFailedPrecondition with reason "snapshot_corrupt", naming the member and the rule, when the
// archive cannot be read or would be refused.
[[nodiscard]] Status ScanArchive(const std::string& archive);

// kInternal with reason "data_restore_failed" on any failure (libarchive's message quoted).
[[nodiscard]] Status ExtractArchive(const std::string& archive, const std::string& dest);

}  // namespace stasis
