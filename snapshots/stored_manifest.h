// The manifest object of a snapshot in an object store: its manifest.json as text, or — when
// the snapshot is encrypted — that text sealed (aes_gcm.h) in an envelope that names the key:
//   {"sealedManifest": 1, "encryption": "aes-256-gcm", "keyId": "<16 hex>",
//    "sealed": "<hex of nonce ‖ ciphertext ‖ tag>"}
// Sealing the manifest keeps from the store what it would otherwise reveal: the actor's uid,
// runtime and times, and the plaintext chunk digests, which show which chunks are equal across
// snapshots and let a guessed chunk be confirmed. The envelope's key id lets a reader holding
// another key be refused by name before any chunk is downloaded. The AAD is the snapshot's
// namespace/name/id and the key id, so a manifest copied under another snapshot's key fails.
//
// What a reader accepts (its agent's key against the object):
//   sealed, same key id        → opened, and its manifest must say aes-256-gcm with that id
//   sealed, other key or none  → snapshot_key_mismatch naming both ids
//   plain, agent has no key    → read as before (encryption none)
//   plain, agent has a key     → snapshot_key_mismatch: an agent with a key restores only what
//                                its key sealed, so whoever can write to the store cannot
//                                substitute a snapshot of their own making
#pragma once

#include <string>

#include "base/status.h"
#include "snapshots/encryption_key.h"
#include "snapshots/manifest.h"

namespace stasis {

// The object's text for `m`: sealed under `key` when m.encryption is aes-256-gcm (the caller
// passes the key whose id m.key_id is), else the manifest's text. kInternal when sealing fails.
Result<std::string> StoredManifestObject(const SnapshotManifest& m, const EncryptionKey* key);

// The manifest from the object of snapshot ns/name/id, by the rules above. `where` names the
// object in messages. kFailedPrecondition snapshot_corrupt for an object that does not parse,
// does not authenticate or contradicts itself; snapshot_key_mismatch as above.
Result<SnapshotManifest> ParseStoredManifest(const std::string& object, const EncryptionKey* key,
                                             const std::string& snapshot, const std::string& where);

}  // namespace stasis
