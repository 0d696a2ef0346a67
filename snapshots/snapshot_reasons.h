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
// The snapshot was encrypted with another key than this agent's (or it has none, or it has one
// and the snapshot is not encrypted): the right agent, or this one given the right key, can
// restore it, so it is retried, never failed.
inline constexpr char kSnapshotKeyMismatch[] = "snapshot_key_mismatch";

// Object storage (snapshots/s3_*.h).
// The s3:// location, endpoint or credentials are malformed or missing.
inline constexpr char kStoreConfigInvalid[] = "store_config_invalid";
// No answer: connection refused or reset, DNS, a deadline passed. Retryable.
inline constexpr char kStoreUnreachable[] = "store_unreachable";
// The store answered 5xx, 429 or SlowDown: overloaded or failing. Retryable.
inline constexpr char kStoreUnavailable[] = "store_unavailable";
// InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied, 401/403: wrong credentials.
inline constexpr char kStoreAuthFailed[] = "store_auth_failed";
// NoSuchBucket: the configured bucket does not exist.
inline constexpr char kStoreBucketMissing[] = "store_bucket_missing";
// NoSuchKey / NoSuchUpload / 404: the object (or multipart upload) is not there.
inline constexpr char kStoreObjectMissing[] = "store_object_missing";
// Any other 4xx, or an answer that cannot be read: retrying the same request will not help.
inline constexpr char kStoreRequestRejected[] = "store_request_rejected";

}  // namespace stasis::snapshot_reason
