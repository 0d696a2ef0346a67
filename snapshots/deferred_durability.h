// What makes a kDeferred (pause) snapshot durable after it is complete: the boot it was
// completed in, and the checksums it was completed without. SnapshotStore's background jobs
// (EnqueueDeferred, ResumePendingChecksums, in deferred_durability.cc) are built on these.
// Invariant: a manifest loses checksumsPending only by being replaced, synced, by one that
// has every checksum — a reader sees the old manifest or the new one, never a mix.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"

namespace stasis {

// The kernel's id of this boot: a page cache that was not written back is lost only across
// a change of it. "" if unreadable (then every deferred snapshot counts as from another boot).
std::string ThisBootId();

// Computes the checksums a kDeferred snapshot in `dir` was completed without, and replaces
// its manifest with one that has them. OK at once when none are pending; kNotFound when the
// snapshot was removed meanwhile (a resume, a delete: not an error). The chunks are hashed on
// `threads` threads (0: every CPU).
Status FillPendingChecksums(const std::filesystem::path& dir, int threads = 0);

// Verifies a complete format-1 snapshot in `dir` (one sha256 per file) and replaces its
// manifest with a format-2 one (chunk digests) of the same files; snapshot_corrupt when the
// files do not match the old manifest.
Status UpgradeToChunked(const std::filesystem::path& dir, const std::string& ns, const std::string& name,
                        const std::string& id, int threads = 0);

}  // namespace stasis
