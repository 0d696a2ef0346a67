// The reasons (Status::reason()) of snapshot failures, one spelling for every file of the
// snapshot store: conditions and metrics label failures by them, so they must not drift.
#pragma once

namespace stasis::snapshot_reason {

inline constexpr char kInvalidName[] = "invalid_name";
inline constexpr char kSnapshotNotFound[] = "snapshot_not_found";
inline constexpr char kSnapshotCorrupt[] = "snapshot_corrupt";
inline constexpr char kStoreNotWritable[] = "store_not_writable";
inline constexpr char kNoStore[] = "no_store";
inline constexpr char kIoError[] = "io_error";
// The manifest names another actor of the same namespace/name (an earlier life of it).
inline constexpr char kSnapshotOwnerMismatch[] = "snapshot_owner_mismatch";

}  // namespace stasis::snapshot_reason
